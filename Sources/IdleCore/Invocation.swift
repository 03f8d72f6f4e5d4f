public enum Verbosity: Int, Equatable, Sendable {
    case quiet, normal, verbose

    /// The least severe level that is written to the log.
    public var threshold: LogLevel {
        switch self {
        case .quiet: .warning
        case .normal: .info
        case .verbose: .debug
        }
    }
}

/// The agent's flags, as given.
public struct AgentOptions: Equatable, Sendable {
    public var lockAfter = Millis.minutes(10)
    public var locker: String?
    public var notifyBefore: Millis?
    public var notifier: String?
    public var onUnlock: String?
    public var onUnlockInterval = Millis.zero
    public var ignoreScreensaverReset = false
    public var suspendResetsIdle = false
    public var verbosity = Verbosity.normal

    public init() {}

    static let specs: [OptionSpec<AgentOptions>] = [
        OptionSpec("--lock-after", "DURATION", "Idle time before the locker runs (default: 10m).") { o, v throws(UsageError) in
            o.lockAfter = try duration(v, for: "--lock-after")
        },
        OptionSpec("--locker", "CMD", "Shell command that locks the screen and keeps running until unlocked (default: the first installed of xsecurelock, i3lock -n, slock, light-locker-command -l).") { o, v throws(UsageError) in
            guard !v.isEmpty else { throw UsageError("--locker: the command is empty") }
            o.locker = v
        },
        OptionSpec("--notify-before", "DURATION", "Run the notifier this long before the lock; input after it cancels the lock.") { o, v throws(UsageError) in
            o.notifyBefore = try duration(v, for: "--notify-before")
        },
        OptionSpec("--notifier", "CMD", "Shell command that warns of the coming lock (with --notify-before); ended when input returns.") { o, v throws(UsageError) in
            guard !v.isEmpty else { throw UsageError("--notifier: the command is empty") }
            o.notifier = v
        },
        OptionSpec("--on-unlock", "CMD", "Shell command run when the locker exits.") { o, v throws(UsageError) in
            guard !v.isEmpty else { throw UsageError("--on-unlock: the command is empty") }
            o.onUnlock = v
        },
        OptionSpec("--on-unlock-interval", "DURATION", "Run --on-unlock at most once per this time (default: 0s, every unlock).") { o, v throws(UsageError) in
            o.onUnlockInterval = try duration(v, for: "--on-unlock-interval", allowZero: true)
        },
        OptionSpec("--ignore-screensaver-reset", nil, "Count only real input as activity, not screensaver resets (video players, xset s reset) or pointer warps.") { o, _ in
            o.ignoreScreensaverReset = true
        },
        OptionSpec("--suspend-resets-idle", nil, "A suspend restarts the idle time instead of counting as idle time (xautolock's -detectsleep).") { o, _ in
            o.suspendResetsIdle = true
        },
        OptionSpec("--verbose", nil, "Log every wake-up and decision.") { o, _ in o.verbosity = .verbose },
        OptionSpec("--quiet", nil, "Log only warnings and errors.") { o, _ in o.verbosity = .quiet },
    ]

    /// Rules that span several flags.
    func validate(_ given: Set<String>) throws(UsageError) {
        if given.contains("--verbose") && given.contains("--quiet") {
            throw UsageError("--verbose and --quiet cannot be used together")
        }
        switch (notifyBefore, notifier) {
        case (.some, nil): throw UsageError("--notify-before needs --notifier CMD")
        case (nil, .some): throw UsageError("--notifier needs --notify-before DURATION")
        case (.some(let before), .some):
            if before >= lockAfter {
                throw UsageError("--notify-before (\(before)) must be shorter than --lock-after (\(lockAfter))")
            }
        case (nil, nil): break
        }
    }

    /// The state machine's configuration, with the locker command chosen by the edge.
    public func config(locker command: String) -> AgentConfig {
        var stages = [Stage(name: "lock", role: .lock, idleTime: lockAfter, command: command)]
        if let notifyBefore, let notifier {
            stages.append(Stage(name: "notify", role: .notify, idleTime: lockAfter - notifyBefore, command: notifier))
        }
        return AgentConfig(
            stages: stages,
            onUnlock: onUnlock,
            onUnlockInterval: onUnlockInterval,
            screensaverResetCountsAsActivity: !ignoreScreensaverReset,
            suspendCountsAsIdle: !suspendResetsIdle
        )
    }
}

/// How `xidlelock idle` prints the idle time.
public enum IdleFormat: String, CaseIterable, Equatable, Sendable {
    /// Whole milliseconds, like xprintidle.
    case ms
    /// Whole seconds.
    case s
    /// `1h 2m 3s`.
    case human
    /// `{"idle_ms":1234}`.
    case json

    static let specs: [OptionSpec<IdleFormat>] = [
        OptionSpec("--format", "FORMAT", "ms (default, like xprintidle), s, human or json.") { f, v throws(UsageError) in
            guard let format = IdleFormat(rawValue: v) else {
                throw UsageError("--format: '\(v)' is not one of ms, s, human, json")
            }
            f = format
        },
    ]

