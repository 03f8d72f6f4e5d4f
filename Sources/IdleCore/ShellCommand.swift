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

// MARK: Whose end the agent sees

/// Why a locker command's end would not be the locker's own: the agent sees only
/// the shell's exit, which is the status of the last command that ran.
public struct LockerEndHazard: Equatable, Sendable {
    public enum Kind: Equatable, Sendable {
        /// `L; X`, `L` then a newline and `X`: X runs after the locker ends, and its status is the command's.
        case trailing
        /// `L || X`: X runs when the locker fails (a kill too).
        case orElse
        /// `L && X`: X runs after the locker's exit 0; a kill shows as an exit status.
        case andThen
        /// `L | X`: the pipeline's status is X's.
        case pipeline
        /// `L &`: the command returns at once; the locker's end is never seen.
        case background
        /// Several commands, none of them named like a locker: only the last one's end is seen.
        case unknownLocker
    }

    public var kind: Kind
    /// The locker's command as found (or the command's last, for `unknownLocker`).
    public var locker: String
    /// What comes after the locker, if anything.
    public var after: String
    /// The form that works: the commands before the locker, then `exec` and the locker.
    public var suggested: String

    /// The hazard in a few words, after "the locker command `CMD`".
    public var summary: String {
        switch kind {
        case .trailing, .orElse, .andThen, .pipeline: "goes on after the locker"
        case .background: "runs the locker in the background"
        case .unknownLocker: "may not end with the locker"
        }
    }

    /// What goes wrong.
    public var detail: String {
        switch kind {
        case .trailing:
            "`\(after)` runs once `\(locker)` ends, and its exit status is all the agent sees: a kill of the locker would read as an unlock"
        case .orElse:
            "`\(after)` runs when `\(locker)` fails or is killed, and its exit status is all the agent sees: a kill of the locker would read as an unlock"
        case .andThen:
            "`\(after)` runs after `\(locker)` exits 0, and its exit status is what the agent sees: its failure would turn an unlock into a failure, and a kill of the locker shows as an exit status, not as its signal"
        case .pipeline:
            "`\(locker)` is piped into `\(after)`, and a pipeline's exit status is its last command's: a kill of the locker would read as however `\(after)` ends"
        case .background:
            "the command returns at once, so the agent never sees the locker's end: every lock would be taken for a locker that returned at once and started again"
        case .unknownLocker:
            "only the exit status of its last command, `\(locker)`, reaches the agent: unless that is the locker, a kill of the locker would read as an unlock"
        }
    }

    /// What to do.
    public var fix: String {
        switch kind {
        case .background:
            "drop the `&`: the locker must keep running until unlocked (`\(suggested)`)"
        case .unknownLocker:
            "run the locker last, with exec (`... ; exec LOCKER`), and put what should follow an unlock in --on-unlock"
        case .trailing, .orElse, .andThen, .pipeline:
            "give `\(suggested)` as the locker (exec: the agent then sees the locker's own end), and put `\(after)` in --on-unlock (it runs after each unlock)"
        }
    }
}

extension ShellCommand {
    /// Whether the locker command's exit would not be the locker's own: a `;`, `&&`
    /// or `||` list or a newline with something after the locker, a pipeline out of
    /// it, a `&`. Nil when the locker is the last command, or is `exec`ed (nothing after
    /// it can run), or the command is one command. The locker is the first command whose
    /// program's name contains "lock" (i3lock, xsecurelock, slock, physlock…); without
    /// one, a command of several parts is a hazard unless its last part is `exec`ed.
    /// Parsed as the shell would split it at the top level: quotes, backslashes,
    /// `$(...)`, `${...}`, backquotes and comments hide what they hold; redirections
    /// (`2>&1`, `>&2`, `>|`) are no operators; `( )` and `{ }` groups are looked into.
    public static func lockerEndHazard(_ command: String) -> LockerEndHazard? {
        let parts = topLevelCommands(command)
        guard parts.count > 1 || parts.first?.then == "&" else { return nil }
        guard let index = parts.firstIndex(where: { $0.program.map(namedLikeALocker) == true }) else {
            guard let last = parts.last, last.then == "&" || !last.execs else { return nil }
            return LockerEndHazard(kind: last.then == "&" ? .background : .unknownLocker, locker: last.text, after: "",
                                   suggested: last.text)
        }
        let locker = parts[index]
        let before = String(command.prefix(locker.start))
        let suggested = before + (locker.execs ? locker.text : "exec " + locker.text)
        let after = parts[(index + 1)...].map { part in
            switch part.then {
            case nil: part.text
            case ";"?, "\n"?: part.text + ";"
            case let op?: part.text + " " + op
            }
        }.joined(separator: " ").trimmingSeparators()
        guard let then = locker.then else { return nil }
        let kind: LockerEndHazard.Kind
        switch then {
        case "&": kind = .background
        case _ where locker.execs || after.isEmpty: return nil
        case "|": kind = .pipeline
        case "||": kind = .orElse
        case "&&": kind = .andThen
        default: kind = .trailing
        }
        return LockerEndHazard(kind: kind, locker: locker.text, after: after, suggested: suggested)
    }

