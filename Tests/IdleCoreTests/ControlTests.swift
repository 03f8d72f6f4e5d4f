import IdleCore
import Testing

/// A fake clock and the machine, for stories about holds and requests.
private struct HoldStory {
    var machine: IdleMachine
    var now = Instant(monotonic: .seconds(100), boottime: .seconds(100))
    var actions: [Action] = []

    init(_ config: AgentConfig, idle: Millis = .zero) {
        machine = IdleMachine(config: config, now: now)
        actions = machine.handle(.start(serverIdle: idle), at: now)
    }

    @discardableResult
    mutating func send(_ event: Event) -> [Action] {
        actions = machine.handle(event, at: now)
        return actions
    }

    mutating func advance(_ span: Millis) {
        now.monotonic += span
        now.boottime += span
    }

    /// Goes to the machine's next deadline and wakes there, the server agreeing.
    mutating func wakeAtDeadline() {
        guard let deadline = machine.nextDeadline else { Issue.record("no deadline"); return }
        advance(max(deadline - now.boottime, .zero))
        send(.wake(serverIdle: machine.idle(at: now)))
    }

    var ran: [ProcessRole] {
        actions.compactMap { if case .run(let role, _, _) = $0 { role } else { nil } }
    }
    var announced: [Announcement] {
        actions.compactMap { if case .announce(let a) = $0 { a } else { nil } }
    }
}

private func config(_ extra: [Stage] = []) -> AgentConfig {
    var options = AgentOptions()
    options.lockAfter = .minutes(5)
    options.stages = extra
    return options.config(locker: "i3lock -n")
}

private let dim = Stage(name: "dim", role: .custom, idleTime: .minutes(4), command: "dim", resumeCommand: "undim")

@Suite struct JSONTests {
    @Test func readsNestedValuesAndEscapes() throws {
        let value = try JSONValue(parsing: #" {"a": [1, -2.5e1, true, null], "s": "q\"\\\n\u00e9", "o": {}} "#)
        #expect(value["a"] == .array([.number(1), .number(-25), .bool(true), .null]))
        #expect(value["s"]?.string == "q\"\\\né")
        #expect(value["o"] == .object([]))
    }

    @Test(arguments: ["", "{", "{\"a\":}", "[1,]", "\"open", "{\"a\":1} x", "tru", "{1:2}", "\"\u{1}\"", "01x"])
    func refusesMalformedText(_ text: String) {
        #expect(throws: JSONError.self) { try JSONValue(parsing: text) }
    }

    @Test func refusesDeepNestingInsteadOfRecursingForever() {
        let deep = String(repeating: "[", count: 40) + String(repeating: "]", count: 40)
        #expect(throws: JSONError.self) { try JSONValue(parsing: deep) }
        let fine = String(repeating: "[", count: 20) + String(repeating: "]", count: 20)
        #expect(throws: Never.self) { try JSONValue(parsing: fine) }
    }

    @Test func writtenTextReadsBackTheSame() throws {
        let value = JSONValue.object([("k", .string("tab\there \"quoted\" \u{7}")), ("n", .number(42)), ("f", .number(0.5))])
        #expect(try JSONValue(parsing: value.text) == value)
        #expect(value.text == #"{"k":"tab\there \"quoted\" \u0007","n":42,"f":0.5}"#)
    }
}

@Suite struct ControlRequestTests {
    static let all: [ControlRequest] = [
        .status, .lock, .reset, .enable, .toggle, .events, .quit,
        .disable(duration: nil), .disable(duration: .minutes(30)),
        .inhibit(why: "video \"film\"", duration: nil), .inhibit(why: "", duration: .seconds(90)),
        .passOn(source: .dbus, pid: 4242, who: "pid 4242 (mpv), :1.7", why: "mpv: video"),
        .passOn(source: .powerManagement, pid: 1, who: "", why: ""),
    ]

