import CLinux
import Glibc
import Platform

/// Remembers the running locker beside the control socket, so that an agent
/// started again (after a crash, `systemctl --user restart`, an upgrade) knows
/// a locker runs and never starts a second one on top of it.
///
/// A record names the locker (pid and start time) and the X server it locks (a
/// token the agent keeps on that server's root window): a record left from an
/// earlier server on the same display number, or naming another process, is not
/// adopted. The file is opened once at start, so that writing it later cannot
/// fail for want of descriptors.
final class LockerRecord {
    let path: String
    private let fd: Int32
    private let serverToken: String

    init(path: String, serverToken: String) throws(AgentError) {
        self.path = path
        self.serverToken = serverToken
        fd = try PrivateFile.open(path)
    }

    deinit { close(fd) }

    /// The record beside a listening control socket, or none when it cannot be
    /// written, said loudly (log, audit trail): the agent locks all the same.
    static func open(beside control: ControlListener, serverToken: String) -> LockerRecord? {
        guard control.unavailable == nil else { return nil }
        let path = control.path + ".locker"
        do {
            return try LockerRecord(path: path, serverToken: serverToken)
        } catch {
            let consequence = "the agent runs without a record of its locker: it locks as set, but an agent started again while the locker runs would not know of it"
            Log.write(.error, "\(error.message): \(consequence)")
            AuditTrail.record(.runtimeFiles(path: path, problem: error.message, consequence: consequence))
            return nil
        }
    }

    func save(_ pid: pid_t) {
        guard let start = ProcessStart.time(of: pid) else { return }
        let text = "\(pid) \(start) \(serverToken)\n"
        let written = text.withCString { pwrite(fd, $0, strlen($0), 0) }
        if written < 0 || ftruncate(fd, off_t(written)) != 0 {
            Log.write(.warning, "cannot record the locker in \(path): \(String(cString: strerror(errno)))")
        }
    }

    func clear() { _ = ftruncate(fd, 0) }

    /// The recorded locker, if it still runs, is this user's, and locks this X
    /// server: its pid and a pidfd that becomes readable when it ends.
    /// `executable`: under a policy, what the recorded process must run (the policy's
    /// locker), in this agent's session: a process of the user's planted in the
    /// record is not taken for the lock.
    func adopt(executable: String? = nil) -> (pid: pid_t, pidfd: Int32)? {
        var buffer = [UInt8](repeating: 0, count: 256)
        let n = pread(fd, &buffer, 255, 0)
        let words = n > 0 ? String(decoding: buffer[..<n], as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" }) : []
        guard !words.isEmpty else { return nil }
        guard words.count == 3, let pid = pid_t(words[0]), pid > 0 else {
            Log.write(.warning, "ignoring the unreadable locker record \(path)")
            clear()
            return nil
        }
        var owner = stat()
        guard ProcessStart.time(of: pid) == String(words[1]), stat("/proc/\(pid)", &owner) == 0 else {
            clear()  // stale: that locker has ended
            return nil
        }
        guard owner.st_uid == getuid() else {
            Log.write(.warning, "the locker record names pid \(pid) of uid \(owner.st_uid), not this user's: not adopted")
            clear()
            return nil
        }
        guard String(words[2]) == serverToken else {
            Log.write(.warning, "the recorded locker (pid \(pid)) locked an earlier X server on this display: not adopted")
            clear()
            return nil
        }
        if let executable {
            var runs = stat()
            var expected = stat()
            guard stat("/proc/\(pid)/exe", &runs) == 0, stat(executable, &expected) == 0,
                  runs.st_dev == expected.st_dev, runs.st_ino == expected.st_ino else {
                let actual = FileIO.linkTarget("/proc/\(pid)/exe") ?? "?"
                Log.write(.error, "the locker record names pid \(pid), which runs \(actual), not the policy's locker \(executable): not adopted")
                clear()
                return nil
            }
            let session = { (pid: String) in FileIO.readSmallFile("/proc/\(pid)/sessionid").map { String(decoding: $0, as: UTF8.self) } }
            guard session("\(pid)") == session("self") else {
                Log.write(.error, "the locker record names pid \(pid), which belongs to another session: not adopted")
                clear()
                return nil
            }
        }
        let pidfd = xil_pidfd_open(pid)
        guard pidfd >= 0 else {
            Log.write(.warning, "the locker of an earlier agent (pid \(pid)) still runs but cannot be watched (\(String(cString: strerror(errno))))")
            return nil
        }
        return (pid, pidfd)
    }
}

/// Files the agent keeps beside its socket: never through a symlink, and only a
/// regular file of this user (a link planted there must not get its target truncated).
enum PrivateFile {
    static func open(_ path: String) throws(AgentError) -> Int32 {
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let reason = errno == ELOOP ? "it is a symbolic link" : String(cString: strerror(errno))
            throw .failed("cannot open \(path): \(reason)")
        }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == getuid() else {
            close(fd)
            throw .failed("refusing \(path): it must be a regular file owned by you")
        }
        return fd
    }
}
