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

    /// Where the policy's locker is looked for: the system's directories, never the
    /// user's PATH (a `~/bin/i3lock` first in it must not stand in for the admin's).
    static let systemPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

    /// The policy's locker with its program named by absolute path, found in
    /// `systemPath`, and that path (nil when the command starts with no program, a
    /// shell construct: its shell then searches the system's PATH alone).
    static func resolvedPolicyLocker(_ command: String) throws(AgentError) -> (command: String, program: String?) {
        guard let word = ShellCommand.firstWord(of: command) else { return (command, nil) }
        guard let program = findProgram(word, path: systemPath), program.hasPrefix("/") else {
            throw .unavailable("the policy's locker: '\(word)' was not found in the system's directories (\(systemPath)), so the screen could never be locked")
        }
        let rest = command.drop { $0 == " " || $0 == "\t" }.dropFirst(word.count)
        return (program + rest, program)
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
