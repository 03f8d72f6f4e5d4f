import IdleCore
import Platform

/// What the agent answers to each request of the control socket.
extension Agent: ControlRequestHandler {
    /// `status`: the machine's fields and the edges' (also what the guard is told).
    func statusFields() -> [(String, JSONValue)] {
        machine.statusFields(at: SystemClock.now(), lockerPid: children.lockerPid)
            + [("desktop", .object(desktop?.statusFields ?? [])), ("audit", .object(AuditTrail.shared.statusFields)),
               // Whether the monitor can be turned off at all (no DPMS on Xvfb), and its state.
               ("monitor", screenPower.map { power in
                   .object([("dpms", power.unavailable.map { .string("unavailable: " + $0) } ?? .string("available")),
                            ("on", power.isOn.map(JSONValue.bool) ?? .null)])
               } ?? .null),
               ("guard", guardLink?.statusField ?? .null),
               // What raw input cost: events read (the late among them) and selection changes.
               ("x_input", .object([("raw_events_read", .number(Double(x.counts.rawEvents))),
                                    ("late_events_read", .number(Double(x.counts.lateEvents))),
                                    ("selections", .number(Double(x.counts.selections)))]))]
    }

    func handle(_ line: String, from client: ControlConnection) {
        if line.isEmpty { return }
        let asked: ControlRequest
        do {
            asked = try ControlRequest.parse(line)
        } catch {
            client.send(ControlRequest.errorReply(error.message))
            return
        }
        Log.debug("request from \(client.who): \(asked.line)")
        let now = SystemClock.now()
        if !client.holds && !client.subscribed {
            client.requestDeadline = now.monotonic + ControlServerLimits.requestTimeout
        }
        // Whether a request may weaken locking is the machine's to answer (--secure,
        // the policy): each is passed on, and its answer sent back.
        func answered(_ event: Event, _ fields: (Answer) -> [(String, JSONValue)] = { _ in [] }) {
            switch request(event) {
            case .refused(let why)?: client.send(ControlRequest.errorReply("refused: \(why)"))
            case let answer?: client.send(ControlRequest.reply(fields(answer)))
            case nil: client.send(ControlRequest.reply())
            }
        }
        switch asked {
        case .status:
            wake()
            client.send(ControlRequest.reply(statusFields()))
        case .lock:
            wake()
            perform(.lockNow)
            client.send(ControlRequest.reply([("locker_pid", children.lockerPid.map { .number(Double($0)) } ?? .null)]))
        case .reset:
            answered(.reset(from: .socket, by: client.who))
        case .inhibit(let why, let duration):
            // One held while the connection stays open ends when it closes; one for a
            // time outlives it (`xidlelock inhibit --for 45m` returns at once).
            let owner = duration == nil ? client.owner : HoldOwner(.socket, "pid \(client.pid)")
            let claim = HoldClaim(key: "", who: client.who, why: ClientText.sanitized(why), span: duration)
            answered(.holdAsked(owner, claim)) { answer in
                guard case .granted(let id) = answer else { return [] }
                if duration == nil {
                    client.holds = true
                    client.requestDeadline = nil
                }
                return [("id", .number(Double(id)))]
            }
        case .disable(let duration):
            answered(.disable(for: duration, by: client.who))
        case .enable:
            answered(.enable(by: client.who))
        case .toggle:
            let event: Event = machine.isDisabled ? .enable(by: client.who) : .disable(for: nil, by: client.who)
            answered(event) { _ in [("disabled", .bool(self.machine.isDisabled))] }
        case .events:
            client.subscribed = true
            client.requestDeadline = nil
            client.send(ControlRequest.reply())
        case .passOn(let source, let pid, let who, let why):
            takePassedOnHold(source: source, pid: pid, who: who, why: why, from: client)
        case .quit:
            if case .refused(let why)? = request(.quitAsked(by: client.who)) {
                client.send(ControlRequest.errorReply("refused: \(why)"))
                return
            }
            Log.write(.info, "quit requested by \(client.who)")
            client.send(ControlRequest.reply())
            stop()
        }
    }

    func connectionClosed(_ client: ControlConnection) {
        control.remove(client)
        // The inhibitor's client is gone (its command ended or it died).
        if client.holds { request(.ownerGone(client.owner)) }
        if let passedOn = client.passedOn { request(.ownerGone(passedOn)) }
    }
}
