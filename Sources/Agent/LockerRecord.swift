import CLinux
import Glibc

/// Remembers the running locker beside the control socket, so that an agent
/// started again (after a crash, `systemctl --user restart`, an upgrade) knows
/// the screen is locked and never starts a second locker on top of it.
struct LockerRecord {
    let path: String

    /// The process's start time in clock ticks since boot (/proc/PID/stat field 22):
    /// with the pid, it names one process even after the pid is reused.
    static func startTime(of pid: pid_t) -> String? {
        let fd = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 1024)
        let n = read(fd, &buffer, buffer.count)
        guard n > 0, let close = buffer[..<n].lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = buffer[(close + 1)..<n].split(separator: UInt8(ascii: " "))
        guard fields.count > 19 else { return nil }
        return String(decoding: fields[19], as: UTF8.self)
    }

    func save(_ pid: pid_t) {
        guard let start = LockerRecord.startTime(of: pid) else { return }
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            Log.write(.warning, "cannot record the locker in \(path): \(String(cString: strerror(errno)))")
            return
        }
        _ = writeAll(fd, "\(pid) \(start)\n")
        close(fd)
    }

    func remove() { unlink(path) }

    /// The recorded locker if it still runs, as a pidfd that becomes readable when it ends.
    func adopt() -> (pid: pid_t, pidfd: Int32)? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 64)
        let n = read(fd, &buffer, 63)
        close(fd)
        let words = n > 0 ? String(decoding: buffer[..<n], as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" }) : []
        guard words.count == 2, let pid = pid_t(words[0]), pid > 0,
              LockerRecord.startTime(of: pid) == String(words[1])
        else {
            remove()  // stale: that locker has ended
            return nil
        }
        let pidfd = xil_pidfd_open(pid)
        guard pidfd >= 0 else {
            Log.write(.warning, "the locker of an earlier agent (pid \(pid)) still runs but cannot be watched (\(String(cString: strerror(errno))))")
            return nil
        }
        return (pid, pidfd)
    }
}
