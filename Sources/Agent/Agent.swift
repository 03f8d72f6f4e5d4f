import CLinux
import Glibc
import IdleCore

/// The running agent: one poll loop over the X connection, a CLOCK_BOOTTIME
/// timer for the next deadline, a signalfd and the control socket. Every source
/// turns into an `Event` for the state machine; its actions are carried out here.
public final class Agent {
    private var machine: IdleMachine
    private let x: XServer
    private let control: ControlServer
    private let secure: Bool
    private var children = Children()
    private let timer: Int32
    /// Readable right after every resume from suspend (see xil_resume_watch_create).
    private let resumeWatch: Int32
    private let signals: Int32
    private var armedDeadline: Millis?
    private var nextInhibitorID = 1

    public static func run(_ options: AgentOptions) throws(AgentError) -> Never {
        Log.threshold = options.verbosity.threshold
        signal(SIGPIPE, SIG_IGN)
        XServer.installErrorHandlers()
        let x = try XServer(needsInput: true)
        let locker = try LockerChoice.choose(given: options.locker)
        let (path, directory) = try SocketPath.resolve(options.socket)
        let control = try ControlServer(path: path, directory: directory)
        let agent = try Agent(config: options.config(locker: locker), x: x, control: control, secure: options.secure)
        agent.loop()
    }

    init(config: AgentConfig, x: XServer, control: ControlServer, secure: Bool) throws(AgentError) {
        self.x = x
        self.control = control
        self.secure = secure
        let watched: [Int32] = [SIGTERM, SIGINT, SIGHUP, SIGCHLD, 0]
        signals = watched.withUnsafeBufferPointer { xil_signalfd_for($0.baseAddress) }
        timer = xil_boottime_timer_create()
        resumeWatch = xil_resume_watch_create()
        if resumeWatch < 0 {
            // Gaps are still noticed, at the next wake-up instead of at the resume.
            Log.write(.warning, "cannot watch for resumes from suspend: \(String(cString: strerror(errno)))")
        }
        guard signals >= 0, timer >= 0 else {
            throw .failed("cannot set up signal and timer descriptors: \(String(cString: strerror(errno)))")
        }
        machine = IdleMachine(config: config, now: Clock.now())
        children.lockerRecord = LockerRecord(path: control.path + ".locker")
        // Before anything can fire: a locker left by an earlier agent means locked.
        if let adopted = children.lockerRecord?.adopt() {
            children.adoptedLocker = adopted
            Log.write(.info, "found the locker of an earlier agent running (pid \(adopted.pid))")
            perform(.lockerAdopted)
        }
        x.listen(true)
        perform(.start(serverIdle: x.idleTime() ?? .zero))
    }

    /// The fixed places in the poll set; the control clients follow them.
    private enum Slot: Int, CaseIterable { case x, timer, signals, listener, adoptedLocker, resumeWatch }

    private func loop() -> Never {
        var fds: [pollfd] = []
        var clients: [Connection] = []
        while true {
            // Xlib reads events into its queue during round trips and flushes (the
            // XFlush of listen() included), and then the fd stays quiet: drain right
            // before waiting, after the last request, or a key's release would wait
            // unseen until the next deadline and be taken for input then.
            while true {
                x.listen(machine.listensForInput)
                guard x.drainInput() > 0 else { break }
                perform(.input)
            }
            armTimer()

            clients = Array(control.connections.values)
            fds.removeAll(keepingCapacity: true)
            for slot in Slot.allCases {
                // A negative fd is skipped by poll.
                let fd = switch slot {
                case .x: x.fileDescriptor
                case .timer: timer
                case .signals: signals
                case .listener: control.listener
                case .adoptedLocker: children.adoptedLocker?.pidfd ?? -1
                case .resumeWatch: resumeWatch
                }
                fds.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0))
            }
            for client in clients {
                let events = POLLIN | (client.output.isEmpty ? 0 : POLLOUT)
                fds.append(pollfd(fd: client.fd, events: Int16(events), revents: 0))
            }
            // Only a client that holds nothing and sends nothing sets a timeout; the
            // idle agent itself waits on the boottime timer alone.
            let timeout = control.nextDeadline.map { deadline in
                Int32(clamping: max((deadline - Clock.now().monotonic).value, 0) + 1)
            } ?? -1

