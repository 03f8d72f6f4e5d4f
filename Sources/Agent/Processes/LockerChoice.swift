import Glibc
import IdleCore
import Platform

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

    /// `vncServer`: the X server serves the session over VNC (it has VNC-EXTENSION),
    /// where xsecurelock refuses to lock ("VNC detected. This would only lock your
    /// remote session. Will not lock.", exit 1, at every try: measured with TigerVNC).
    static func choose(given: String?, path: String? = pathVariable(), vncServer: Bool = false) throws(AgentError) -> String {
        if let given {
            if let program = ShellCommand.firstWord(of: given), findProgram(program, path: path) == nil {
                throw .unavailable("--locker: '\(program)' was not found in PATH, so the screen could never be locked")
            }
            return given
        }
        for candidate in candidates where findProgram(candidate.program, path: path) != nil {
            if vncServer && candidate.program == "xsecurelock" {
                Log.write(.info, "locker: not xsecurelock, which refuses to lock a session served over VNC (this X server has VNC-EXTENSION)")
                continue
            }
            Log.write(.info, "locker: \(candidate.command) (found installed; --locker chooses another)")
            return candidate.command
        }
        throw .unavailable("no locker found: install one of \(candidates.map(\.program).joined(separator: ", ")) or give --locker CMD")
    }

    /// The admin's locker, as the agent runs it under the policy: nothing of the
    /// user's decides which program it is or what it sees.
    struct PolicyLocker {
        /// The policy's command, its program named by absolute path.
        var command: String
        /// What a running locker of this command executes (/proc/PID/exe): the program,
        /// or the shell for a command that starts with a shell construct.
        var executable: String
        /// The session's, never the user's (`SessionUser.lockerEnvironment`).
        var environment: [String]?
    }

    /// The policy's locker with its program found in `SessionUser.systemPath` (a command that
    /// starts with a shell construct keeps its words: its shell then searches the
    /// system's PATH alone), and the clean environment it runs with.
    static func policyLocker(_ command: String, display: String?, sessionID: String?) throws(AgentError) -> PolicyLocker {
        let environment = SessionUser(uid: getuid())?.lockerEnvironment(
            display: display ?? "", sessionID: sessionID, xauthority: getenv("XAUTHORITY").map { String(cString: $0) },
            lang: getenv("LANG").map { String(cString: $0) })
        guard let word = ShellCommand.firstWord(of: command) else {
            return PolicyLocker(command: command, executable: "/bin/sh", environment: environment)
        }
        guard let program = findProgram(word, path: SessionUser.systemPath), program.hasPrefix("/") else {
            throw .unavailable("the policy's locker: '\(word)' was not found in the system's directories (\(SessionUser.systemPath)), so the screen could never be locked")
        }
        let rest = command.drop { $0 == " " || $0 == "\t" }.dropFirst(word.count)
        return PolicyLocker(command: program + rest, executable: program, environment: environment)
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
