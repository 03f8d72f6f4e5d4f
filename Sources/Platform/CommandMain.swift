import Glibc
import IdleCore

/// What both executables' `main` does around their commands: standard streams open
/// before anything takes a descriptor, and an error said as `NAME: error: …` with its
/// exit status (64 for a usage error).
public enum CommandMain {
    /// Prints `text` to a file descriptor, whole.
    public static func emit(_ text: String, to fd: Int32) {
        var text = text
        text.withUTF8 { _ = write(fd, $0.baseAddress, $0.count) }
    }

    /// Prints `text` on standard output as a whole line; the status of a command that
    /// only says something (help, version).
    public static func say(_ text: String) -> Int32 {
        emit(text.hasSuffix("\n") ? text : text + "\n", to: 1)
        return 0
    }

    public static func run(_ name: String, _ command: () throws -> Int32) -> Never {
        // Before anything opens a descriptor: a launcher that closed 0-2 must not get the
        // X connection or the lock file at fd 2, where log lines would then be written.
        StandardStreams.ensureOpen()
        let status: Int32
        do {
            status = try command()
        } catch let error as UsageError {
            emit("\(name): error: \(error.message)\n", to: 2)
            status = 64
        } catch let error as AgentError {
            emit("\(name): error: \(error.message)\n", to: 2)
            status = error.exitStatus
        } catch {
            emit("\(name): error: \(error)\n", to: 2)
            status = 1
        }
        exit(status)
    }
}
