/// The control protocol: one JSON object per line, each request answered by one
/// reply line. Version 1. Requests: `{"v":1,"cmd":"status"}`; `lock`, `reset`,
/// `enable`, `toggle`, `events`, `quit`; `{"v":1,"cmd":"inhibit","why":"video",
/// "for_ms":60000}` (without `for_ms`: while the connection stays open);
/// `{"v":1,"cmd":"disable","for_ms":…}`. Replies: `{"v":1,"ok":true,…}` or
/// `{"v":1,"ok":false,"error":"…"}`. After `events` the connection carries one
/// event object per line. There is no unlock request: unlocking is the locker's
/// job alone, so nothing that can reach the socket can open the screen.
public enum ControlRequest: Equatable, Sendable {
    case status
    case lock
    case reset
    case inhibit(why: String, duration: Millis?)
    case disable(duration: Millis?)
    case enable
    case toggle
    case events
    case quit

    public static let version = 1
    /// Longest request line the agent reads.
    public static let maxLineBytes = 64 * 1024

    public static func parse(_ line: String) throws(ProtocolError) -> ControlRequest {
        let json: JSONValue
        do { json = try JSONValue(parsing: line) } catch { throw ProtocolError("malformed request: \(error.message)") }
        guard case .object = json else { throw ProtocolError("malformed request: expected a JSON object") }
        guard let v = json["v"]?.integer else { throw ProtocolError("request has no protocol version \"v\"") }
        guard v == Int64(version) else { throw ProtocolError("unsupported protocol version \(v) (this agent speaks \(version))") }
        guard let cmd = json["cmd"]?.string else { throw ProtocolError("request has no \"cmd\"") }
        func duration() throws(ProtocolError) -> Millis? {
            guard let field = json["for_ms"], field != .null else { return nil }
            guard let ms = field.integer, ms > 0, ms <= Millis.limit else {
                throw ProtocolError("\"for_ms\" must be a whole number of milliseconds above zero")
            }
            return Millis(ms)
        }
        switch cmd {
        case "status": return .status
        case "lock": return .lock
        case "reset": return .reset
        case "enable": return .enable
        case "toggle": return .toggle
        case "events": return .events
        case "quit": return .quit
        case "disable": return .disable(duration: try duration())
        case "inhibit":
            // Cut, not refused: a client library that says a little too much still inhibits.
            let why = ClientText.clipped(json["why"]?.string ?? "")
            return .inhibit(why: why, duration: try duration())
        default:
            throw ProtocolError("unknown command '\(cmd.prefix(40))'")
        }
    }

    /// The request as a line, without the newline.
    public var line: String {
        var members: [(String, JSONValue)] = [("v", .number(Double(ControlRequest.version)))]
        switch self {
        case .status: members.append(("cmd", .string("status")))
        case .lock: members.append(("cmd", .string("lock")))
        case .reset: members.append(("cmd", .string("reset")))
        case .enable: members.append(("cmd", .string("enable")))
        case .toggle: members.append(("cmd", .string("toggle")))
        case .events: members.append(("cmd", .string("events")))
        case .quit: members.append(("cmd", .string("quit")))
        case .disable(let d):
            members.append(("cmd", .string("disable")))
            if let d { members.append(("for_ms", .number(Double(d.value)))) }
        case .inhibit(let why, let d):
            members.append(("cmd", .string("inhibit")))
            members.append(("why", .string(why)))
            if let d { members.append(("for_ms", .number(Double(d.value)))) }
        }
        return JSONValue.object(members).text
    }

    /// Requests that would keep the screen unlocked or stop the agent: refused with --secure.
    public var weakensLocking: Bool {
        switch self {
        case .inhibit, .disable, .toggle, .quit, .reset: true
        case .status, .lock, .enable, .events: false
        }
    }

    public static func reply(_ fields: [(String, JSONValue)] = []) -> String {
        JSONValue.object([("v", .number(Double(version))), ("ok", .bool(true))] + fields).text
    }

    public static func errorReply(_ message: String) -> String {
        JSONValue.object([("v", .number(Double(version))), ("ok", .bool(false)), ("error", .string(message))]).text
    }
}

public struct ProtocolError: Error, Equatable, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
}

extension IdleMachine {
    /// The state in the user's words: locking, locked, locker-not-covering,
    /// locker-failing, disabled, inhibited, notified or active.
    public var stateName: String {
        if lockerActive { return supervisor.stateName }
        if isDisabled { return "disabled" }
        if !inhibitors.isEmpty { return "inhibited" }
        if hasNotified { return "notified" }
        return "active"
    }