            let ready = poll(&fds, nfds_t(fds.count), timeout)
            if ready < 0 {
                if errno == EINTR { continue }
                Log.write(.error, "poll failed: \(String(cString: strerror(errno)))")
                exit(1)
            }
            func isReady(_ slot: Slot) -> Bool { fds[slot.rawValue].revents != 0 }
            if isReady(.timer) {
                var expirations: UInt64 = 0
                _ = read(timer, &expirations, 8)
                armedDeadline = nil
                perform(.wake(serverIdle: x.idleTime()))
            }
            if isReady(.signals) { handleSignals() }
            if isReady(.listener) { control.acceptClients(now: Clock.now().monotonic) }
            if isReady(.adoptedLocker), let end = children.adoptedLockerEnded() {
                perform(.processEnded(.locker, end))
            }
            if isReady(.resumeWatch), xil_resume_watch_check(resumeWatch) == 1 {
                // A resume (or a wall-clock change): notice any suspend gap now.
                perform(.wake(serverIdle: x.idleTime()))
            }
            for (client, pfd) in zip(clients, fds[Slot.allCases.count...]) where pfd.revents != 0 {
                serve(client, readable: pfd.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0)
            }
            closeTimedOutClients()
            // The X slot: the drain at the top reads it; a hang-up reaches the I/O error handler there.
        }
    }

    private func armTimer() {
        let deadline = machine.nextDeadline
        guard deadline != armedDeadline else { return }
        armedDeadline = deadline
        if let deadline {
            Log.debug("next deadline in \(deadline - Clock.now().boottime)")
        }
        // A deadline already past is armed 1 ns after boot, which fires at once.
        _ = xil_timer_arm_at(timer, deadline.map { max($0.value * 1_000_000, 1) } ?? 0)
    }

    private func handleSignals() {
        while true {
            let signal = xil_signalfd_read(signals)
            guard signal > 0 else { return }
            if signal == SIGCHLD {
                for (role, end) in children.reap() { perform(.processEnded(role, end)) }
            } else {
                Log.write(.info, "received signal \(signal)")
                stop()
            }
        }
    }

    /// Stops politely: resume commands run, the locker is left alone.
    private func stop() -> Never {
        perform(.stop)
        if let pid = children.lockerPid {
            Log.write(.info, "the locker (pid \(pid)) keeps running")
        }
        control.shutdown()
        exit(0)
    }

    // MARK: Control clients

    private func serve(_ client: Connection, readable: Bool) {
        client.flush()
        if readable, let lines = control.read(client) {
            for line in lines { answer(client, line) }
        }
        if client.output.count > ControlServer.maxPendingOutput {
            Log.debug("dropping \(client.who): it does not read its replies")
            client.output.removeAll()
            client.closing = true
        }
        if client.closing && client.output.isEmpty { disconnect(client) }
    }

    private func disconnect(_ client: Connection) {
        control.remove(client)
        if let id = client.inhibitorID {
            // The inhibitor's client is gone (its command ended or it died).
            perform(.wake(serverIdle: x.idleTime()))
            perform(.uninhibit(id: id))
        }
    }

    private func closeTimedOutClients() {
        let now = Clock.now().monotonic
        for client in control.connections.values {
            if let deadline = client.deadline, now >= deadline {
                client.send(ControlRequest.errorReply("no request within \(ControlServer.requestTimeout)"))
                disconnect(client)
            }
        }
    }

    private func answer(_ client: Connection, _ line: String) {
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
        Log.debug("request from \(client.who): \(line)")
        if client.inhibitorID == nil && !client.subscribed {
            client.deadline = Clock.now().monotonic + ControlServer.requestTimeout
        }
        // Bring the idle time up to date first: listening may be paused.
        perform(.wake(serverIdle: x.idleTime()))
        let now = Clock.now()
        switch request {
        case .status:
            client.send(ControlRequest.reply(machine.statusFields(at: now, lockerPid: children.lockerPid)))
        case .lock:
            perform(.lockNow)
            client.send(ControlRequest.reply([("locker_pid", children.lockerPid.map { .number(Double($0)) } ?? .null)]))
        case .reset:
            perform(.reset)
            client.send(ControlRequest.reply())
        case .inhibit(let why, let duration):
            let id = nextInhibitorID
            nextInhibitorID += 1
            if duration == nil {
                client.inhibitorID = id
                client.deadline = nil
            }
            perform(.inhibit(Inhibitor(id: id, who: client.who, why: why, until: duration.map { now.boottime + $0 })))
            client.send(ControlRequest.reply([("id", .number(Double(id)))]))
        case .disable(let duration):
            perform(.disable(until: duration.map { now.boottime + $0 }))
            client.send(ControlRequest.reply())
        case .enable:
            perform(.enable)
            client.send(ControlRequest.reply())
        case .toggle:
            perform(machine.isDisabled ? .enable : .disable(until: nil))
            client.send(ControlRequest.reply([("disabled", .bool(machine.isDisabled))]))
        case .events:
            client.subscribed = true
            client.deadline = nil
            client.send(ControlRequest.reply())
        case .quit:
            Log.write(.info, "quit requested by \(client.who)")
            client.send(ControlRequest.reply())
            stop()
        }
    }

    // MARK: Carrying out actions

    /// Feeds one event to the machine and carries out its actions; a command that
    /// cannot start is fed back as ended.
    private func perform(_ event: Event) {
        var queue = [event]
        while !queue.isEmpty {
            let next = queue.removeFirst()
            for action in machine.handle(next, at: Clock.now()) {
                switch action {
                case .log(let level, let message):
                    Log.write(level, message)
                case .run(let role, let command, let environment):
                    if let failure = children.run(role, command: command, environment: environment) {
                        queue.append(.processEnded(role, failure))
                    }
                case .terminate(let role):
                    children.terminate(role)
                case .announce(let announcement):
                    let line = announcement.json.text
                    for client in control.connections.values where client.subscribed { client.send(line) }
                }
            }
        }
    }
}

/// `xidlelock idle`: the server's idle counter, printed like xprintidle.
public enum IdleQuery {
    public static func run(_ format: IdleFormat) throws(AgentError) {
        let x = try XServer(needsInput: false)
        guard let idle = x.idleTime() else {
            throw .failed("the X server did not answer the idle-time query")
        }
        _ = writeAll(1, format.render(idle) + "\n")
    }
}
