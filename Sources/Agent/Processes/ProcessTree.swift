import Glibc
import Platform

/// A process and its descendants, as /proc tells them now: the locker's processes,
/// whose windows prove the locker's keyboard grab (`i3lock -n` is two processes, the
/// window belonging to the first; xsecurelock starts helpers; a compound command is a
/// shell with the locker under it).
enum ProcessTree {
    /// `pid` and every process below it, read from each task's `children` file
    /// (/proc/PID/task/TID/children, Linux 3.5 and later); at most `limit` processes, so
    /// that a locker forking without end cannot make the probe slow. A process that
    /// ended while being read is left out with its subtree.
    static func members(from pid: pid_t, limit: Int = 64) -> Set<pid_t> {
        var found: Set<pid_t> = [pid]
        var pending = [pid]
        while let next = pending.popLast(), found.count < limit {
            for child in children(of: next) where found.count < limit && found.insert(child).inserted {
                pending.append(child)
            }
        }
        return found
    }

    /// Its parent (/proc/PID/stat's fourth field), or nil once it is gone.
    static func parent(of pid: pid_t) -> pid_t? {
        guard let bytes = FileIO.readSmallFile("/proc/\(pid)/stat", limit: 1024),
              let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = bytes[(close + 1)...].split(separator: UInt8(ascii: " "))
        return fields.count > 1 ? pid_t(String(decoding: fields[1], as: UTF8.self)) : nil
    }

    /// The children of every thread of `pid`.
    private static func children(of pid: pid_t) -> [pid_t] {
        var result: [pid_t] = []
        for name in FileIO.entries(of: "/proc/\(pid)/task") {
            guard let tid = Int32(name),
                  let bytes = FileIO.readSmallFile("/proc/\(pid)/task/\(tid)/children", limit: 4096) else { continue }
            result += bytes.split { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\n") }.compactMap { Int32(String(decoding: $0, as: UTF8.self)) }
        }
        return result
    }
}
