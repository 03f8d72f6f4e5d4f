import Glibc
import IdleCore

/// A process's name from /proc, escaped for logs and status.
func processName(_ pid: pid_t) -> String {
    guard pid > 0, let bytes = FileIO.readSmallFile("/proc/\(pid)/comm", limit: 64) else { return "?" }
    return ClientText.sanitized(String(decoding: bytes, as: UTF8.self).filter { $0 != "\n" }, maxBytes: 64)
}