    @Test(arguments: all) func everyRequestReadsBackFromItsLine(_ request: ControlRequest) throws {
        #expect(try ControlRequest.parse(request.line) == request)
    }

    @Test func refusesRequestsWithoutTheRightVersion() {
        #expect(throws: ProtocolError("request has no protocol version \"v\"")) { try ControlRequest.parse(#"{"cmd":"status"}"#) }
        #expect(throws: ProtocolError.self) { try ControlRequest.parse(#"{"v":2,"cmd":"status"}"#) }
    }

    @Test(arguments: [
        (#"{"v":1,"cmd":"unlock"}"#, "unknown command 'unlock'"),
        (#"{"v":1}"#, "no \"cmd\""),
        (#"{"v":1,"cmd":"disable","for_ms":0}"#, "for_ms"),
        (#"{"v":1,"cmd":"inhibit","for_ms":-5}"#, "for_ms"),
        (#"{"v":1,"cmd":"inhibit","for_ms":1.5}"#, "for_ms"),
        (#"{"v":1,"cmd":"inhibit","for_ms":"10"}"#, "for_ms"),
        (#"{"v":1,"cmd":"pass-on","source":"socket","pid":5}"#, "\"source\" must be one of dbus, power-management, session-manager"),
        (#"{"v":1,"cmd":"pass-on","source":"dbus"}"#, "\"pid\" must be the caller's process id"),
        (#"{"v":1,"cmd":"pass-on","source":"dbus","pid":0}"#, "\"pid\""),
        ("garbage", "malformed"),
        ("[1,2]", "expected a JSON object"),
    ])
    func badRequestsGetAnErrorNamingTheProblem(_ line: String, _ expected: String) {
        do {
            _ = try ControlRequest.parse(line)
            Issue.record("accepted \(line)")
        } catch {
            #expect(error.message.contains(expected), "\(error.message)")
        }
    }

    @Test func repliesCarryVersionAndOutcome() throws {
        let ok = try JSONValue(parsing: ControlRequest.reply([("id", .number(3))]))
        #expect(ok["v"]?.integer == 1 && ok["ok"]?.bool == true && ok["id"]?.integer == 3)
        let error = try JSONValue(parsing: ControlRequest.errorReply("no \"such\" thing"))
        #expect(error["ok"]?.bool == false && error["error"]?.string == "no \"such\" thing")
    }
}

@Suite struct ClientCommandLineTests {
    private func client(_ args: String...) throws -> ClientCommand {
        guard case .client(let command) = try Invocation.parse(args) else {
            Issue.record("not a client command: \(args)")
            return try #require(nil as ClientCommand?)
        }
        return command
    }

    @Test func statusAndEventsTakeJSONAndSocket() throws {
        let status = try client("status", "--json", "--socket", "/tmp/x.sock")
        #expect(status.request == .status && status.json && status.socket == "/tmp/x.sock")
        #expect(try client("events").request == .events)
        #expect(try !client("events").json)
    }

    @Test func inhibitForADurationOrWhileACommandRuns() throws {
        let timed = try client("inhibit", "--why", "slides", "--for", "45m")
        #expect(timed.request == .inhibit(why: "slides", duration: .minutes(45)))
        #expect(timed.command.isEmpty)
        let wrapped = try client("inhibit", "--", "mpv", "--fs", "film.mkv")
        #expect(wrapped.command == ["mpv", "--fs", "film.mkv"])
        #expect(wrapped.request == .inhibit(why: "while running: mpv --fs film.mkv", duration: nil))
    }

    @Test(arguments: [
        (["inhibit"], "inhibit"),
        (["inhibit", "--for", "5m", "--", "sleep", "1"], "not both"),
        (["inhibit", "--for", "0"], "--for"),
        (["disable", "--for", "soon"], "--for"),
        (["lock", "--json"], "--json"),
        (["status", "extra"], "extra"),
        (["quit", "--socket"], "--socket"),
        (["status", "--socket", String(repeating: "x", count: 120)], "--socket"),
    ])
    func mistakesNameWhatIsWrong(_ args: [String], _ named: String) {
        let error = usageError(args)
        #expect(error?.message.contains(named) == true, "\(args): \(error?.message ?? "accepted")")
    }

    @Test func disableWithAndWithoutDuration() throws {
        #expect(try client("disable").request == .disable(duration: nil))
        #expect(try client("disable", "--for=1h").request == .disable(duration: .hours(1)))
    }
}

@Suite struct StageFlagTests {
    private func agent(_ args: String...) throws -> AgentOptions {
        guard case .agent(let options) = try Invocation.parse(args) else {
            return try #require(nil as AgentOptions?)
        }
        return options
    }

    @Test func stagesWithNamesResumesAndDefaults() throws {
        let options = try agent("--stage", "dim=4m30s:brightnessctl -s set 10%", "--resume", "brightnessctl -r",
                                "--stage", "10m:xset dpms force off", "--lock-after", "5m")
        #expect(options.stages == [
            Stage(name: "dim", role: .custom, idleTime: .seconds(270), command: "brightnessctl -s set 10%", resumeCommand: "brightnessctl -r"),
            Stage(name: "stage2", role: .custom, idleTime: .minutes(10), command: "xset dpms force off"),
        ])
        let config = options.config(locker: "slock")
        #expect(config.stages.map(\.name) == ["dim", "lock", "stage2"])
    }

    @Test("a stage's time on battery and the holds it fires through come before the first colon")
    func batteryAndIgnoredHolds() throws {
        let options = try agent("--stage", "dim=4m on-battery=2m ignore=audio,dbus:brightnessctl set 10% x=y:z",
                                "--stage", "off=9m ignore=all:xset dpms force off")
        #expect(options.stages.map(\.name) == ["dim", "off"])
        #expect(options.stages[0].command == "brightnessctl set 10% x=y:z")
        #expect(options.stages[0].idleTime(onBattery: false) == .minutes(4))
        #expect(options.stages[0].idleTime(onBattery: true) == .minutes(2))
        #expect(options.stages[0].ignoresHolds == [.audio, .dbus])
        #expect(options.stages[1].ignoresHolds == Set(InhibitorSource.allCases))
        #expect(options.stages[1].idleTime(onBattery: true) == .minutes(9))
        #expect(options.stages[0].summary == "dim=4m (2m on battery; ignores dbus, audio)")
    }

    @Test func commandsMayContainColonsAndEquals() throws {
        let options = try agent("--stage", "x=1m:echo a=b:c")
        #expect(options.stages.first?.command == "echo a=b:c")
        #expect(options.stages.first?.name == "x")
    }

    @Test(arguments: [
        (["--stage", "4m"], "--stage"),
        (["--stage", "4m:"], "empty"),
        (["--stage", "soon:cmd"], "--stage"),
        (["--stage", "0:cmd"], "above zero"),
        (["--stage", "bad/name=1m:cmd"], "name"),
        (["--stage", "dim=1m ignore=music:x"], "music"),
        (["--stage", "dim=1m ignore=:x"], "ignore"),
        (["--stage", "dim=1m loud=yes:x"], "loud"),
        (["--stage", "dim=1m on-battery=soon:x"], "on-battery"),
        (["--stage", "lock=1m:cmd"], "lock"),
        (["--stage", "a=1m:x", "--stage", "a=2m:y"], "twice"),
        (["--resume", "undim"], "must follow"),
        (["--stage", "1m:x", "--resume", "a", "--resume", "b"], "already"),
    ])
    func badStagesAreUsageErrors(_ args: [String], _ named: String) {
        let error = usageError(args)
        #expect(error?.message.contains(named) == true, "\(args): \(error?.message ?? "accepted")")
    }
}

@Suite struct HoldTests {
    @Test func anInhibitorHoldsEveryStageOff() {
        var story = HoldStory(config([dim]))
        story.send(.hold("pid 9 (mpv)", why: "video"))
        #expect(story.machine.nextDeadline == nil)
        #expect(story.machine.stateName == "inhibited")
        story.advance(.hours(2))
        story.send(.wake(serverIdle: .hours(2)))
        #expect(story.ran.isEmpty)
    }

    @Test func whenTheInhibitorEndsDueStagesFireAtOnceAndTheRestOnTime() {
        // The anchors xidlehook and hypridle never fire again here without new input.
        var story = HoldStory(config([dim]))
        let id = story.send(.hold()).grantedID!
        story.advance(.seconds(250))  // past dim (240 s), before lock (300 s)
        #expect(story.send(.release(id)).answer == .done)
        #expect(story.ran == [.stage(0)])
        #expect(story.announced.contains(.uninhibited(Inhibitor(id: id, who: "w", why: "", until: nil, client: "client 1"))))
        #expect(story.machine.nextDeadline == BoottimeInstant.seconds(100 + 300))
        story.wakeAtDeadline()
        #expect(story.ran == [.locker])
    }

    @Test func aTimedInhibitorEndsByItselfAtItsDeadline() {
        var story = HoldStory(config())
        let until = story.now.boottime + .minutes(30)
        story.send(.hold(why: "slides", for: .minutes(30)))
        #expect(story.machine.nextDeadline == until)
        story.wakeAtDeadline()
        #expect(story.machine.inhibitors.isEmpty)
        #expect(story.ran == [.locker])  // idle 30 min ≥ 5 min: locked the moment the hold ends
    }

    @Test func disableForADurationThenEnable() {
        var story = HoldStory(config())
        story.send(.disable(for: .hours(1)))
        #expect(story.machine.stateName == "disabled")
        story.advance(.minutes(10))
        story.send(.wake(serverIdle: .minutes(10)))
        #expect(story.ran.isEmpty)
        story.send(.enable())
        #expect(story.ran == [.locker])
        #expect(!story.machine.isDisabled)
    }

    @Test func resumeCommandsStillRunWhenAnInhibitorCameAfterTheStage() {
        var story = HoldStory(config([dim]))
        story.wakeAtDeadline()
        #expect(story.ran == [.stage(0)])
        story.send(.hold())
        story.advance(.seconds(5))
        story.send(.input)
        #expect(story.ran == [.resume(0)])
    }

    @Test func lockNowLocksEvenWhileInhibitedButNeverTwice() {
        var story = HoldStory(config())
        story.send(.hold())
        story.send(.lockNow)
        #expect(story.ran == [.locker])
        #expect(story.announced == [.locking(idle: .zero, requested: true, attempt: 1)])
        #expect(story.machine.stateName == "locking", "not locked until the locker holds the screen")
        story.advance(.ms(10))
        story.send(.lockerFact(.keyboardGrabbed(true)))  // the grab probe sees the locker's grab
        #expect(story.announced == [.locked(idle: .ms(10), requested: true)])
        story.send(.lockNow)
        #expect(story.ran.isEmpty)
        #expect(story.machine.stateName == "locked")
    }

    @Test func resetCountsAsActivity() {
        var story = HoldStory(config(), idle: .minutes(4))
        #expect(story.machine.nextDeadline == story.now.boottime + .minutes(1))
        story.send(.reset(from: .socket))
        #expect(story.machine.nextDeadline == story.now.boottime + .minutes(5))
    }

    @Test func listeningPausedWhileHeldResumesAtTheNextReading() {
        var story = HoldStory(config())
        let id = story.send(.hold()).grantedID!
        story.send(.input)
        #expect(!story.machine.listensForInput)  // nothing is due: no need to hear input
        story.advance(.minutes(20))
        story.send(.wake(serverIdle: .minutes(1)))  // the edge reads the counter before uninhibit
        #expect(story.machine.listensForInput)
        story.send(.release(id))
        #expect(story.ran.isEmpty)  // the counter showed input a minute ago: not idle enough
        #expect(story.machine.nextDeadline == story.now.boottime + .minutes(4))
    }

    @Test func statusSaysWhatIsHappeningInRelativeTime() {
        var story = HoldStory(config([dim]), idle: .minutes(1))
        story.send(.hold("pid 5 (mpv)", why: "film", for: .seconds(90)))
        let status = JSONValue.object(story.machine.statusFields(at: story.now, lockerPid: nil))
        #expect(status["state"]?.string == "inhibited")
        #expect(status["idle_ms"]?.integer == 60_000)
        #expect(status["next_stage"] == .null)
        #expect(status["locker_pid"] == .null)
        guard case .array(let inhibitors) = status["inhibitors"] else { Issue.record("no inhibitors"); return }
        #expect(inhibitors.first?["remaining_ms"]?.integer == 90_000)
        #expect(inhibitors.first?["who"]?.string == "pid 5 (mpv)")
        #expect(HumanText.status(status).contains("inhibited by pid 5 (mpv) [socket] (1m30s left): film"))
    }
}

@Suite struct RestartTests {
    @Test func anAdoptedLockerMeansNoSecondLockerEvenWhenIdleIsPastTheLockTime() {
        var story = HoldStory(config())
        story.send(.lockerAdopted)
        story.send(.lockerFact(.keyboardGrabbed(true)))  // the edge probes at adoption
        story.send(.start(serverIdle: .hours(1)))
        #expect(!story.ran.contains(.locker))
        #expect(story.machine.stateName == "locked")
        story.advance(.minutes(30))
        story.send(.wake(serverIdle: .minutes(90)))
        #expect(!story.ran.contains(.locker))
        // Not our child: its exit status cannot be read, so its end is no unlock.
        story.send(.lockerFact(.endedUnseen))
        #expect(story.ran == [.locker], "locked again at once: when in doubt, lock")
        #expect(story.machine.stateName == "locking")
    }

    @Test("an adopted locker that held the screen and exits 0 soon after the adoption is an unlock: it started long before (the guard's, an earlier agent's)")
    func anAdoptedLockerUnlockedSoonAfterTheAdoptionIsAnUnlock() {
        var story = HoldStory(config())
        story.send(.lockerAdopted)
        story.send(.lockerFact(.keyboardGrabbed(true)))
        story.send(.start(serverIdle: .hours(1)))
        story.advance(.ms(39))
        story.send(.lockerFact(.exited(0)))
        #expect(!story.ran.contains(.locker), "not relocked: it held the screen before this agent started")
        #expect(story.machine.stateName == "active", "unlocked: the idle time starts again")
    }

    @Test func stoppingWithdrawsAShownWarningButNeverTheLocker() {
        var options = AgentOptions()
        options.lockAfter = .minutes(5)
        options.notifyBefore = .seconds(30)
        options.notifier = "notify-send soon"
        var story = HoldStory(options.config(locker: "slock"))
        story.wakeAtDeadline()
        #expect(story.ran == [.stage(0)])  // stages sort by idle time: notify first
        story.send(.stop)
        #expect(story.actions.contains(.terminate(.stage(0))))
        #expect(!story.actions.contains(.terminate(.locker)))
    }
}

@Suite("JSON escapes from other languages' encoders")
struct JSONEscapeTests {
    @Test("a surrogate pair is one character; a lone surrogate is replaced; a sign is no hex digit")
    func surrogates() throws {
        #expect(try JSONValue(parsing: #""\ud83c\udfac film""#) == .string("🎬 film"))
        #expect(try JSONValue(parsing: #""\ud83c x""#) == .string("\u{FFFD} x"))
        #expect(throws: JSONError.self) { try JSONValue(parsing: #""\u+041""#) }
        let request = try ControlRequest.parse(#"{"v":1,"cmd":"inhibit","why":"\ud83c\udfac film"}"#)
        #expect(request == .inhibit(why: "🎬 film", duration: nil))
    }
}
