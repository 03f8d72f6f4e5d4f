import CBus
import CLinux
import Glibc
import IdleCore
import Platform

/// One connection to the guard's socket: an agent's registration (kept open for the
/// agent's life) or root's question. Every peer may connect; nothing it says counts
/// before `PeerCheck` verified it.
///
/// Whoever connected is not who speaks: a process can connect, hand the socket to a
/// helper and exec something else, and SO_PEERCRED keeps naming the first. So every
/// line is judged by the credentials the kernel attached to its own bytes
/// (SCM_CREDENTIALS, `xil_read_with_writer`): the registration verifies the process
/// that wrote `register`, and after it a line from any other process ends the
/// registration (the agent is lost, fail closed).
final class GuardConnection: EventSource {
    let fd: Int32
    /// The process that wrote the lines (the `register` line's writer once registered;
    /// until then the connecting process's, for limits and refusals).
    private(set) var pid: pid_t
    let uid: uid_t
    unowned let service: GuardService
    var session: String?
    var registered = false
    /// Root's `sessions`, answered then closed.
    var asked = false
    /// The agent's process ended (its pidfd said so).
    var ended = false
    /// Its registration waits for logind's answer: the lines after it wait too (read
    /// no further), and `resume` goes on with them.
    var verifying = false
    private var input = LineBuffer(limit: GuardMessage.longestLine)
    private var output: [UInt8] = []
    private var closing = false
    private(set) var isFinished = false
    /// A peer that has not registered within this time is let go: a silent client
    /// holds nothing of the guard's for long.
    private var registerBy: MonotonicInstant?
    static let registrationTime = Millis.seconds(5)

    init(fd: Int32, pid: pid_t, uid: uid_t, service: GuardService) {
        self.fd = fd
        self.pid = pid
        self.uid = uid
        self.service = service
        registerBy = SystemClock.now().monotonic + GuardConnection.registrationTime
    }

    var pollInterest: (fd: Int32, events: PollEvents)? {
        if isFinished { return nil }
        if verifying { return output.isEmpty ? nil : (fd, .writable) }
        return (fd, output.isEmpty ? .readable : [.readable, .writable])
    }

    var deadline: MonotonicInstant? { registered || isFinished ? nil : registerBy }

    func dispatch(_ events: PollEvents) {
        if events.isEmpty {
            // The deadline: neither registered nor answered in time.
            if !registered { finish() }
            return
        }
        if events.contains(.writable) { flush() }
        guard !isFinished, !closing, !events.intersection([.readable, .hangUp, .error]).isEmpty else { return }
        var chunk = [UInt8](repeating: 0, count: 4096)
        var writer: pid_t = 0
        var writerUID: uid_t = 0
        let n = chunk.withUnsafeMutableBytes { xil_read_with_writer(fd, $0.baseAddress, UInt($0.count), &writer, &writerUID) }
        if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
        guard n > 0 else { return finish() }
        guard writer > 0, writerUID == uid else {
            return refuseWriter("bytes that carry no writer's credentials, or another user's (uid \(writerUID))")
        }
        if registered, writer != pid {
            return refuseWriter("a line written by pid \(writer), not by the verified agent (pid \(pid))")
        }
        if input.holdsPartialLine, let lineWriter, lineWriter != writer {
            return refuseWriter("one line written by two processes (pids \(lineWriter) and \(writer))")
        }
        lineWriter = writer
        chunk.withUnsafeBytes { input.append(UnsafeRawBufferPointer(rebasing: $0[..<Int(n)])) }
        handleLines()
        if input.overflowed { finish(with: .refused("a line longer than \(GuardMessage.longestLine) bytes")) }
    }

    /// The lines read and not yet handled, until one starts a verification.
    private func handleLines() {
        while !closing, !isFinished, !verifying, let line = input.nextLine() {
            guard let message = GuardMessage(line: line[...]) else {
                finish(with: .refused("not a line of the guard's protocol"))
                return
            }
            // The registration is the process that wrote it, not the one that connected.
            if !registered, case .register = message, let lineWriter { pid = lineWriter }
            service.received(message, from: self)
        }
    }

