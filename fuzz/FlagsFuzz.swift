// Fuzz target: the command line (`Invocation.parse`). The input is split at
// NUL bytes into arguments, as the kernel hands argv over (no argument contains
// NUL). Every input parses or throws UsageError; what parses obeys the rules the
// flags document, and a client command's request reaches the agent unchanged.

func fuzzFlags(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = fuzzString(data, size)
    let arguments = input.isEmpty ? [] : input.split(separator: "\0", omittingEmptySubsequences: false).map(String.init)
    let invocation: Invocation
    do {
        invocation = try Invocation.parse(arguments)
    } catch {
        guard !error.message.isEmpty else { finding("empty UsageError message", input) }
        return 0
    }
    switch invocation {
    case .help(let text):
        guard !text.isEmpty else { finding("empty help text", input) }
    case .version:
        guard arguments == ["--version"] || arguments == ["-V"] else { finding("version from other arguments", input) }
    case .agent(let options):
        checkAgent(options, input)
    case .client(let client):
        checkClient(client, input)
    case .idle(let format):
        for ms: Int64 in [0, 999, 1000, 86_399_999, tenYears] {
            guard !format.render(Millis(ms)).isEmpty else { finding("idle --format \(format) rendered nothing for \(ms) ms", input) }
        }
    case .doctor:
        guard arguments.first == "doctor" else { finding("doctor from other arguments", input) }
    case .sessionGuard(let options):
        guard arguments.first == "guard" else { finding("guard from other arguments", input) }
        guard options.verbose == arguments.contains("--verbose") else { finding("guard --verbose not as given", input) }
    case .completions(let shell):
        guard !Completions.script(for: shell).isEmpty else { finding("empty \(shell) completion script", input) }
    }
    return 0
}

func checkAgent(_ o: AgentOptions, _ input: String) {
    func span(_ m: Millis, _ what: String, zero: Bool = false) {
        guard m.value >= (zero ? 0 : 1), m.value <= tenYears else { finding("\(what) \(m.value) ms out of range", input) }
    }
    func command(_ c: String?, _ what: String) {
        if let c, c.isEmpty { finding("empty \(what) command", input) }
    }
    span(o.lockAfter, "--lock-after")
    span(o.onUnlockInterval, "--on-unlock-interval", zero: true)
    command(o.locker, "--locker")
    command(o.notifier, "--notifier")
    command(o.onUnlock, "--on-unlock")
    switch (o.notifyBefore, o.notifier) {
    case (.some(let before), .some):
        span(before, "--notify-before")
        guard before < o.lockAfter else { finding("--notify-before not shorter than --lock-after", input) }
    case (nil, nil): break
    default: finding("--notify-before without --notifier or the other way round", input)
    }
    var names: Set<String> = ["lock", "notify"]
    for stage in o.stages {
        guard !stage.name.isEmpty, names.insert(stage.name).inserted else { finding("stage name '\(stage.name)' empty or used twice", input) }
        span(stage.idleTime, "--stage \(stage.name)")
        guard stage.command.contains(where: { $0 != " " && $0 != "\t" }) else { finding("blank --stage command", input) }
        command(stage.resumeCommand, "--resume")
    }
    if let socket = o.socket {
        guard !socket.isEmpty, socket.utf8.count < 108 else { finding("--socket path does not fit sockaddr_un", input) }
    }
}

func checkClient(_ c: ClientCommand, _ input: String) {
    // What `xidlelock CMD` sends is what the agent reads.
    let wire = c.request.line
    let received: ControlRequest
    do {
        received = try ControlRequest.parse(wire)
    } catch {
        finding("the agent refuses \(wire.debugDescription): \(error.message)", input)
    }
    guard received == c.request else { finding("sent \(c.request), the agent reads \(received)", input) }
    if let socket = c.socket {
        guard !socket.isEmpty, socket.utf8.count < 108 else { finding("--socket path does not fit sockaddr_un", input) }
    }
    switch c.request {
    case .inhibit(let why, let duration):
        guard why.utf8.count <= 256 else { finding("why longer than 256 bytes", input) }
        guard (duration == nil) != c.command.isEmpty else { finding("inhibit needs exactly one of --for and a command", input) }
        // Without --why the command says why ("while running: mpv film.mkv").
        guard c.command.isEmpty || !why.isEmpty else { finding("inhibit -- CMD with an empty why", input) }
    default:
        guard c.command.isEmpty else { finding("a command for \(c.request)", input) }
    }
    if c.json {
        guard c.request == .status || c.request == .events else { finding("--json for \(c.request)", input) }
    }
}
