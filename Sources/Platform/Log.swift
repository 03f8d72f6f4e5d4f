import Glibc
import IdleCore

/// One line per event on stderr. Connected to the journal (JOURNAL_STREAM names
/// stderr itself) each line starts with a syslog priority (`<3>`) so the journal keeps
/// the level.
///
/// Logging never stalls the agent: a reader that does not read (a full pipe, a
/// stopped pager) must not stop it locking. The agent writes through its own
/// non-blocking descriptor for stderr, drops lines the sink cannot take, and
/// says how many when it can write again.
public enum Log {
    nonisolated(unsafe) package static var threshold = LogLevel.info
    nonisolated(unsafe) package static var journald = stderrIsJournalStream(getenv("JOURNAL_STREAM").map { String(cString: $0) })
    /// Where lines go: fd 2 until `makeNonBlocking()` opens a descriptor of its own.
    nonisolated(unsafe) package static var sink: Int32 = 2
    /// stderr is a socket (the journal's stream): written with MSG_DONTWAIT.
    nonisolated(unsafe) package static var sinkIsSocket = false
    nonisolated(unsafe) package private(set) static var dropped = 0

    /// sd-daemon's rule: JOURNAL_STREAM ("DEVICE:INODE") counts only when it names the
    /// file stderr is. The variable is inherited: a session started from a service
    /// (`tigervncserver@:1.service`) passes it on to programs whose stderr is a pipe
    /// or a file, where `<6>` prefixes would be noise.
    package static func stderrIsJournalStream(_ value: String?) -> Bool {
        guard let value else { return false }
        let parts = value.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var info = stat()
        guard fstat(2, &info) == 0 else { return false }
        return UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
    }

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
        // A log file opened with `>` (an Xsession's `2> file`) has one offset, which the
        // lockers and hooks inherit on fd 2: their lines overwrote the agent's own, which
        // go to the file's end. Appending to a regular file is what every writer wants.
        let flags = fcntl(2, F_GETFL)
        if info.st_mode & S_IFMT == S_IFREG, flags >= 0, flags & O_APPEND == 0 { _ = fcntl(2, F_SETFL, flags | O_APPEND) }
    }

    package static func write(_ level: LogLevel, _ message: String) {
        guard level >= threshold else { return }
        if dropped > 0 {
            let count = dropped
            dropped = 0
            emit(line(.warning, "\(count) log line\(count == 1 ? " was" : "s were") dropped: the log's reader was not reading"))
        }
        emit(line(level, message))
    }

    /// A line from the C side (sd-bus, libpulse): level 0 debug, 1 info, 2 warning, 3 error.
    package static func fromLibrary(_ level: Int32, _ message: UnsafePointer<CChar>?) {
        let text = message.map { String(cString: $0) } ?? ""
        switch level {
        case 0: debug(text)
        case 1: write(.info, text)
        case 2: write(.warning, text)
        default: write(.error, text)
        }
    }

    /// Lines of one kind from a door anyone may knock on (a refused hold, a refused or
    /// shed connection, a forged signal): the first few of a minute in full, then only
    /// counted, and the count said once the minute is over, so that no flood, however
    /// many clients it comes from, can bury the log. `kind` names the lines in the count
    /// ("… and 3771 more refused holds in the last minute").
    package static func limited(_ kind: String, _ message: String, level: LogLevel = .warning) {
        let now = SystemClock.now().monotonic
        sayCounts(at: now)
        let current = windows[kind].flatMap { now - $0.opened < .minutes(1) ? $0 : nil }
        if current == nil, windows.count >= 1024 {
            // Kinds named after a uid: bounded all the same (those with a count say it first).
            windows = windows.filter { $0.value.leftOut > 0 }
            if windows.count >= 1024 { sayCounts(at: now + .minutes(1)) }
        }
        var window = current ?? LimitWindow(opened: now, level: level)
        if window.said < LimitWindow.inFull {
            window.said += 1
            write(level, message)
        } else {
            window.leftOut += 1
            let due = window.opened + .minutes(1)
            countsDue = countsDue.map { Swift.min($0, due) } ?? due
        }
        windows[kind] = window
    }

    private struct LimitWindow {
        /// Lines of one kind said in full a minute.
        package static let inFull = 3
        package let opened: MonotonicInstant
        package let level: LogLevel
        package var said = 0
        package var leftOut = 0
    }
    nonisolated(unsafe) private static var windows: [String: LimitWindow] = [:]
    /// When the first count of lines left out is due; nil while none was left out, so
    /// that a quiet agent never wakes for its log.
    nonisolated(unsafe) package private(set) static var countsDue: MonotonicInstant?

    /// Says how many lines of each kind were left out in a minute that is over.
    package static func sayCounts(at now: MonotonicInstant) {
        guard let due = countsDue, now >= due else { return }
        countsDue = nil
        for (kind, window) in windows {
            guard now - window.opened >= .minutes(1) else {
                let due = window.opened + .minutes(1)
                if window.leftOut > 0 { countsDue = countsDue.map { Swift.min($0, due) } ?? due }
                continue
            }
            windows[kind] = nil
            if window.leftOut > 0 { write(window.level, "… and \(window.leftOut) more \(kind) in the last minute") }
        }
    }

    package static func debug(_ message: @autoclosure () -> String) {
        if threshold <= .debug { write(.debug, message()) }
    }

    package static func line(_ level: LogLevel, _ message: String) -> String {
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

/// Says the counts of rate-limited lines once their minute is over, even when no line of
/// their kind comes again. No deadline while nothing was left out: a quiet agent never
/// wakes for its log.
package final class LogCounts: EventSource {
    package init() {}
    package var deadline: MonotonicInstant? { Log.countsDue }
    package func dispatch(_ events: PollEvents) { Log.sayCounts(at: SystemClock.now().monotonic) }
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
