import Glibc
import IdleCore

/// Chooses the locker command: the one given, checked, or the first installed
/// of a documented list.
enum LockerChoice {
    /// In order of preference. Each keeps running until the screen is unlocked,
    /// which is how the agent knows the lock is held. Deliberately absent:
    /// lockers that return at once (`light-locker-command -l`), whose exit would
    /// read as an unlock, and `loginctl lock-session`, which only asks logind to
    /// signal a lock that some other program must carry out: with none listening
    /// it silently does nothing.
    static let candidates: [(program: String, command: String)] = [
        ("xsecurelock", "xsecurelock"),
        ("i3lock", "i3lock -n"),
        ("slock", "slock"),
    ]

    static func choose(given: String?, path: String? = pathVariable()) throws(AgentError) -> String {
        if let given {
            if let program = ShellCommand.firstWord(of: given), findProgram(program, path: path) == nil {
                throw .unavailable("--locker: '\(program)' was not found in PATH, so the screen could never be locked")
            }
            return given
        }
        for candidate in candidates where findProgram(candidate.program, path: path) != nil {
            Log.write(.info, "locker: \(candidate.command) (found installed; --locker chooses another)")
            return candidate.command
        }
        throw .unavailable("no locker found: install one of \(candidates.map(\.program).joined(separator: ", ")) or give --locker CMD")
    }

    static func findProgram(_ name: String, path: String?) -> String? {
        if name.contains("/") { return access(name, X_OK) == 0 ? name : nil }
        for dir in (path ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":") {
            let candidate = "\(dir)/\(name)"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    static func pathVariable() -> String? {
        getenv("PATH").map { String(cString: $0) }
    }
}
