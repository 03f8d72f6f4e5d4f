import Glibc
import IdleCore
import Platform

/// A process's name from /proc, escaped for logs and status.
func processName(_ pid: pid_t) -> String {
    guard pid > 0, let bytes = FileIO.readSmallFile("/proc/\(pid)/comm", limit: 64) else { return "?" }
    var name = String(decoding: bytes, as: UTF8.self).filter { $0 != "\n" }
    // The kernel cuts comm to 15 bytes ("xdg-desktop-por"): the command's own name,
    // where it starts the same, is the one the user knows.
    if name.utf8.count == 15, let command = FileIO.readSmallFile("/proc/\(pid)/cmdline", limit: 4096) {
        let first = String(decoding: command.prefix { $0 != 0 }, as: UTF8.self)
        let base = first.split(separator: "/").last.map(String.init) ?? first
        if base.hasPrefix(name) { name = base }
    }
    return ClientText.sanitized(name, maxBytes: 64)
}
