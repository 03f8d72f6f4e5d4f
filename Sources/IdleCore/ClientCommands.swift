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
        o.why = ClientText.clipped(v)
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
                why = ClientText.clipped("while running: \(parsed.positionals.joined(separator: " "))")
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