    /// The reply to `status`. Times are relative (ms ago, ms from now): the agent's
    /// clocks mean nothing to a client. Keys are stable; new keys may be added.
    public func statusFields(at now: Instant, lockerPid: Int32?) -> [(String, JSONValue)] {
        func ms(_ m: Millis) -> JSONValue { .number(Double(m.value)) }
        func optional(_ m: Millis?) -> JSONValue { m.map(ms) ?? .null }
        let due: Millis? = nextStageDue.map { Swift.max($0 - now.boottime, .zero) }
        return [
            ("state", .string(stateName)),
            ("idle_ms", ms(idle(at: now))),
            ("next_stage", nextStageDue == nil ? .null : nextStageName.map(JSONValue.string) ?? .null),
            ("next_stage_in_ms", optional(due)),
            ("locker_pid", lockerPid.map { .number(Double($0)) } ?? .null),
            ("locker", lockerFields(at: now, pid: lockerPid)),
            ("last_locker_failure", supervisor.lastFailure.map { failure in
                .object([
                    ("kind", .string(failure.kind)),
                    ("reason", .string(failure.description)),
                    ("ago_ms", optional(supervisor.lastFailureAt.map { now.boottime - $0 })),
                ])
            } ?? .null),
            ("inhibitors", .array(inhibitors.map { inhibitor in
                .object([
                    ("id", .number(Double(inhibitor.id))),
                    ("source", .string(inhibitor.source.rawValue)),
                    ("who", .string(inhibitor.who)),
                    ("why", .string(inhibitor.why)),
                    ("remaining_ms", optional(inhibitor.until.map { $0 - now.boottime })),
                ])
            })),
            ("logind_hints", .object([("locked", .bool(lockedHint)), ("idle", .bool(idleHint))])),
            ("session_active", .bool(!sessionInactive)),
            ("disabled", .bool(isDisabled)),
            ("disabled_remaining_ms", optional((disabledUntil ?? nil).map { $0 - now.boottime })),
            ("last_suspend_gap", lastSuspendGap.map { gap in
                .object([("length_ms", ms(gap.length)), ("ago_ms", ms(now.boottime - gap.noticedAt))])
            } ?? .null),
            ("stages", .array(config.stages.map { stage in
                .object([("name", .string(stage.name)), ("role", .string(stage.role.rawValue)), ("idle_ms", ms(stage.idleTime))])
            })),
        ]
    }
}

extension IdleMachine {
    /// The locker's part of status: what runs, whether it covers the screen, the next try.
    func lockerFields(at now: Instant, pid: Int32?) -> JSONValue {
        func ms(_ m: Millis) -> JSONValue { .number(Double(m.value)) }
        switch supervisor.state {
        case .unlocked:
            return .null
        case .running(let since, let attempt, let cover, let adopted):
            let covers: JSONValue = switch cover {
            case .unknown: .null
            case .covered: .bool(true)
            case .notCovering: .bool(false)
            }
            return .object([
                ("state", .string("running")), ("pid", pid.map { .number(Double($0)) } ?? .null),
                ("covers_screen", covers), ("running_ms", ms(now.boottime - since)),
                ("attempt", .number(Double(attempt))), ("adopted", .bool(adopted)),
            ])
        case .retrying(let at, let attempt):
            return .object([
                ("state", .string("failing")), ("pid", .null),
                ("next_try_in_ms", ms(Swift.max(at - now.boottime, .zero))),
                ("attempt", .number(Double(attempt))),
            ])
        }
    }
}

extension Announcement {
    /// One event line for `xidlelock events --json`.
    public var json: JSONValue {
        func ms(_ m: Millis) -> JSONValue { .number(Double(m.value)) }
        var members: [(String, JSONValue)] = [("v", .number(Double(ControlRequest.version)))]
        switch self {
        case .stageFired(let name, let idle):
            members += [("event", .string("stage")), ("stage", .string(name)), ("idle_ms", ms(idle))]
        case .locking(let idle, let requested, let attempt):
            members += [("event", .string("locking")), ("idle_ms", ms(idle)), ("requested", .bool(requested)),
                        ("attempt", .number(Double(attempt)))]
        case .locked(let idle, let requested):
            members += [("event", .string("locked")), ("idle_ms", ms(idle)), ("requested", .bool(requested))]
        case .lockerNotCovering(let runningFor):
            members += [("event", .string("locker-not-covering")), ("running_ms", ms(runningFor))]
        case .lockerFailed(let kind, let reason, let retryIn):
            members += [("event", .string("locker-failed")), ("kind", .string(kind)), ("reason", .string(reason)),
                        ("retry_in_ms", ms(retryIn))]
        case .unlocked(let lockedFor):
            members += [("event", .string("unlocked")), ("locked_ms", ms(lockedFor))]
        case .activityResumed(let idle):
            members += [("event", .string("activity")), ("idle_ms", ms(idle))]
        case .suspendGap(let length):
            members += [("event", .string("suspend-gap")), ("length_ms", ms(length))]
        case .inhibited(let i):
            members += [("event", .string("inhibited")), ("id", .number(Double(i.id))), ("source", .string(i.source.rawValue)),
                        ("who", .string(i.who)), ("why", .string(i.why))]
        case .uninhibited(let i):
            members += [("event", .string("uninhibited")), ("id", .number(Double(i.id))), ("who", .string(i.who))]
        case .disabled(let remaining):
            members += [("event", .string("disabled")), ("remaining_ms", remaining.map(ms) ?? .null)]
        case .enabled:
            members += [("event", .string("enabled"))]
        case .sleeping(let covered):
            members += [("event", .string("sleeping")), ("covered", .bool(covered))]
        case .resumed:
            members += [("event", .string("resumed"))]
        }
        return .object(members)
    }
}

