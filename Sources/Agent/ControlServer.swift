import CLinux
import Glibc
import IdleCore

/// One client of the control socket.
final class Connection {
    let fd: Int32
    let pid: pid_t
    /// `pid 1234 (mpv)`, for status and logs.
    let who: String
    var input = LineBuffer(limit: ControlRequest.maxLineBytes)
    var output: [UInt8] = []
    /// Monotonic time by which a request must arrive, for clients that hold nothing.
    var deadline: Millis?
    var subscribed = false
    var inhibitorID: Int?
    /// Close once the output is written.
    var closing = false

    init(fd: Int32, pid: pid_t, who: String) {
        self.fd = fd
        self.pid = pid
        self.who = who
    }

    /// Queues a line; a reader that lets more than this pile up is dropped.
    func send(_ line: String) {
        output.append(contentsOf: line.utf8)
        output.append(0x0A)
        flush()
    }

    /// Writes what it can without blocking.
    func flush() {
        while !output.isEmpty {
            let n = output.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                output.removeFirst(n)
            } else {
                if n < 0 && errno == EINTR { continue }
                if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
                output.removeAll()
                closing = true
                return
            }
        }
    }
}

/// The agent's end of the control socket: one listening socket in a private
/// directory, guarded by a lock file so that one agent runs per user and display.
/// Reads are bounded; every client is checked to be the agent's own user.
final class ControlServer {
    let path: String
    let listener: Int32
    private let lockFile: Int32
    private(set) var connections: [Int32: Connection] = [:]

    static let maxConnections = 128
    static let maxPendingOutput = 1 << 20
    /// How long a client that holds nothing may stay without sending a request.
    static let requestTimeout = Millis.seconds(10)

    init(path: String, directory: String?) throws(AgentError) {
        if let directory { try SocketPath.ensurePrivate(directory) }
        self.path = path
        // The lock, not the socket file, says whether an agent runs: a crashed
        // agent's lock is released by the kernel, its socket file is just stale.
        let lockFile = open(path + ".lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        self.lockFile = lockFile
        guard lockFile >= 0 else {
            throw .failed("cannot open \(path).lock: \(String(cString: strerror(errno)))")
        }
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
            throw .failed("cannot listen on \(path): \(String(cString: strerror(listenError)))")
        }
        Log.debug("control socket: \(path)")
    }

    /// Removes the socket file. The lock file stays: removing it could let a
    /// starting agent lock a file that the next one no longer sees.
    func shutdown() {
        for connection in connections.values { connection.flush() }
        unlink(path)
    }

    /// Accepts every waiting client; refuses other users and clients beyond the limit.
    func acceptClients(now: Millis) {
        while true {
            let fd = xil_accept(listener)
            guard fd >= 0 else { return }
            var pid: pid_t = 0
            var uid: uid_t = 0
            guard xil_peer_credentials(fd, &pid, &uid) == 0, uid == getuid() else {
                // The socket's mode keeps others out; this holds even if it is opened up.
                Log.write(.warning, "refused a control connection from uid \(uid) (pid \(pid)): only uid \(getuid()) may control this agent")
                refuse(fd, "refused: only the agent's own user may control it")
                continue
            }
            guard connections.count < ControlServer.maxConnections else {
                refuse(fd, "refused: too many connections")
                continue
            }
            let connection = Connection(fd: fd, pid: pid, who: "pid \(pid) (\(processName(pid)))")
            connection.deadline = now + ControlServer.requestTimeout
            connections[fd] = connection
        }
    }

    private func refuse(_ fd: Int32, _ message: String) {
        let line = ControlRequest.errorReply(message) + "\n"
        _ = line.withCString { write(fd, $0, strlen($0)) }
        close(fd)
    }

    func remove(_ connection: Connection) {
        connections[connection.fd] = nil
        close(connection.fd)
    }

    /// The earliest request deadline of any client, monotonic.
    var nextDeadline: Millis? { connections.values.compactMap(\.deadline).min() }

    /// Reads what a client sent; returns the complete lines, or nil when the
    /// client is gone or broke the rules (and should be closed).
    func read(_ connection: Connection) -> [String]? {
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        var lines: [String] = []
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(connection.fd, $0.baseAddress, $0.count) }
            if n > 0 {
                chunk.withUnsafeBytes { connection.input.append(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
                while let line = connection.input.nextLine() { lines.append(line) }
                if connection.input.overflowed {
                    connection.send(ControlRequest.errorReply("request longer than \(ControlRequest.maxLineBytes) bytes"))
                    connection.closing = true
                    return lines
                }
                // Bounded per wake-up, so one flooding client cannot starve the rest.
                if lines.count >= 64 { return lines }
                continue
            }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return lines }
            // End of stream or an error: answer what came, then close.
            connection.closing = true
            return lines
        }
    }

    func processName(_ pid: pid_t) -> String {
        let fd = open("/proc/\(pid)/comm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return "?" }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let n = Glibc.read(fd, &buffer, 63)
        guard n > 0 else { return "?" }
        return String(decoding: buffer[..<n], as: UTF8.self).filter { $0 != "\n" }
    }
}
