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
    /// Stages given with --stage, in the order given.
    public var stages: [Stage] = []
    public var socket: String?
    public var secure = false

    public init() {}

    static let specs: [OptionSpec<AgentOptions>] = [
        OptionSpec("--lock-after", "DURATION", "Idle time before the locker runs (default: 10m).") { o, v throws(UsageError) in
            o.lockAfter = try duration(v, for: "--lock-after")
        },
        OptionSpec("--locker", "CMD", "Shell command that locks the screen and keeps running until unlocked (default: the first installed of xsecurelock, i3lock -n, slock).") { o, v throws(UsageError) in
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
        OptionSpec("--stage", "[NAME=]DURATION:CMD", "Also run CMD at this idle time, once per idle period (repeatable; e.g. dim=4m:'brightnessctl -s set 10%').") { o, v throws(UsageError) in
            o.stages.append(try parseStage(v, number: o.stages.count + 1))
            if o.stages.dropLast().contains(where: { $0.name == o.stages.last?.name }) {
                throw UsageError("--stage: the name '\(o.stages.last!.name)' is used twice")
            }
        },
        OptionSpec("--resume", "CMD", "Run CMD when activity returns after the --stage just before it fired.") { o, v throws(UsageError) in
            guard !o.stages.isEmpty else { throw UsageError("--resume must follow the --stage it belongs to") }
            guard o.stages[o.stages.count - 1].resumeCommand == nil else {
                throw UsageError("--resume: stage '\(o.stages[o.stages.count - 1].name)' has a resume command already")
            }
            guard !v.isEmpty else { throw UsageError("--resume: the command is empty") }
            o.stages[o.stages.count - 1].resumeCommand = v
        },
        OptionSpec("--socket", "PATH", "Control socket (default: $XDG_RUNTIME_DIR/xidlelock/DISPLAY.sock).") { o, v throws(UsageError) in
            o.socket = try socketPath(v)
        },
        OptionSpec("--secure", nil, "Refuse disable, inhibit, toggle, reset and quit over the socket (for managed machines).") { o, _ in
            o.secure = true
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

    /// `[NAME=]DURATION:CMD`; without a name the stage is called `stageN`.
    static func parseStage(_ text: String, number: Int) throws(UsageError) -> Stage {
        guard let colon = text.firstIndex(of: ":") else {
            throw UsageError("--stage: '\(text)' is not [NAME=]DURATION:CMD (e.g. dim=4m:'brightnessctl set 10%')")
        }
        let head = text[..<colon]
        let command = String(text[text.index(after: colon)...])
        var name = "stage\(number)"
        var time = String(head)
        if let eq = head.firstIndex(of: "=") {
            name = String(head[..<eq])
            time = String(head[head.index(after: eq)...])
            guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }) else {
                throw UsageError("--stage: the name '\(name)' must be letters, digits, - or _")
            }
            guard name != "lock", name != "notify" else {
                throw UsageError("--stage: the name '\(name)' belongs to --lock-after/--notify-before")
            }
        }
        guard !command.trimmingSpaces.isEmpty else { throw UsageError("--stage: the command after ':' is empty in '\(text)'") }
        return Stage(name: name, role: .custom, idleTime: try duration(time, for: "--stage"), command: command)
    }

    static func socketPath(_ path: String) throws(UsageError) -> String {
        guard !path.isEmpty else { throw UsageError("--socket: the path is empty") }
        // sockaddr_un holds 108 bytes with the terminating NUL.
        guard path.utf8.count < 108 else { throw UsageError("--socket: '\(path)' is longer than a socket path may be (107 bytes)") }
        return path
    }

    /// The state machine's configuration, with the locker command chosen by the edge.
    public func config(locker command: String) -> AgentConfig {
        var stages = [Stage(name: "lock", role: .lock, idleTime: lockAfter, command: command)] + self.stages
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

/// A command that talks to the running agent over its socket.
public struct ClientCommand: Equatable, Sendable {
    public var request: ControlRequest
    /// Print JSON (status, events) instead of text for people.
    public var json = false
    public var socket: String?
    /// `inhibit -- CMD ARGS`: the command to run while inhibiting.
    public var command: [String] = []

    init(_ request: ControlRequest) { self.request = request }
}

/// The options client commands share; each command takes the ones it lists.
struct ClientOptions {
    var socket: String?
    var json = false
    var why = ""
    var duration: Millis?

    static let socket = OptionSpec<ClientOptions>("--socket", "PATH", "The agent's control socket (default: $XDG_RUNTIME_DIR/xidlelock/DISPLAY.sock).") { o, v throws(UsageError) in
        o.socket = try AgentOptions.socketPath(v)
    }
    static let json = OptionSpec<ClientOptions>("--json", nil, "Print JSON (the protocol's own objects).") { o, _ in o.json = true }
    static let why = OptionSpec<ClientOptions>("--why", "TEXT", "Why, shown by status and events.") { o, v throws(UsageError) in
        guard v.utf8.count <= 256 else { throw UsageError("--why: longer than 256 bytes") }
        o.why = v
    }
    static func duration(_ help: String) -> OptionSpec<ClientOptions> {
        OptionSpec("--for", "DURATION", help) { o, v throws(UsageError) in o.duration = try IdleCore.duration(v, for: "--for") }
    }

    /// Each client command: synopsis, abstract, options.
    static let commands: [(name: String, synopsis: String, abstract: String, specs: [OptionSpec<ClientOptions>])] = [
        ("status", "xidlelock status [--json] [--socket PATH]", "Show the agent's state, idle time, next stage, locker, inhibitors and last suspend.", [json, socket]),
        ("lock", "xidlelock lock [--socket PATH]", "Lock now (no second locker if one runs).", [socket]),
        ("reset", "xidlelock reset [--socket PATH]", "Count as activity now: the idle time restarts.", [socket]),
        ("inhibit", "xidlelock inhibit [--why TEXT] (--for DURATION | -- CMD [ARGS...])", "Hold the stages off for a while, or while CMD runs (its exit status is returned).", [why, duration("Hold the stages off this long."), socket]),
        ("disable", "xidlelock disable [--for DURATION] [--socket PATH]", "Fire no stage until enabled (or for DURATION).", [duration("Re-enable after this long."), socket]),
        ("enable", "xidlelock enable [--socket PATH]", "Undo disable.", [socket]),
        ("toggle", "xidlelock toggle [--socket PATH]", "Disable if enabled, enable if disabled.", [socket]),
        ("events", "xidlelock events [--json] [--socket PATH]", "Print the agent's events as they happen, one line each.", [json, socket]),
        ("quit", "xidlelock quit [--socket PATH]", "Stop the agent (never the locker).", [socket]),
    ]

    static func parse(_ name: String, _ args: ArraySlice<String>) throws(UsageError) -> Invocation {
        guard let command = commands.first(where: { $0.name == name }) else { throw UsageError("unknown command '\(name)'") }
        var options = ClientOptions()
        let parsed = try parseArguments(args, command.specs, into: &options, command: "xidlelock \(name)")
        if parsed.helpRequested { return .help(try Invocation.helpText(for: name)) }
        var client: ClientCommand
        switch name {
        case "status": client = ClientCommand(.status)
        case "lock": client = ClientCommand(.lock)
        case "reset": client = ClientCommand(.reset)
        case "enable": client = ClientCommand(.enable)
        case "toggle": client = ClientCommand(.toggle)
        case "events": client = ClientCommand(.events)
        case "quit": client = ClientCommand(.quit)
        case "disable": client = ClientCommand(.disable(duration: options.duration))
        default:
            switch (options.duration, parsed.positionals.isEmpty) {
            case (.some, false): throw UsageError("inhibit: give either --for DURATION or -- CMD, not both")
            case (nil, true): throw UsageError("inhibit: give --for DURATION or -- CMD [ARGS...]")
            default: break
            }
            // Without --why, the command says why: `while running: mpv film.mkv`.
            var why = options.why
            if why.isEmpty && !parsed.positionals.isEmpty {
                // At most 256 bytes (the protocol's limit), cut between characters:
                // cut inside one, the bytes would not decode and the why would be lost.
                for c in "while running: \(parsed.positionals.joined(separator: " "))" {
                    guard why.utf8.count + c.utf8.count <= 256 else { break }
                    why.append(c)
                }
            }
            client = ClientCommand(.inhibit(why: why, duration: options.duration))
            client.command = parsed.positionals
        }
        if name != "inhibit" { try Invocation.noPositionals(parsed, command: name) }
        client.json = options.json
        client.socket = options.socket
        return .client(client)
    }
}

/// What the command line asks for.
public enum Invocation: Equatable, Sendable {
    case agent(AgentOptions)
    case idle(IdleFormat)
    case client(ClientCommand)
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
    ] + ClientOptions.commands.map {
        CommandDoc(name: $0.name, synopsis: $0.synopsis, abstract: $0.abstract, options: $0.specs.map(\.doc))
    }

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
        case .some(let name) where ClientOptions.commands.contains { $0.name == name }:
            return try ClientOptions.parse(name, args.dropFirst())
        default:
            break
        }
        var options = AgentOptions()
        let parsed = try parseArguments(args, AgentOptions.specs, into: &options, command: "xidlelock")
        if parsed.helpRequested { return .help(mainHelp) }
        if let first = parsed.positionals.first {
            throw UsageError("unknown command '\(first)' (commands: \(commands.map(\.name).joined(separator: ", ")), help)")
        }
        try options.validate(parsed.flags)
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
                   xidlelock COMMAND [OPTIONS]
                   xidlelock help [COMMAND] | --help | --version

            The agent watches raw input (XInput2), cross-checks the X server's idle
            counter, and runs the locker once the idle time reaches --lock-after.
            Time spent suspended counts as idle time. The locker is never killed.

            OPTIONS:
            \(helpLines(AgentOptions.specs.map(\.doc)))
            COMMANDS:
            \(helpLines(others.map { OptionDoc(flag: $0.name, valueName: nil, help: $0.abstract) }))
            \(durationGrammar)

            Stages: --lock-after and --notify-before are stages; --stage adds more, each
            fired once per idle period in order of idle time, with an optional --resume
            command for when activity returns. A chain (dim, lock, screen off):
              xidlelock --stage dim=4m30s:'brightnessctl -s set 10%' --resume 'brightnessctl -r' \\
                        --lock-after 5m --locker 'i3lock -n' \\
                        --stage screen-off=10m:'xset dpms force off' --resume 'xset dpms force on'

            There is no unlock command: only the locker unlocks the screen.

            Commands are run with /bin/sh -c, in their own session, with XIDLELOCK_EVENT,
            XIDLELOCK_STAGE, XIDLELOCK_IDLE_MS and XIDLELOCK_SUSPEND_GAP_MS set.
            Exit status: 0 done, 1 runtime error, 64 usage error, 69 display, X
            extension, locker or agent unavailable, 73 another agent runs for this
            display. See xidlelock(1).
            """
    }
}


extension String {
    var trimmingSpaces: Substring { drop { $0 == " " || $0 == "\t" } }
}
