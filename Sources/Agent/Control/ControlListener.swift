import CLinux
import Glibc
import IdleCore
import Platform

/// The agent's end of the control socket: one listening socket in a private
/// directory, guarded by a lock file so that one agent runs per user and display.
/// A source: each accepted client becomes a `ControlConnection` source of its own.
///
/// Locking never depends on it: where the socket cannot be made (its directory is
/// another user's, missing or not private; a link is planted at its lock file), the
/// agent says so and runs without it (`unavailable`). No fallback path is made: no
/// client or `doctor` would find it, and a path of its own under /tmp or an abstract
/// socket could be taken first by another user.
final class ControlListener: EventSource {
    let path: String
    /// -1 when the agent runs without its socket.
    let listener: Int32
    private let lockFile: Int32
    /// Why the agent runs without a control socket; nil while it listens.
    let unavailable: String?
    private(set) var connections: [ControlConnection] = []
    weak var handler: ControlRequestHandler?
    /// Adds a new client to the loop.
    var onAccept: (ControlConnection) -> Void = { _ in }
    private var restingUntil: MonotonicInstant?
    private let now: () -> MonotonicInstant

    /// The control socket given with --socket, or the default one; without one when
    /// it cannot be made, said loudly (log, audit trail). Throws only when another
    /// agent already runs for this display.
    static func open(given: String?) throws(AgentError) -> ControlListener {
        var path = given ?? ""
        do {
            let resolved = try SocketPath.resolve(given)
            path = resolved.path
            return try ControlListener(path: resolved.path, directory: resolved.directory)
        } catch {
            if case .alreadyRunning = error { throw error }
            let consequence = "the agent runs without its control socket: it locks as set, but status, doctor, disable and inhibit cannot reach it, and a second agent for this display would not be refused"
            Log.write(.error, "\(error.message): \(consequence)")
            AuditTrail.record(.runtimeFiles(path: path, problem: error.message, consequence: consequence))
            return ControlListener(unavailable: error.message)
        }
    }

    private init(unavailable reason: String) {
        path = ""
        listener = -1
        lockFile = -1
        unavailable = reason
        now = { SystemClock.now().monotonic }
    }

    init(path: String, directory: String?, now: @escaping () -> MonotonicInstant = { SystemClock.now().monotonic }) throws(AgentError) {
        if let directory { try SocketPath.ensurePrivate(directory) }
        self.path = path
        self.now = now
        unavailable = nil
        // The lock, not the socket file, says whether an agent runs: a crashed
        // agent's lock is released by the kernel, its socket file is just stale.
        let lockFile = try PrivateFile.open(path + ".lock")
        self.lockFile = lockFile
        if flock(lockFile, LOCK_EX | LOCK_NB) != 0 {
            var buffer = [UInt8](repeating: 0, count: 32)
            let n = pread(lockFile, &buffer, 31, 0)
            let pid = n > 0 ? String(decoding: buffer[..<n], as: UTF8.self).filter(\.isNumber) : "?"
            close(lockFile)
            throw .alreadyRunning("another xidlelock agent (pid \(pid)) already runs for this display (socket \(path))")
        }
        _ = ftruncate(lockFile, 0)
        let pidText = "\(getpid())\n"
        _ = pidText.withCString { pwrite(lockFile, $0, strlen($0), 0) }
        unlink(path)  // stale, from an agent that did not exit cleanly
        let oldMask = umask(0o177)
        listener = xil_unix_listen(path, 64)
        let listenError = errno
        umask(oldMask)
        guard listener >= 0 else {
            close(lockFile)
            throw .failed("cannot listen on \(path): \(String(cString: strerror(listenError)))")
        }
        Log.debug("control socket: \(path)")
    }

    var pollInterest: (fd: Int32, events: PollEvents)? { restingUntil == nil && listener >= 0 ? (listener, .readable) : nil }
    var deadline: MonotonicInstant? { restingUntil }

    func dispatch(_ events: PollEvents) {
        if let resting = restingUntil {
            guard now() >= resting else { return }
            restingUntil = nil
            return
        }
        acceptClients()
    }

    /// Removes the socket file. The lock file stays: removing it could let a
    /// starting agent lock a file that the next one no longer sees.
    func shutdown() {
        for connection in connections { connection.finish() }
        if listener >= 0 { unlink(path) }
    }

    func remove(_ connection: ControlConnection) {
        connections.removeAll { $0 === connection }
    }

    /// Accepts the waiting clients, a bounded number a turn (those left wait for the next
    /// turn, after the clients accepted now have been read). Other users are refused. At
    /// the limit the connection nearest its request deadline (one that never sent a whole
    /// line, or has asked nothing for longest) is closed to make room: a crowd of silent
    /// clients can never keep the user's own `lock` or `status` out. Only when every
    /// place holds the lock off or follows events is the new client refused.
    private func acceptClients() {
        for _ in 0..<ControlServerLimits.acceptsPerTurn {
            let fd = xil_accept(listener)
            guard fd >= 0 else {
                if errno == EMFILE || errno == ENFILE {
                    Log.limited("pauses in accepting control clients (out of file descriptors)",
                                "out of file descriptors: not accepting control clients for \(ControlServerLimits.acceptBackoff)", level: .error)
                    restingUntil = now() + ControlServerLimits.acceptBackoff
                }
                return
            }
            var pid: pid_t = 0
            var uid: uid_t = 0
            guard xil_peer_credentials(fd, &pid, &uid) == 0, uid == getuid() else {
                // The socket's mode keeps others out; this holds even if it is opened up.
                Log.limited("control connections of other users refused",
                            "refused a control connection from uid \(uid) (pid \(pid)): only uid \(getuid()) may control this agent")
                refuse(fd, "refused: only the agent's own user may control it")
                continue
            }
            if connections.count >= ControlServerLimits.maxConnections {
                let idle = connections.filter { $0.requestDeadline != nil }.min { $0.requestDeadline! < $1.requestDeadline! }
                guard let idle else {
                    Log.limited("control connections refused",
                                "refused a control connection from pid \(pid): \(ControlServerLimits.maxConnections) clients are connected already, each holding the lock off or following events")
                    refuse(fd, "refused: too many connections (\(ControlServerLimits.maxConnections))")
                    continue
                }
                Log.limited("control connections closed to make room",
                            "closed the control connection of \(idle.who), which had no request under way, to make room for pid \(pid): \(ControlServerLimits.maxConnections) clients are connected")
                idle.send(ControlRequest.errorReply("closed: \(ControlServerLimits.maxConnections) clients are connected, and this one asked nothing for longest"))
                idle.close()
            }
            let connection = ControlConnection(fd: fd, pid: pid, who: "pid \(pid) (\(processName(pid)))", handler: handler)
            connection.requestDeadline = now() + ControlServerLimits.firstLineTimeout
            connections.append(connection)
            onAccept(connection)
        }
    }

    private func refuse(_ fd: Int32, _ message: String) {
        let line = ControlRequest.errorReply(message) + "\n"
        _ = line.withCString { send(fd, $0, strlen($0), Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }
        close(fd)
    }
}
