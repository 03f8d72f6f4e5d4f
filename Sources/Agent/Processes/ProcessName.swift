import Glibc
import IdleCore

/// A process's name from /proc, escaped for logs and status.
func processName(_ pid: pid_t) -> String {
    guard pid > 0, let bytes = FileIO.readSmallFile("/proc/\(pid)/comm", limit: 64) else { return "?" }
    return ClientText.sanitized(String(decoding: bytes, as: UTF8.self).filter { $0 != "\n" }, maxBytes: 64)
}

/// A process's full program name: the last part of its argv[0] (`xdg-desktop-portal-gtk`,
/// where /proc's comm stops at 15 bytes), or comm when argv[0] is empty or unreadable.
func fullProcessName(_ pid: pid_t) -> String {
    guard pid > 0, let bytes = FileIO.readSmallFile("/proc/\(pid)/cmdline", limit: 4096) else { return processName(pid) }
    let first = bytes.prefix { $0 != 0 }
    let program = first.split(separator: UInt8(ascii: "/")).last.map { String(decoding: $0, as: UTF8.self) } ?? ""
    return program.isEmpty ? processName(pid) : ClientText.sanitized(program, maxBytes: 64)
}
