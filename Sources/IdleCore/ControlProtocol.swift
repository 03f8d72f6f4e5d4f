/// The control protocol: one JSON object per line, each request answered by one
/// reply line. Version 1. Requests: `{"v":1,"cmd":"status"}`; `lock`, `reset`,
/// `enable`, `toggle`, `events`, `quit`; `{"v":1,"cmd":"inhibit","why":"video",
/// "for_ms":60000}` (without `for_ms`: while the connection stays open);
/// `{"v":1,"cmd":"disable","for_ms":…}`; between the agents of one user's sessions,
/// `{"v":1,"cmd":"pass-on","source":"dbus","pid":1234,"who":"…","why":"…"}` (a hold of
/// the session bus's services whose caller runs in the receiving agent's session, held
/// while the connection stays open). Replies: `{"v":1,"ok":true,…}` or
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
    /// A hold the owner of a session-bus service (`source`) received from a program
    /// of another session, passed on to that session's agent; `pid` is the caller's,
    /// as the bus told it, `who` and `why` as the passing agent saw them.
    case passOn(source: InhibitorSource, pid: UInt32, who: String, why: String)

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
        case "pass-on":
            guard let name = json["source"]?.string, let source = InhibitorSource(rawValue: name),
                  [.dbus, .powerManagement, .sessionManager].contains(source)
            else { throw ProtocolError("\"source\" must be one of dbus, power-management, session-manager") }
            guard let pid = json["pid"]?.integer, pid > 0, pid <= Int64(UInt32.max) else {
                throw ProtocolError("\"pid\" must be the caller's process id")
            }
            return .passOn(source: source, pid: UInt32(pid), who: ClientText.clipped(json["who"]?.string ?? ""),
                           why: ClientText.clipped(json["why"]?.string ?? ""))
        default:
            throw ProtocolError("unknown command '\(ClientText.sanitized(cmd, maxBytes: 40))'")
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
        case .passOn(let source, let pid, let who, let why):
            members += [("cmd", .string("pass-on")), ("source", .string(source.rawValue)), ("pid", .number(Double(pid))),
                        ("who", .string(who)), ("why", .string(why))]
        case .inhibit(let why, let d):
            members.append(("cmd", .string("inhibit")))
            members.append(("why", .string(why)))
            if let d { members.append(("for_ms", .number(Double(d.value)))) }
        }
        return JSONValue.object(members).text
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
        case .lockerNotCovering(let runningFor, let letGo):
            members += [("event", .string("locker-not-covering")), ("running_ms", ms(runningFor)), ("let_go", .bool(letGo))]
        case .grabHeldByOther(let device, let beforeStart):
            members += [("event", .string("\(device.rawValue)-held-by-other")), ("covers_screen", .bool(false)),
                        ("held_before_start", .bool(beforeStart))]
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
        case .disabled(let remaining, let by):
            members += [("event", .string("disabled")), ("remaining_ms", remaining.map(ms) ?? .null), ("by", .string(by))]
        case .enabled(let by):
            members += [("event", .string("enabled")), ("by", .string(by))]
        case .sleeping(let covered):
            members += [("event", .string("sleeping")), ("covered", .bool(covered))]
        case .resumed:
            members += [("event", .string("resumed"))]
        case .screenOff(let lockedFor):
            members += [("event", .string("screen-off")), ("locked_ms", ms(lockedFor))]
        case .powerSource(let onBattery):
            members += [("event", .string("power-source")), ("on_battery", .bool(onBattery))]
        case .cardInserted(let reader, let atr, let counts):
            members += [("event", .string("card-inserted")), ("reader", .string(reader)), ("atr", .string(atr)), ("counts", .bool(counts))]
        case .cardRemoved(let reader, let atr, let locks):
            members += [("event", .string("card-removed")), ("reader", .string(reader)), ("atr", .string(atr)), ("locks", .bool(locks))]
        case .cardWatch(let error):
            members += [("event", .string("card-watch")), ("error", error.map(JSONValue.string) ?? .null)]
        }
        return .object(members)
    }
}
