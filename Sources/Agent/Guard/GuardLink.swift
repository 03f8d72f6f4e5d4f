import CLinux
import Glibc
import IdleCore
import Platform

/// The agent's registration with the guard (`xidlelock guard`, root), under a policy:
/// one connection to `/run/xidlelock/guard.sock`, kept open for the agent's life. The
/// guard verifies the agent itself and follows it from outside; the agent only says
/// which display it watches, its status, and its lock as it changes (while awake
/// anyway: the link never wakes an idle agent). When the guard goes away (a restart,
/// an upgrade) the link connects again with backoff.
final class GuardLink: EventSource {
    enum Message {
        case verified
        case refused(String)
        case locker(pid: Int32)
        case lockerEnded(pid: Int32, exitStatus: Int32?, signal: Int32)
        /// The connection is gone (the guard restarts): nothing vouches for the guard's locker now.
        case lost
    }

    let path: String
    private let display: String
    private let status: () -> JSONValue
    /// When the agent's lock is due (nil: none is due), told to the guard as it changes.
    private let lockDue: () -> BoottimeInstant?
    /// What the guard was told last (`.some(nil)`: that none is due; nil: nothing yet).
    private var toldLockDue: BoottimeInstant??
    private let onMessage: (Message) -> Void
    private var fd: Int32 = -1
    private var input = LineBuffer(limit: GuardMessage.longestLine)
    private var output: [UInt8] = []
    private var retryAt: MonotonicInstant?
    /// Quick retries (a guard restarting): 1 s, doubling to 16 s. Past them the link
    /// waits without waking the agent: for the socket to appear in the guard's
    /// directory (inotify), and tries again at the agent's own wake-ups at most
    /// `slowRetry` often.
    private var backoff = Backoff(first: .seconds(1), limit: .seconds(16))
    static let slowRetry = Millis.seconds(30)
    private var lastTry = MonotonicInstant.zero
    private var directoryWatch: Int32 = -1
    /// What the guard said last, for status.
    private(set) var state = "connecting"
    private var lastProblem: String?

    /// The guard's socket: /run/xidlelock/guard.sock (a debug build, the tests', takes
    /// the directory from XIDLELOCK_TEST_RUN, as the policy's from XIDLELOCK_TEST_ETC).
    static var socketPath: String {
        #if DEBUG
        if let directory = getenv("XIDLELOCK_TEST_RUN") { return String(cString: directory) + "/guard.sock" }
        #endif
        return "/run/xidlelock/guard.sock"
    }

