import Glibc

/// When a process started: with its pid, it names one process even after the pid is
/// reused (the agent's and the guard's locker records).
package enum ProcessStart {
    /// In clock ticks since boot (/proc/PID/stat field 22); nil once it is gone.
    package static func time(of pid: pid_t) -> String? {
        guard let bytes = FileIO.readSmallFile("/proc/\(pid)/stat", limit: 1024),
              let close = bytes.lastIndex(of: UInt8(ascii: ")"))
        else { return nil }
        let fields = bytes[(close + 1)...].split(separator: UInt8(ascii: " "))
        guard fields.count > 19 else { return nil }
        return String(decoding: fields[19], as: UTF8.self)
    }
}