/// How client commands show replies and events to people.
public enum HumanText {
    public static func status(_ reply: JSONValue) -> String {
        func duration(_ key: String, in value: JSONValue = reply) -> String? {
            value[key]?.integer.map { Millis($0).description }
        }
        var lines = ["state: \(reply["state"]?.string ?? "?")", "idle: \(duration("idle_ms") ?? "?")"]
        if let next = reply["next_stage"]?.string, let due = duration("next_stage_in_ms") {
            lines.append("next: \(next) in \(due)")
        } else {
            lines.append("next: none")
        }
        lines.append("locker: " + HumanText.locker(reply))
        if case .array(let inhibitors) = reply["inhibitors"], !inhibitors.isEmpty {
            for i in inhibitors {
                let span = duration("remaining_ms", in: i).map { "\($0) left" } ?? "while it runs"
                // Escaped here too: a terminal must never get a client's control characters.
                let why = i["why"]?.string.flatMap { $0.isEmpty ? nil : ": \(ClientText.sanitized($0))" } ?? ""
                let source = i["source"]?.string.map { " [\($0)]" } ?? ""
                lines.append("inhibited by \(ClientText.sanitized(i["who"]?.string ?? "?"))\(source) (\(span))\(why)")
            }
        }
        if reply["disabled"]?.bool == true {
            lines.append("disabled" + (duration("disabled_remaining_ms").map { " for \($0) more" } ?? " until enabled"))
        }
        if let gap = reply["last_suspend_gap"], gap != .null {
            lines.append("last suspend: slept \(duration("length_ms", in: gap) ?? "?"), \(duration("ago_ms", in: gap) ?? "?") ago")
        }
        return lines.joined(separator: "\n")
    }

    /// The locker's line: running and whether it covers the screen, or failing and the next try.
    static func locker(_ reply: JSONValue) -> String {
        guard let locker = reply["locker"], locker != .null else {
            return reply["locker_pid"]?.integer.map { "running, pid \($0)" } ?? "not running"
        }
        if locker["state"]?.string == "failing" {
            let reason = reply["last_locker_failure"]?["reason"]?.string.map { ClientText.sanitized($0, maxBytes: 400) } ?? "?"
            let next = locker["next_try_in_ms"]?.integer.map { Millis($0).description } ?? "?"
            return "FAILING: the screen may NOT be locked; last failure: the locker \(reason); next try in \(next)"
        }
        let pid = locker["pid"]?.integer.map { "pid \($0)" } ?? "pid ?"
        switch locker["covers_screen"] {
        case .bool(true)?: return "running, \(pid), holds the screen"
        case .bool(false)?: return "running, \(pid), NOT covering the screen (it never grabbed the keyboard)"
        default: return "running, \(pid), starting"
        }
    }

    public static func event(_ event: JSONValue) -> String {
        func d(_ key: String) -> String { event[key]?.integer.map { Millis($0).description } ?? "?" }
        switch event["event"]?.string ?? "" {
        case "stage": return "stage \(event["stage"]?.string ?? "?") (idle \(d("idle_ms")))"
        case "locking": return "locking (attempt \(event["attempt"]?.integer ?? 1), idle \(d("idle_ms")))"
        case "locked": return event["requested"]?.bool == true ? "locked on request" : "locked (idle \(d("idle_ms")))"
        case "locker-not-covering": return "the locker does NOT cover the screen (running \(d("running_ms")))"
        case "sleeping": return event["covered"]?.bool == true ? "sleeping (locked)" : "sleeping (the screen may NOT be locked)"
        case "resumed": return "resumed"
        case "locker-failed": return "locker failed: \(event["reason"]?.string ?? "?"); retry in \(d("retry_in_ms"))"
        case "unlocked": return "unlocked (locked \(d("locked_ms")))"
        case "activity": return "activity resumed (idle \(d("idle_ms")))"
        case "suspend-gap": return "suspend gap of \(d("length_ms"))"
        case "inhibited": return "inhibited by \(ClientText.sanitized(event["who"]?.string ?? "?"))" + ((event["why"]?.string).map { $0.isEmpty ? "" : ": \(ClientText.sanitized($0))" } ?? "")
        case "uninhibited": return "inhibitor of \(event["who"]?.string ?? "?") ended"
        case "disabled": return "disabled" + (event["remaining_ms"]?.integer.map { " for \(Millis($0))" } ?? "")
        case "enabled": return "enabled"
        default: return event.text
        }
    }
}
