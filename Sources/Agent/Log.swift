import Glibc
import IdleCore

/// One line per event on stderr. Under systemd (JOURNAL_STREAM set) each line
/// starts with a syslog priority (`<3>`) so the journal keeps the level.
///
/// Logging never stalls the agent: a reader that does not read (a full pipe, a
/// stopped pager) must not stop it locking. The agent writes through its own
/// non-blocking descriptor for stderr, drops lines the sink cannot take, and
/// says how many when it can write again.
public enum Log {
    nonisolated(unsafe) static var threshold = LogLevel.info
    nonisolated(unsafe) static var journald = getenv("JOURNAL_STREAM") != nil
    /// Where lines go: fd 2 until `makeNonBlocking()` opens a descriptor of its own.
    nonisolated(unsafe) static var sink: Int32 = 2
    /// stderr is a socket (the journal's stream): written with MSG_DONTWAIT.
    nonisolated(unsafe) static var sinkIsSocket = false
    nonisolated(unsafe) private(set) static var dropped = 0

    /// Gives the log a non-blocking descriptor of its own. O_NONBLOCK on fd 2 itself
    /// would change the terminal or pipe shared with the shell and the hooks, so a
    /// new open file description of the same file is made (sockets cannot be
    /// reopened; they get MSG_DONTWAIT instead).
    public static func makeNonBlocking() {
        var info = stat()
        guard fstat(2, &info) == 0 else { return }
        if info.st_mode & S_IFMT == S_IFSOCK {
            sinkIsSocket = true
            return
        }
        let fd = open("/proc/self/fd/2", O_WRONLY | O_APPEND | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
        if fd >= 0 { sink = fd }
    }

    static func write(_ level: LogLevel, _ message: String) {
        guard level >= threshold else { return }
        if dropped > 0 {
            let count = dropped
            dropped = 0
            emit(line(.warning, "\(count) log line\(count == 1 ? " was" : "s were") dropped: the log's reader was not reading"))
        }
        emit(line(level, message))
    }

    /// A line from the C side (sd-bus, libpulse): level 0 debug, 1 info, 2 warning, 3 error.
    static func fromLibrary(_ level: Int32, _ message: UnsafePointer<CChar>?) {
        let text = message.map { String(cString: $0) } ?? ""
        switch level {
        case 0: debug(text)
        case 1: write(.info, text)
        case 2: write(.warning, text)
        default: write(.error, text)
        }
    }

    /// Lines of one kind (`key`) from a door anyone may knock on (a refused peer, a
    /// forged signal): the first in full, then at most one a minute with the count
    /// of those left out, so that a flood cannot bury the log.
    nonisolated(unsafe) private static var limits: [String: (last: MonotonicInstant, leftOut: Int)] = [:]
    static func limited(_ key: String, _ message: String, level: LogLevel = .warning) {
        let now = SystemClock.now().monotonic
        if let seen = limits[key], now - seen.last < .minutes(1) {
            limits[key] = (seen.last, seen.leftOut + 1)
            return
        }
        let leftOut = limits[key]?.leftOut ?? 0
        if limits.count > 1024 { limits.removeAll() }  // keys from many uids: bounded all the same
        limits[key] = (now, 0)
        write(level, leftOut > 0 ? "\(message) (and \(leftOut) more like it in the last minute)" : message)
    }

    static func debug(_ message: @autoclosure () -> String) {
        if threshold <= .debug { write(.debug, message()) }
    }

    static func line(_ level: LogLevel, _ message: String) -> String {
        if journald {
            let priority = switch level {
            case .debug: 7
            case .info: 6
            case .warning: 4
            case .error: 3
            case .audit: 5
            }
            return "<\(priority)>\(message)\n"
        }
        let label = switch level {
        case .debug: "debug: "
        case .info: ""
        case .warning: "warning: "
        case .error: "error: "
        case .audit: ""
        }
        return "xidlelock: \(label)\(message)\n"
    }

    /// Writes what the sink takes now; a line it cannot take whole is counted as dropped.
    private static func emit(_ text: String) {
        var text = text
        text.withUTF8 { bytes in
            let raw = UnsafeRawBufferPointer(bytes)
            let written = try? Syscall.nonBlocking("write") {
                sinkIsSocket ? send(sink, raw.baseAddress, raw.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
                    : Glibc.write(sink, raw.baseAddress, raw.count)
            }
            if case .done(let n) = written, n == raw.count { return }
            dropped += 1
        }
    }
}

/// Makes descriptors 0, 1 and 2 valid before anything else is opened. A launcher
/// that starts the agent with them closed would otherwise hand fd 2 to the X
/// connection or the lock file, and log lines would be written into those.
public enum StandardStreams {
    public static func ensureOpen() {
        for fd: Int32 in 0...2 where fcntl(fd, F_GETFD) == -1 && errno == EBADF {
            // open returns the lowest free number: this one.
            _ = open("/dev/null", O_RDWR)
        }
    }
}