    /// Whether a program's name says it is a locker: it contains "lock" (i3lock,
    /// xsecurelock, slock, physlock, betterlockscreen, light-locker…).
    static func namedLikeALocker(_ program: String) -> Bool {
        let name = Array(program.lowercased().utf8)
        let lock = Array("lock".utf8)
        guard name.count >= lock.count else { return false }
        return (0...(name.count - lock.count)).contains { Array(name[$0..<$0 + lock.count]) == lock }
    }

    /// One command of a list, as `topLevelCommands` finds it.
    struct Part {
        /// Where it starts in the command, in characters.
        var start: Int
        var text: String
        /// Its program's name (the last path component): the first word that is not a
        /// keyword, an assignment or `exec`; nil if none.
        var program: String?
        /// Whether it starts with `exec`.
        var execs: Bool
        /// The operator after it: `;` (also `;;`), a newline, `&&`, `||`, `|`, `&`; nil at the end.
        var then: String?
    }

    static let keywords: Set<String> = ["!", "if", "then", "else", "elif", "fi", "while", "until", "do", "done",
                                        "for", "case", "esac", "in", "time", "command", "nice", "nohup", "env"]

    /// The commands of a shell command at the top level, with the operator after each.
    static func topLevelCommands(_ command: String) -> [Part] {
        let chars = Array(command)
        var parts: [Part] = []
        var i = 0
        var partStart = 0
        func character(_ k: Int) -> Character? { k < chars.count ? chars[k] : nil }
        func blank(_ c: Character) -> Bool { c == " " || c == "\t" || c.isNewline }
        func close(at end: Int, then op: String?) {
            var first = partStart
            while first < end, blank(chars[first]) { first += 1 }
            let text = String(chars[first..<end]).trimmingSeparators()
            guard !text.isEmpty else {
                // An operator after nothing (`;` at the start, or a second one): it joins the part before.
                if let op, !parts.isEmpty, parts[parts.count - 1].then == nil { parts[parts.count - 1].then = op }
                return
            }
            var execs = false
            var program: String?
            let words = text.split { blank($0) || "(){}".contains($0) }.map(String.init)
            for word in words {
                if keywords.contains(word) || (word.first != "=" && word.first != "-" && word.contains("=")) { continue }
                if word == "exec" {
                    execs = true
                    continue
                }
                program = word.split(separator: "/").last.map(String.init) ?? word
                break
            }
            parts.append(Part(start: first, text: text, program: program, execs: execs, then: op))
        }
        /// The index after a quoted or nested span whose opening character is at `k`.
        func skip(from k: Int, closing: Character, nests opening: Character? = nil) -> Int {
            var depth = 1
            var j = k + 1
            while j < chars.count {
                let c = chars[j]
                if c == "\\" && closing != "'" {
                    j += 2
                    continue
                }
                if closing != "'" && closing != "\"" && (c == "'" || c == "\"") {
                    j = skip(from: j, closing: c)
                    continue
                }
                if closing != "'" && c == "$", let next = character(j + 1), next == "(" || next == "{" {
                    j = skip(from: j + 1, closing: next == "(" ? ")" : "}", nests: next)
                    continue
                }
                if let opening, c == opening { depth += 1 }
                if c == closing {
                    depth -= 1
                    if depth == 0 { return j + 1 }
                }
                j += 1
            }
            return j
        }
        while i < chars.count {
            let c = chars[i]
            let previous: Character = i > 0 ? chars[i - 1] : " "
            switch c {
            case "\\":
                i += 2
            case "'", "\"", "`":
                i = skip(from: i, closing: c)
            case "$" where character(i + 1) == "(" || character(i + 1) == "{":
                let open = chars[i + 1]
                i = skip(from: i + 1, closing: open == "(" ? ")" : "}", nests: open)
            case "#" where blank(previous) || ";&|(".contains(previous):
                while i < chars.count, !chars[i].isNewline { i += 1 }
            case ";":
                close(at: i, then: ";")
                i += character(i + 1) == ";" ? 2 : 1
                partStart = i
            case _ where c.isNewline:
                close(at: i, then: "\n")
                i += 1
                partStart = i
            case "&" where previous == ">" || previous == "<":
                i += 1  // 2>&1, >&2, <&3: a redirection
            case "&":
                let and = character(i + 1) == "&"
                close(at: i, then: and ? "&&" : "&")
                i += and ? 2 : 1
                partStart = i
            case "|" where previous == ">":
                i += 1  // >|: a redirection
            case "|":
                let or = character(i + 1) == "|"
                close(at: i, then: or ? "||" : "|")
                i += or || character(i + 1) == "&" ? 2 : 1
                partStart = i
            default:
                i += 1
            }
        }
        close(at: chars.count, then: nil)
        return parts
    }
}

extension String {
    /// Without the blanks, newlines and `;` at either end.
    func trimmingSeparators() -> String {
        func separator(_ c: Character) -> Bool { c == " " || c == "\t" || c.isNewline || c == ";" }
        guard let first = firstIndex(where: { !separator($0) }), let last = lastIndex(where: { !separator($0) }) else { return "" }
        return String(self[first...last])
    }
}