    /// logind answered: the lines that waited are handled, and reading goes on.
    func resume() {
        guard !verifying else { return }
        handleLines()
        if input.overflowed { finish(with: .refused("a line longer than \(GuardMessage.longestLine) bytes")) }
    }

    /// The writer of the bytes that wait in `input` (a line's start).
    private var lineWriter: pid_t?

    /// A line whose writer is not the one it must be: said loudly, and the connection
    /// ends (a registered agent's is then lost).
    private func refuseWriter(_ what: String) {
        Log.limited("guard lines from the wrong writer", "connection of pid \(pid) (uid \(uid)): \(what): closing it")
        finish(with: .refused(what))
    }

    func send(_ message: GuardMessage) { send(raw: message.line) }

    private func send(raw text: String) {
        guard !isFinished else { return }
        output.append(contentsOf: Array(text.utf8))
        flush()
    }

    /// Sends `message` (if any) and closes once it is written.
    func finish(with message: GuardMessage? = nil) { finish(raw: message?.line ?? "") }

    func finish(raw text: String) {
        guard !isFinished else { return }
        closing = true
        send(raw: text)
        if output.isEmpty { close() }
    }

    private func flush() {
        while !isFinished, !output.isEmpty {
            do {
                switch try output.withUnsafeBytes({ bytes throws(SystemError) in try FileIO.writeSome(fd, bytes) }) {
                case .done(let n): output.removeFirst(n)
                case .wouldBlock: return
                }
            } catch {
                return close()
            }
        }
        if closing && output.isEmpty { close() }
    }

    private func close() {
        guard !isFinished else { return }
        isFinished = true
        Glibc.close(fd)
        service.closed(self)
    }
}

/// What the guard checks of a peer that says it is a session's agent, each from what
/// the kernel or logind says, never from the peer: its executable, what it mapped, its
/// session, its user, its display.
struct PeerCheck {
    let agent: InstalledAgent
    let pid: pid_t
    let uid: uid_t
    let display: String

    struct Refusal: Error {
        var reason: String
        var session: String?
    }

    struct Verified {
        var session: String
        var agent: VerifiedAgent
    }

    /// What the kernel says of the process: its executable and what it mapped. The
    /// executable's path, or why it is refused.
    func checkProcess() -> Result<String, Refusal> {
        let executable: String
        switch installedExecutable() {
        case .failure(let refusal): return .failure(refusal)
        case .success(let path): executable = path
        }
        if let foreign = PeerCheck.foreignMapping(of: pid, executable: executable) {
            return .failure(Refusal(reason: "it runs code from \(foreign), a file root does not own (LD_PRELOAD?)"))
        }
        return .success(executable)
    }

    /// What logind says of the process's session (`session`, its answer to
    /// GetSessionByPID): a guarded session of the peer's user, on the display it watches.
    func checkSession(_ session: GuardedSession?, id sessionID: String, executable: String) -> Result<Verified, Refusal> {
        guard let session else {
            return .failure(Refusal(reason: "its session \(sessionID) is not a user's graphical X11 session", session: sessionID))
        }
        guard session.uid == uid else {
            return .failure(Refusal(reason: "it runs as uid \(uid), but session \(sessionID) is uid \(session.uid)'s (\(session.userName))", session: sessionID))
        }
        guard let watched = DisplayName(display), let sessions = DisplayName(session.display), watched == sessions else {
            return .failure(Refusal(reason: "it watches the display \(display), not the session's \(session.display.isEmpty ? "(none)" : session.display)", session: sessionID))
        }
        return .success(Verified(session: sessionID, agent: VerifiedAgent(pid: pid, executable: executable)))
    }

