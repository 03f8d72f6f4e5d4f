import CLinux
import Glibc
import IdleCore

/// One line per event on stderr. Under systemd (JOURNAL_STREAM set) each line
/// starts with a syslog priority (`<3>`) so the journal keeps the level.
enum Log {
    nonisolated(unsafe) static var threshold = LogLevel.info
    nonisolated(unsafe) static var journald = getenv("JOURNAL_STREAM") != nil

    static func write(_ level: LogLevel, _ message: String) {
        guard level >= threshold else { return }
        var line: String
        if journald {
            let priority = switch level {
            case .debug: 7
            case .info: 6
            case .warning: 4
            case .error: 3
            }
            line = "<\(priority)>\(message)\n"
        } else {
            let label = switch level {
            case .debug: "debug: "
            case .info: ""
            case .warning: "warning: "
            case .error: "error: "
            }
            line = "xidlelock: \(label)\(message)\n"
        }
        line.withUTF8 { bytes in
            var rest = UnsafeRawBufferPointer(bytes)
            while !rest.isEmpty {
                let n = Glibc.write(2, rest.baseAddress, rest.count)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return }
                rest = UnsafeRawBufferPointer(rebasing: rest[n...])
            }
        }
    }

    static func debug(_ message: @autoclosure () -> String) {
        if threshold <= .debug { write(.debug, message()) }
    }
}

/// Errors that end the agent or a command, with the exit status of the convention.
public enum AgentError: Error, Equatable {
    /// Something the agent needs is not there: the display, an X extension, a locker. Exit 69.
    case unavailable(String)
    /// Another agent already runs for this user and display. Exit 73 (EX_CANTCREAT:
    /// its socket cannot be created), which a service manager should not restart.
    case alreadyRunning(String)
    /// Anything else that stops the agent. Exit 1.
    case failed(String)

    public var message: String {
        switch self {
        case .unavailable(let m), .alreadyRunning(let m), .failed(let m): m
        }
    }

    public var exitStatus: Int32 {
        switch self {
        case .unavailable: 69
        case .alreadyRunning: 73
        case .failed: 1
        }
    }
}

/// Reads both clocks together.
enum Clock {
    static func now() -> Instant {
        var monotonic: Int64 = 0
        var boottime: Int64 = 0
        xil_clocks_now(&monotonic, &boottime)
        return Instant(monotonic: Millis(monotonic / 1_000_000), boottime: Millis(boottime / 1_000_000))
    }
}