    public func render(_ idle: Millis) -> String {
        switch self {
        case .ms: String(idle.value)
        case .s: String(idle.value / 1000)
        case .human: Millis(idle.value / 1000 * 1000).description.replacingUnitSeparators()
        case .json: "{\"idle_ms\":\(idle.value)}"
        }
    }
}

extension String {
    /// `1h2m3s` → `1h 2m 3s`.
    func replacingUnitSeparators() -> String {
        var out = ""
        var previous: Character?
        for c in self {
            if let p = previous, p.isLetter, c.isNumber { out.append(" ") }
            out.append(c)
            previous = c
        }
        return out
    }
}

/// What the command line asks for.
public enum Invocation: Equatable, Sendable {
    case agent(AgentOptions)
    case idle(IdleFormat)
    case completions(CompletionShell)
    /// Print this text and exit 0.
    case help(String)
    case version

    public static let versionNumber = "0.1.0"

    /// A subcommand as documented: name, synopsis, abstract, options.
    public struct CommandDoc: Equatable, Sendable {
        public let name: String
        public let synopsis: String
        public let abstract: String
        public let options: [OptionDoc]
    }

    public static let commands: [CommandDoc] = [
        CommandDoc(name: "run", synopsis: "xidlelock [run] [OPTIONS]",
                   abstract: "Run the idle-lock agent (the default command).",
                   options: AgentOptions.specs.map(\.doc)),
        CommandDoc(name: "idle", synopsis: "xidlelock idle [--format FORMAT]",
                   abstract: "Print the X server's idle time in milliseconds, like xprintidle. Needs no agent.",
                   options: IdleFormat.specs.map(\.doc)),
        CommandDoc(name: "completions", synopsis: "xidlelock completions bash|zsh|fish",
                   abstract: "Print the shell completion script for bash, zsh or fish.",
                   options: []),
    ]

    public static let durationGrammar = """
        DURATION is a whole number of seconds (90) or number-unit pairs, largest unit
        first, each unit once: d, h, m, s, ms (90s, 500ms, 5m, 1h30m, 2m30s).
        """

    public static func parse(_ arguments: [String]) throws(UsageError) -> Invocation {
        var args = arguments[...]
        switch args.first {
        case "--version", "-V":
            guard args.count == 1 else { throw UsageError("--version takes no other arguments") }
            return .version
        case "help":
            return .help(args.count > 1 ? try helpText(for: args[args.startIndex + 1]) : mainHelp)
        case "idle":
            args = args.dropFirst()
            var format = IdleFormat.ms
            let parsed = try parseArguments(args, IdleFormat.specs, into: &format, command: "xidlelock idle")
            if parsed.helpRequested { return .help(try helpText(for: "idle")) }
            try noPositionals(parsed, command: "idle")
            return .idle(format)
        case "completions":
            return try parseCompletions(args.dropFirst())
        case "run":
            args = args.dropFirst()
        default:
            break
        }
        var options = AgentOptions()
        let parsed = try parseArguments(args, AgentOptions.specs, into: &options, command: "xidlelock")
        if parsed.helpRequested { return .help(mainHelp) }
        if let first = parsed.positionals.first {
            throw UsageError("unknown command '\(first)' (commands: \(commands.map(\.name).joined(separator: ", ")), help)")
        }
        try options.validate(Set(args.map { String($0.prefix { $0 != "=" }) }))
        return .agent(options)
    }

    static func noPositionals(_ parsed: ParsedArguments, command: String) throws(UsageError) {
        if let extra = parsed.positionals.first {
            throw UsageError("'xidlelock \(command)' takes no argument '\(extra)'")
        }
    }

    static func helpText(for name: String) throws(UsageError) -> String {
        guard let command = commands.first(where: { $0.name == name }) else {
            throw UsageError("help: unknown command '\(name)'")
        }
        return name == "run" ? mainHelp : """
            USAGE: \(command.synopsis)

            \(command.abstract)
            \(command.options.isEmpty ? "" : "\nOPTIONS:\n" + helpLines(command.options))
            """
    }

    public static var mainHelp: String {
        let others = commands.filter { $0.name != "run" }
        return """
            xidlelock \(versionNumber): locks an X11 session after the user has been idle.

            USAGE: xidlelock [run] [OPTIONS]
            \(others.map { "       \($0.synopsis)" }.joined(separator: "\n"))
                   xidlelock help [COMMAND] | --help | --version

            The agent watches raw input (XInput2), cross-checks the X server's idle
            counter, and runs the locker once the idle time reaches --lock-after.
            Time spent suspended counts as idle time. The locker is never killed.

            OPTIONS:
            \(helpLines(AgentOptions.specs.map(\.doc)))
            COMMANDS:
            \(others.map { "  \($0.name.padding(to: others.map(\.name.count).max()! + 2))\($0.abstract)" }.joined(separator: "\n"))

            \(durationGrammar)

            Commands are run with /bin/sh -c, in their own session, with XIDLELOCK_EVENT,
            XIDLELOCK_STAGE, XIDLELOCK_IDLE_MS and XIDLELOCK_SUSPEND_GAP_MS set.
            Exit status: 0 done, 1 runtime error, 64 usage error, 69 display, X
            extension or locker unavailable. See xidlelock(1).
            """
    }
}

extension String {
    func padding(to width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }
}
