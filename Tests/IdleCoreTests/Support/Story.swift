import IdleCore
import Testing

/// A fake world around one `IdleMachine`: both clocks, the X server's idle counter,
/// and every action the machine asked for. Time moves only when a test says so, and
/// the helpers do what the real edge does (wake at deadlines, drop input while the
/// machine is not listening), so that tests read like stories.
struct Story {
    private(set) var machine: IdleMachine
    private(set) var clock: Instant
    /// Monotonic time of the last input or screensaver reset the X server counted.
    /// The server's clock is CLOCK_MONOTONIC, so its idle counter excludes suspends.
    private(set) var serverActivity: MonotonicInstant
    /// Every action so far, in order.
    private(set) var actions: [Action] = []

    /// Not zero, and boottime ahead of monotonic, so that mixing the two clocks shows.
    static let origin = Instant(monotonic: .seconds(5_000), boottime: .seconds(5_123))

    init(_ config: AgentConfig, idleAtStart: Millis = .zero, awaiting: Set<InhibitorSource> = []) {
        clock = Story.origin
        machine = IdleMachine(config: config, now: clock)
        serverActivity = clock.monotonic - idleAtStart
        send(.start(serverIdle: idleAtStart, awaiting: awaiting))
    }

    /// A story for the agent as started with these flags, its locker `lock-screen`.
    init(flags: String..., idleAtStart: Millis = .zero) {
        self.init(Story.config(flags), idleAtStart: idleAtStart)
    }

    static func config(_ flags: [String], locker: String = "lock-screen",
                       sourceLocation: SourceLocation = #_sourceLocation) -> AgentConfig {
        do {
            guard case .agent(let options) = try Invocation.parse(flags) else {
                Issue.record("\(flags) is not an agent invocation", sourceLocation: sourceLocation)
                return AgentOptions().config(locker: locker)
            }
            return options.config(locker: locker)
        } catch {
            Issue.record("\(flags): \(error.message)", sourceLocation: sourceLocation)
            return AgentOptions().config(locker: locker)
        }
    }

    // MARK: Time

    /// Boottime now.
    var now: BoottimeInstant { clock.boottime }
    /// Boottime `t` after the story began.
    static func at(_ t: Millis) -> BoottimeInstant { origin.boottime + t }
    /// What `XScreenSaverQueryInfo` would say now.
    var serverIdle: Millis { clock.monotonic - serverActivity }

    /// Both clocks move; nothing is sent (the agent sleeps).
    mutating func advance(by span: Millis) {
        clock.monotonic += span
        clock.boottime += span
    }

    mutating func advance(to boottime: BoottimeInstant) { advance(by: boottime - now) }

    /// The machine sleeps for `span`: boottime moves, monotonic (and the X server's
    /// clock) does not. On resume the edge wakes at once: its resume watch (a
    /// cancel-on-set realtime timerfd) is cancelled by the kernel at every resume.
    /// The actions of that wake are returned.
    @discardableResult
    mutating func suspend(for span: Millis) -> [Action] {
        clock.boottime += span
        return wake()
    }

    // MARK: Events

    /// Whether a running locker grabs the keyboard (the grab probe's answer), as
    /// i3lock does within milliseconds; false for a locker that never covers the screen.
    var lockerGrabsKeyboard = true
    /// Whether something else holds the keyboard (a detached locker that forked, a menu).
    var keyboardHeldByOther = false
    /// Whether something else holds the pointer (a drag, a screenshot tool's selection).
    var pointerHeldByOther = false
    /// What the edge tells of the locker's windows while the keyboard is grabbed: nil as
    /// where X cannot tell (no X-Resource), true when a window of the locker shows.
    var lockerWindowShown: Bool?
    /// Where the pointer is (`--corners`): in no corner, mid-screen, until a test moves it.
    var pointer = PointerRest(corner: nil, position: PointerPosition(x: 320, y: 240))

    /// The pointer moves (raw motion when the machine listens) and stops here.
    @discardableResult
    mutating func movePointer(to corner: ScreenCorner?, x: Int32 = 0, y: Int32 = 0) -> [Action] {
        pointer = PointerRest(corner: corner, position: PointerPosition(x: x, y: y))
        return input()
    }

    @discardableResult
    mutating func send(_ event: Event) -> [Action] {
        var out = machine.handle(event, at: clock)
        actions += out
        // The edge answers the grab probe at once, as the agent does. It looks when it
        // carries the probe out: before the locker's start when a start follows.
        if let probe = out.firstIndex(of: .probeGrabs) {
            let beforeStart = out[probe...].contains { if case .run(.locker, _, _) = $0 { true } else { false } }
            let lockerRuns = !beforeStart && machine.isLocked
            let grabbed = keyboardHeldByOther || (lockerRuns && lockerGrabsKeyboard)
            let pointerGrabbed = pointerHeldByOther || (lockerRuns && lockerGrabsKeyboard)
            out += send(.lockerFact(.grabs(GrabReading(grabbed: grabbed, pointerGrabbed: pointerGrabbed, lockerRuns: lockerRuns,
                                                              lockerWindowShown: grabbed && lockerRuns ? lockerWindowShown : nil))))
        }
        // And where the pointer is, for hot corners.
        if out.contains(.checkPointerCorner) {
            out += send(.pointerRests(pointer))
        }
        return out
    }

