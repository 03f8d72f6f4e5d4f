/// What the command line asks for.
public enum Invocation: Equatable, Sendable {
    case agent(AgentOptions)
    case idle(IdleFormat)
    case client(ClientCommand)
    case completions(CompletionShell)
    case doctor(DoctorOptions)
    /// `xidlelock guard`: the root service (`guard` is Swift's keyword).
    case sessionGuard(GuardOptions)
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

        var help: String {
            """
            USAGE: \(synopsis)

            \(wrap(abstract, width: 80).joined(separator: "\n"))
            \(options.isEmpty ? "" : "\nOPTIONS:\n" + helpLines(options))
            """
        }
    }

    public static let commands: [CommandDoc] = [
        CommandDoc(name: "run", synopsis: "xidlelock [run] [OPTIONS]",
                   abstract: "Run the idle-lock agent (the default command).",
                   options: AgentOptions.specs.map(\.doc)),
        CommandDoc(name: "idle", synopsis: "xidlelock idle [--format FORMAT]",
                   abstract: "Print the X server's idle time in milliseconds, like xprintidle. Needs no agent.",
                   options: IdleFormat.specs.map(\.doc)),
        CommandDoc(name: "doctor", synopsis: "xidlelock doctor [--json] [--socket PATH] [--policy FILE]",
                   abstract: "Say why the screen would or would not lock now, each problem with what to do; exit 0 only when a lock would happen.",
                   options: DoctorOptions.specs.map(\.doc)),
        GuardOptions.command,
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

    /// `sources` gives the config files and the policy (none: the flags alone).
    public static func parse(_ arguments: [String], sources: ConfigSources = .none) throws(UsageError) -> Invocation {
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
        case "doctor":
            var options = DoctorOptions()
            let parsed = try parseArguments(args.dropFirst(), DoctorOptions.specs, into: &options, command: "xidlelock doctor")
            if parsed.helpRequested { return .help(try helpText(for: "doctor")) }
            try noPositionals(parsed, command: "doctor")
            return .doctor(options)
        case "guard":
            return try GuardOptions.parse(args.dropFirst())
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
        let flags = parsed.assignments.map { Setting(flag: $0.flag, value: $0.value, origin: .flag) }
        return .agent(try AgentOptions.layered(flags: flags, flagged: options, sources: sources))
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
        return name == "run" ? mainHelp : command.help
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
              xidlelock --stage dim=4m30s:'brightnessctl -s set 10%' \\
                        --resume 'brightnessctl -r' \\
                        --lock-after 5m --locker 'i3lock -n' \\
                        --stage screen-off=10m:'xset dpms force off' \\
                        --resume 'xset dpms force on'

            The screen counts as unlocked only when the locker exits 0 after it held
            the screen. Any other end (killed, a non-zero exit, an exit 0 at once) is a
            failure: logged as an error, and the locker is started again. There is no
            unlock command.

            Commands are run with /bin/sh -c, in their own session, with XIDLELOCK_EVENT,
            XIDLELOCK_STAGE, XIDLELOCK_IDLE_MS and XIDLELOCK_SUSPEND_GAP_MS set.
            Exit status: 0 done, 1 runtime error, 64 usage error, 69 display, X
            extension, locker or agent unavailable, 73 another agent runs for this
            display, 75 stopped under the policy (the unit restarts it), 77 guard
            not run as root. See xidlelock(1).
            """
    }
}


extension String {
    var trimmingSpaces: Substring { drop { $0 == " " || $0 == "\t" } }
}