    /// The peer's executable, if it is the installed, root-owned xidlelock: the file the
    /// guard was told of at its start, or (after an upgrade replaced it) a root-owned
    /// file that no one else may write at the same path.
    func installedExecutable() -> Result<String, Refusal> {
        var info = stat()
        guard stat("/proc/\(pid)/exe", &info) == 0, let path = FileIO.linkTarget("/proc/\(pid)/exe") else {
            return .failure(Refusal(reason: "its executable cannot be read (\(String(cString: strerror(errno))))"))
        }
        // A program its user can read starts dumpable (fs/exec.c, would_dump): until it
        // makes itself non-dumpable, and again after every reload's exec, the user may
        // open /proc/PID/mem and keep it open to patch the agent. Unreadable, it is
        // non-dumpable from its first instruction.
        if info.st_mode & 0o004 != 0 || (info.st_mode & 0o040 != 0 && info.st_gid != 0) {
            return .failure(Refusal(reason: "its executable \(path) is readable by its user (mode \(String(info.st_mode & 0o7777, radix: 8))): the kernel leaves it dumpable, so its user could patch it; install it mode 0711 (as make install and the package do)"))
        }
        if UInt64(info.st_dev) == agent.device && UInt64(info.st_ino) == agent.inode { return .success(path) }
        guard info.st_uid == 0, info.st_mode & 0o022 == 0 else {
            return .failure(Refusal(reason: "its executable \(path) is not root's (owner uid \(info.st_uid), mode \(String(info.st_mode & 0o7777, radix: 8)))"))
        }
        guard FileIO.withoutDeleted(path) == agent.path else {
            return .failure(Refusal(reason: "its executable \(path) is not the installed \(agent.path)"))
        }
        return .success(path)
    }

    /// A file mapped executable in the process that root does not own, or that others
    /// may write: code the user put there (LD_PRELOAD, LD_LIBRARY_PATH, a planted library).
    static func foreignMapping(of pid: pid_t, executable: String) -> String? {
        guard let bytes = FileIO.readSmallFile("/proc/\(pid)/maps", limit: 1 << 20) else { return "/proc/\(pid)/maps (unreadable)" }
        var checked: Set<Substring> = []
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            guard fields.count == 6, fields[1].dropFirst(2).first == "x" else { continue }
            let path = fields[5].drop { $0 == " " }
            guard path.hasPrefix("/"), !checked.contains(path) else { continue }
            checked.insert(path)
            if FileIO.withoutDeleted(String(path)) == FileIO.withoutDeleted(executable) { continue }
            var info = stat()
            guard stat(String(path), &info) == 0, info.st_uid == 0, info.st_mode & 0o022 == 0 else { return String(path) }
        }
        return nil
    }

    /// Who traces `pid` (its TracerPid: 0 for none), or nil when it cannot be read.
    static func tracerPid(of pid: pid_t) -> pid_t? {
        guard let bytes = FileIO.readSmallFile("/proc/\(pid)/status", limit: 8192) else { return nil }
        let line = String(decoding: bytes, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix("TracerPid:") }
        return line.flatMap { pid_t($0.dropFirst("TracerPid:".count).filter { $0 != " " && $0 != "\t" }) }
    }

    /// Who traces `pid`, in words.
    static func tracer(of pid: pid_t) -> String { tracerPid(of: pid).map { "pid \($0)" } ?? "unknown" }

    /// The X cookie the locker needs: the display manager's `~/.Xauthority` (lightdm's
    /// default); none where the server needs none (a test's Xvfb).
    static func xauthority(of session: GuardedSession, home: String) -> String? {
        let path = home + "/.Xauthority"
        return access(path, F_OK) == 0 ? path : nil
    }
}

/// The installed xidlelock every session's agent must run, as the guard found it at its
/// start (`--agent`): its path and the file's identity.
struct InstalledAgent {
    let path: String
    let device: UInt64
    let inode: UInt64
    /// Its permission bits.
    let mode: mode_t

    init(path: String) throws(AgentError) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw .failed("the agent \(path) (--agent) cannot be read: \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFREG, info.st_uid == 0, info.st_mode & 0o022 == 0 else {
            throw .failed("the agent \(path) (--agent) is not a regular file only root may write (owner uid \(info.st_uid), mode \(String(info.st_mode & 0o7777, radix: 8)))")
        }
        self.path = path
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        mode = info.st_mode & 0o7777
    }

    /// `--agent`, or where the agent is installed beside the guard: the same directory (a
    /// build tree), or `../bin` (an installed `libexec/xidlelock-guard`).
    static func path(_ option: String?) -> String? {
        if let option { return option }
        return FileIO.ownExecutable.flatMap { FileIO.beside($0, ["xidlelock", "../bin/xidlelock"], mode: F_OK) }
    }
}
