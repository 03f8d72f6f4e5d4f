import IdleCore

/// What the agent answers to each request of the control socket.
extension Agent: ControlRequestHandler {
    func handle(_ line: String, from client: ControlConnection) {
        if line.isEmpty { return }
        let request: ControlRequest
        do {
            request = try ControlRequest.parse(line)
        } catch {
            client.send(ControlRequest.errorReply(error.message))
            return
        }
        if secure && request.weakensLocking {
            Log.write(.warning, "refused '\(request.line)' from \(client.who): the agent runs with --secure")
            client.send(ControlRequest.errorReply("refused: the agent runs with --secure"))
            return
        }
        if case .inhibit = request, let refusal = machine.config.refusal(for: .socket) {
            Log.write(.warning, "refused '\(request.line)' from \(client.who): \(refusal)")
            client.send(ControlRequest.errorReply("refused: \(refusal)"))
            return
        }
        Log.debug("request from \(client.who): \(request.line)")
        let now = SystemClock.now()
        if client.inhibitorIDs.isEmpty && !client.subscribed {
            client.requestDeadline = now.monotonic + ControlServerLimits.requestTimeout
        }
        // Bring the idle time up to date first: listening may be paused.
        wake()
        switch request {
        case .status:
            let desktopFields = desktop?.statusFields ?? []
            client.send(ControlRequest.reply(machine.statusFields(at: SystemClock.now(), lockerPid: children.lockerPid)
                + [("desktop", .object(desktopFields))]))
        case .lock:
            perform(.lockNow)
            client.send(ControlRequest.reply([("locker_pid", children.lockerPid.map { .number(Double($0)) } ?? .null)]))
        case .reset:
            perform(.reset)
            client.send(ControlRequest.reply())
        case .inhibit(let why, let duration):
            let id = inhibit(source: .socket, who: client.who, why: ClientText.sanitized(why),
                             until: duration.map { now.boottime + $0 })
            if duration == nil {
                // Held while the connection stays open; a second one on the same
                // connection is held too, and all end together when it closes.
                client.inhibitorIDs.append(id)
                client.requestDeadline = nil
            }
            client.send(ControlRequest.reply([("id", .number(Double(id)))]))
        case .disable(let duration):
            perform(.disable(for: duration, by: client.who))
            client.send(ControlRequest.reply())
        case .enable:
            perform(.enable(by: client.who))
            client.send(ControlRequest.reply())
        case .toggle:
            perform(machine.isDisabled ? .enable(by: client.who) : .disable(for: nil, by: client.who))
            client.send(ControlRequest.reply([("disabled", .bool(machine.isDisabled))]))
        case .events:
            client.subscribed = true
            client.requestDeadline = nil
            client.send(ControlRequest.reply())
        case .quit:
            Log.write(.info, "quit requested by \(client.who)")
            client.send(ControlRequest.reply())
            stop()
        }
    }

    func connectionClosed(_ client: ControlConnection) {
        control.remove(client)
        guard !client.inhibitorIDs.isEmpty else { return }
        // The inhibitor's client is gone (its command ended or it died).
        wake()
        for id in client.inhibitorIDs { perform(.uninhibit(id: id)) }
    }
}