    /// Root's question: every session as the guard verified it (one JSON line).
    static func sessions() throws(AgentError) -> JSONValue {
        let fd = xil_unix_connect(socketPath)
        guard fd >= 0 else { throw .unavailable("the guard does not answer at \(socketPath): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var pid: pid_t = 0
        var uid: uid_t = 0
        guard xil_peer_credentials(fd, &pid, &uid) == 0, uid == 0 else {
            throw .unavailable("refusing \(socketPath): it is served by uid \(uid) (pid \(pid)), not by root")
        }
        signal(SIGPIPE, SIG_IGN)
        _ = try? FileIO.writeAll(fd, GuardMessage.sessions.line)
        var reader = ControlClient.Reader(fd: fd)
        guard let line = try reader.line(timeout: 5000) else { throw .failed("the guard closed the connection without answering") }
        guard let answer = try? JSONValue(parsing: line), answer["sessions"] != nil else {
            throw .failed("the guard answered: \(ClientText.sanitized(line, maxBytes: 300))")
        }
        return answer
    }

    init(display: String, status: @escaping () -> JSONValue, lockDue: @escaping () -> BoottimeInstant?,
         onMessage: @escaping (Message) -> Void) {
        path = GuardLink.socketPath
        self.display = display
        self.status = status
        self.lockDue = lockDue
        self.onMessage = onMessage
        connect()
    }

    var statusField: JSONValue { .object([("socket", .string(path)), ("state", .string(state))]) }

    var pollInterest: (fd: Int32, events: PollEvents)? {
        if fd >= 0 { return (fd, output.isEmpty ? .readable : [.readable, .writable]) }
        return directoryWatch >= 0 ? (directoryWatch, .readable) : nil
    }

    var deadline: MonotonicInstant? { fd < 0 ? retryAt : nil }

    /// Not registered, past the quick retries: tries again when the agent is awake anyway.
    /// Registered: tells the guard when the lock is due if that moved (the agent is
    /// awake anyway; moves under 250 ms are not worth a line).
    func prepareToWait() {
        if fd < 0, retryAt == nil, SystemClock.now().monotonic - lastTry >= GuardLink.slowRetry { connect() }
        guard fd >= 0 else { return }
        let due = lockDue()
        switch (toldLockDue, due) {
        case (.some(nil), nil): return
        case (.some(let told?), let due?) where abs((due - told).value) < 250: return
        default: break
        }
        toldLockDue = .some(due)
        send(.lockDue(due.map { Swift.max($0 - SystemClock.now().boottime, .zero) }))
    }

    func dispatch(_ events: PollEvents) {
        guard fd >= 0 else {
            if directoryWatch >= 0 {
                var drain = [UInt8](repeating: 0, count: 4096)
                while drain.withUnsafeMutableBytes({ Glibc.read(directoryWatch, $0.baseAddress, $0.count) }) > 0 {}
            }
            return connect()
        }
        if events.contains(.writable) { flush() }
        if fd >= 0, !events.intersection([.readable, .hangUp, .error]).isEmpty { read() }
    }

    /// Says the lock changed (the machine's announcements).
    func lockChanged(locked: Bool) { send(.locked(locked)) }

    /// Says a locker failed: the guard counts them (lockers killed as they start).
    func lockerFailed() { send(.lockerFailed) }

    private func connect() {
        retryAt = nil
        lastTry = SystemClock.now().monotonic
        let socket = xil_unix_connect_nonblocking(path)
        guard socket >= 0 else {
            return retry(errno == EAGAIN ? "the guard's queue at \(path) is full (a busy guard)"
                                         : "cannot reach the guard at \(path): \(String(cString: strerror(errno)))")
        }
        // Only root's guard hears of this agent: a socket served by anyone else is not it.
        var pid: pid_t = 0
        var uid: uid_t = 0
        guard xil_peer_credentials(socket, &pid, &uid) == 0, uid == 0 else {
            close(socket)
            return retry("refusing \(path): it is served by uid \(uid) (pid \(pid)), not by root")
        }
        fd = socket
        if directoryWatch >= 0 {
            close(directoryWatch)
            directoryWatch = -1
        }
        input = LineBuffer(limit: GuardMessage.longestLine)
        output = []
        toldLockDue = nil
        state = "registering"
        lastProblem = nil
        send(.register(display: display))
        send(.status(status()))
    }

    private func retry(_ problem: String) {
        if problem != lastProblem {
            // Said once per kind of problem: a guard that is down stays down for a while.
            Log.write(.error, "\(problem): the session is NOT guarded (the guard will act on the admin's policy); trying again")
            lastProblem = problem
        }
        state = "not registered: \(problem)"
        if !backoff.reachedLimit {
            retryAt = SystemClock.now().monotonic + backoff.next()
        } else if directoryWatch < 0 {
            // The guard's directory outlives the guard (RuntimeDirectoryPreserve): its socket
            // showing up there wakes the agent; no timer does.
            let directory = String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)])
            directoryWatch = xil_directory_watch(directory)
        }
    }

    private func send(_ message: GuardMessage) {
        guard fd >= 0 else { return }
        output.append(contentsOf: Array(message.line.utf8))
        flush()
    }

    private func flush() {
        while fd >= 0, !output.isEmpty {
            do {
                switch try output.withUnsafeBytes({ bytes throws(SystemError) in try FileIO.writeSome(fd, bytes) }) {
                case .done(let n): output.removeFirst(n)
                case .wouldBlock: return  // the loop waits for writable
                }
            } catch {
                return disconnected()
            }
        }
    }

    private func read() {
        switch input.read(from: fd) {
        case .ended: return disconnected()
        case .wouldBlock: return
        case .data: break
        }
        while let line = input.nextLine() {
            switch GuardMessage(line: line[...]) {
            case .verified?:
                state = "verified"
                backoff.reset()
                Log.write(.info, "the guard verified this agent: the session is guarded")
                onMessage(.verified)
            case .refused(let reason)?:
                state = "refused: \(reason)"
                Log.write(.error, "the guard refused this agent: \(reason): the session is NOT guarded")
                onMessage(.refused(reason))
            case .locker(let pid)?:
                onMessage(.locker(pid: pid))
            case .lockerEnded(let pid, let status, let signal)?:
                onMessage(.lockerEnded(pid: pid, exitStatus: status, signal: signal))
            case .askAlive(let number)?:
                // Answered from the loop itself: that is what the guard asks proof of.
                send(.alive(number))
            default:
                Log.write(.warning, "the guard sent a line this agent does not know: \(ClientText.sanitized(line, maxBytes: 200))")
            }
        }
        if input.overflowed { disconnected() }
    }

    private func disconnected() {
        close(fd)
        fd = -1
        onMessage(.lost)
        retry("the guard closed the connection")
    }
}
