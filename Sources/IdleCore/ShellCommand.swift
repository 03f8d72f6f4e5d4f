/// What can be told about a shell command without running a shell.
public enum ShellCommand {
    /// Shell keywords and builtins, which no PATH lookup finds and `exec` cannot run.
    static let builtins: Set<String> = [
        "!", "(", "{", ".", ":", "[", "alias", "bg", "break", "case", "cd", "command", "continue", "env",
        "eval", "exec", "exit", "export", "false", "fg", "for", "getopts", "hash", "if", "jobs", "kill",
        "nice", "printf", "pwd", "read", "readonly", "return", "set", "shift", "test", "times", "trap",
        "true", "type", "ulimit", "umask", "unalias", "unset", "until", "wait", "while", "echo",
    ]

    /// The program a simple command starts, when that can be known without a shell:
    /// nil for variable assignments, shell keywords and builtins.
    public static func firstWord(of command: String) -> String? {
        let word = String(command.drop { $0 == " " || $0 == "\t" }.prefix { $0 != " " && $0 != "\t" })
        let plain = word.allSatisfy { $0.isLetter || $0.isNumber || "_-./+".contains($0) }
        guard !word.isEmpty, plain, !builtins.contains(word) else { return nil }
        return word
    }

    /// Whether the command is one program with its arguments (quotes, `$VAR`,
    /// `$(...)` and redirections allowed): no `;`, `&`, `|`, newline, backquote or
    /// subshell outside quotes, and it starts with a program, not a builtin.
    public static func isSimple(_ command: String) -> Bool {
        guard firstWord(of: command) != nil else { return false }
        var quote: Character?
        var escaped = false
        var previous: Character = " "
        for c in command {
            defer { previous = c }
            if escaped { escaped = false; continue }
            if c == "\\" && quote != "'" { escaped = true; continue }
            if let q = quote {
                if c == q { quote = nil }
                continue
            }
            switch c {
            case "'", "\"": quote = c
            case ";", "&", "|", "\n", "`": return false
            case "(" where previous != "$": return false
            default: break
            }
        }
        return quote == nil && !escaped
    }

    /// The command as the locker should be run: a simple command is `exec`ed, so
    /// that the locker itself is the agent's child and its real end (a signal, a
    /// status) reaches the agent. Debian's sh (dash) does not exec the last
    /// command by itself: a SIGKILL to the locker would otherwise arrive as the
    /// shell's exit status 137. Other commands run as given (their non-zero exit
    /// still counts as a failure).
    public static func lockerForm(_ command: String) -> String {
        isSimple(command) ? "exec " + command : command
    }
}
