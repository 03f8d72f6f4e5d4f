import CLinux
import Glibc
import IdleCore

/// The running agent: one poll loop over the X connection, a CLOCK_BOOTTIME
/// timer for the next deadline, and a signalfd. Every source turns into an
/// `Event` for the state machine; its actions are carried out here.
public final class Agent {
    private var machine: IdleMachine
    private let x: XServer
    private var children = Children()
    private let timer: Int32
    private let signals: Int32
    private var armedDeadline: Millis?
    private var stopping = false

    public static func run(_ options: AgentOptions) throws(AgentError) -> Never {
        Log.threshold = options.verbosity.threshold
        signal(SIGPIPE, SIG_IGN)
        XServer.installErrorHandlers()
        let x = try XServer(needsInput: true)
        let locker = try LockerChoice.choose(given: options.locker)
        let agent = try Agent(config: options.config(locker: locker), x: x)
        agent.loop()
    }

    init(config: AgentConfig, x: XServer) throws(AgentError) {
        self.x = x
        let watched: [Int32] = [SIGTERM, SIGINT, SIGHUP, SIGCHLD, 0]
        signals = watched.withUnsafeBufferPointer { xil_signalfd_for($0.baseAddress) }
        timer = xil_boottime_timer_create()
        guard signals >= 0, timer >= 0 else {
            throw .failed("cannot set up signal and timer descriptors: \(String(cString: strerror(errno)))")
        }
        machine = IdleMachine(config: config, now: Clock.now())
        x.listen(true)
        perform(.start(serverIdle: x.idleTime() ?? .zero))
    }

    private func loop() -> Never {
        var fds = [
            pollfd(fd: x.fileDescriptor, events: Int16(POLLIN), revents: 0),
            pollfd(fd: timer, events: Int16(POLLIN), revents: 0),
            pollfd(fd: signals, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            // Xlib may hold events read during a round trip while the fd stays quiet.
            if x.drainInput() > 0 { perform(.input) }
            x.listen(machine.listensForInput)
            armTimer()
            let ready = poll(&fds, nfds_t(fds.count), -1)
            if ready < 0 {
                if errno == EINTR { continue }
                Log.write(.error, "poll failed: \(String(cString: strerror(errno)))")
                exit(1)
            }
            if fds[1].revents != 0 {
                var expirations: UInt64 = 0
                _ = read(timer, &expirations, 8)
                armedDeadline = nil
                perform(.wake(serverIdle: x.idleTime()))
            }
            if fds[2].revents != 0 { handleSignals() }
            // fds[0]: the drain at the top reads it; a hang-up reaches the I/O error handler there.
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
                perform(.stop)
                if let pid = children.lockerPid {
                    Log.write(.info, "the locker (pid \(pid)) keeps running")
                }
                exit(0)
            }
        }
    }

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
        var line = format.render(idle) + "\n"
        line.withUTF8 { _ = write(1, $0.baseAddress, $0.count) }
    }
}