    /// The user touches the keyboard or the mouse: the server's counter restarts and,
    /// if the machine listens, the edge reports raw input.
    @discardableResult
    mutating func input() -> [Action] {
        serverActivity = clock.monotonic
        return machine.listensForInput ? send(.input) : []
    }

    /// Raw input reported whatever `listensForInput` says (a batch read before deselecting).
    @discardableResult
    mutating func rawInput() -> [Action] {
        serverActivity = clock.monotonic
        return send(.input)
    }

    /// `XResetScreenSaver` (a video player) or a pointer warp: the counter restarts, no raw event.
    mutating func screensaverReset() { serverActivity = clock.monotonic }

    /// A wake-up that reads the server's counter (the fake server's, unless given).
    @discardableResult
    mutating func wake(serverIdle: Millis? = nil) -> [Action] {
        send(.wake(serverIdle: serverIdle ?? self.serverIdle))
    }

    /// The edge sleeps until the machine's next deadline and wakes there.
    @discardableResult
    mutating func wakeAtDeadline(serverIdle: Millis? = nil,
                                 sourceLocation: SourceLocation = #_sourceLocation) -> [Action] {
        guard let deadline = machine.nextDeadline else {
            Issue.record("the machine has no deadline to wake at", sourceLocation: sourceLocation)
            return []
        }
        if deadline > now { advance(to: deadline) }
        return wake(serverIdle: serverIdle)
    }

    /// The user is away: the edge sleeps until `boottime`, waking at every deadline on the way.
    /// Lock number `number` (counted from the story's start) comes exactly at
    /// `boottime`: not a millisecond before, and then.
    mutating func expectLock(_ number: Int, exactlyAt boottime: BoottimeInstant,
                             sourceLocation: SourceLocation = #_sourceLocation) {
        wait(until: boottime - .ms(1), sourceLocation: sourceLocation)
        #expect(actions.lockerStarts == number - 1, "lock \(number) before \(boottime)", sourceLocation: sourceLocation)
        wait(until: boottime, sourceLocation: sourceLocation)
        #expect(actions.lockerStarts == number, "lock \(number) not at \(boottime)", sourceLocation: sourceLocation)
    }

    @discardableResult
    mutating func wait(until boottime: BoottimeInstant, sourceLocation: SourceLocation = #_sourceLocation) -> [Action] {
        var out: [Action] = []
        var wakes = 0
        while let deadline = machine.nextDeadline, deadline <= boottime {
            wakes += 1
            guard wakes < 10_000 else {
                Issue.record("the deadline does not move on", sourceLocation: sourceLocation)
                break
            }
            if deadline > now { advance(to: deadline) }
            out += wake()
        }
        advance(to: boottime)
        return out
    }

    @discardableResult
    mutating func wait(for span: Millis, sourceLocation: SourceLocation = #_sourceLocation) -> [Action] {
        wait(until: now + span, sourceLocation: sourceLocation)
    }

    @discardableResult
    mutating func lockerExits(_ end: ProcessEnd) -> [Action] {
        send(.processEnded(.locker, end))
    }
}

// MARK: Reading actions

extension Array where Element == Action {
    /// The environments of every `.run` of this role.
    func runs(_ role: ProcessRole) -> [[EnvironmentVariable]] {
        compactMap { if case .run(role, _, let env) = $0 { env } else { nil } }
    }

    func commands(_ role: ProcessRole) -> [String] {
        compactMap { if case .run(role, let command, _) = $0 { command } else { nil } }
    }

    /// Every role started, in order.
    var started: [ProcessRole] {
        compactMap { if case .run(let role, _, _) = $0 { role } else { nil } }
    }

    var lockerStarts: Int { runs(.locker).count }

    var terminated: [ProcessRole] {
        compactMap { if case .terminate(let role) = $0 { role } else { nil } }
    }

    func logs(_ level: LogLevel) -> [String] {
        compactMap {
            if case .log(level, let text) = $0 { text } else if case .logRefusal(let text) = $0, level == .warning { text } else { nil }
        }
    }

    func logs(containing text: String) -> [String] {
        compactMap {
            if case .log(_, let line) = $0, line.contains(text) { line } else if case .logRefusal(let line) = $0, line.contains(text) { line } else { nil }
        }
    }
}

extension Array where Element == EnvironmentVariable {
    subscript(_ name: String) -> String? { first { $0.name == name }?.value }
}
