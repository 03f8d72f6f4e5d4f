/// The idle state machine: events in, actions out, time passed in.
///
/// Idle time is measured on CLOCK_BOOTTIME from `lastActivity`, so time spent
/// suspended counts as idle unless the configuration says otherwise. The X
/// server's idle counter runs on CLOCK_MONOTONIC, which stops during suspend, so
/// every activity is kept in both clocks and the cross-check is made on the
/// monotonic one. Nothing
/// here reads a clock, touches X or starts a process; the edges do that.
///
/// Its parts (`Activity`, `Stages`, `HoldBook`, the `LockerSupervisor`, ...) each keep
/// their own state; one turn of `handle` looks at their time before and after the event
/// in the one order written down, with `nextDeadline`, in IdleMachine+Turn.swift.
public struct IdleMachine: Sendable {
    public let config: AgentConfig

    /// The last activity and the suspends since: the idle time every part reads.
    var activity: Activity
    /// The stages: which fired, the warnings shown, the resume commands owed.
    var stages: Stages
    /// The inhibitors and a disable, and the gate's records (`HoldBook`).
    var holds: HoldBook
    /// The first stage's wait for the sources to say what they hold.
    var startupWait = StartupWait()
    /// The locker's supervision: its state and the rules for what its end means.
    public internal(set) var supervisor: LockerSupervisor
    /// Whether the agent listens to raw input now, and since when.
    var listening: InputListening
    /// Logind's sleep delay: until when the system waits, and for what.
    var sleep = SleepDelay()
    /// `--screen-off-after-lock`: the monitor, on or off, and since when.
    var monitor = MonitorPower()
    /// The hot corners (`--corners`): the pointer's rest, as last checked.
    var corners: CornerWatch
    /// pcscd's readers and their cards (`--lock-on-card-removal`).
    var cards = CardBook()
    /// What logind was last told.
    var hints = LogindHints()
    /// What was said once already (`report`).
    var reported: Set<Disagreement> = []

    // What the desktop says that more than one part reads.

    /// The power source (UPower's OnBattery): it picks the stages' times.
    public internal(set) var onBattery = false
    /// Another session is in front (another VT): no input reaches this one, so its
    /// idle time goes on and the stages fire on time.
    public internal(set) var sessionInactive = false

    /// The last activity (input, a server-counter reset, an unlock), in both clocks.
    public var lastActivityAt: Instant { activity.at }
    /// Boottime of the last activity.
    public var lastActivity: BoottimeInstant { activity.at.boottime }
    /// The last raw input event seen.
    public var lastInput: Instant? { activity.lastInput }
    public var lastSuspendGap: SuspendGap? { activity.lastSuspendGap }
    /// Which stages have fired in this idle period, by index of `config.stages`.
    public var fired: [Bool] { stages.fired }
    public var screenIsOff: Bool { monitor.isOff }
    public var locker: LockerState { supervisor.state }
    /// Whether the agent should listen to raw input now (`InputListening`).
    public var listensForInput: Bool { listening.on }
    /// The system waits to sleep until this time at the latest (logind's delay).
    public var sleepDelayUntil: BoottimeInstant? { sleep.until }
    public var lockedHint: Bool { hints.locked }
    public var idleHint: Bool { hints.idle }

    /// What is said once only: disagreements of the two idle sources, refused resets.
    enum Disagreement: Hashable { case resetWithoutInput, inputNotCounted, resetRefusedSocket, resetRefusedBus, disableRefused, quitRefused, switchBackReset }

    /// Gaps shorter than this are clock-reading jitter, not a suspend.
    static let gapThreshold = Millis(100)
    /// Slack between a raw event's arrival and the server's own record of it.
    static let crossCheckTolerance = Millis(100)
    /// The X server's idle counter and our clock readings are both cut to whole
    /// milliseconds, at slightly different instants: server activity this close to
    /// the last one known is the same activity, not new input.
    static let counterJitter = Millis(2)
    /// A machine whose cookies come from `seed`: repeatable, for tests and simulations.
    public init(config: AgentConfig, now: Instant, seed: UInt64 = 0x5eed) {
        self.init(config: config, now: now, cookies: .seeded(seed))
    }

    public var cookiesFromTheKernel: Bool { holds.ids.isKernel }

    /// How long after the switch back the server's counter may still restart for it.
    static let switchBackSettle = Millis.seconds(2)

    /// `cookies`: where the inhibitor ids come from (the agent: the kernel's random
    /// source; a seed for tests and simulations).
    public init(config: AgentConfig, now: Instant, cookies: CookieSource) {
        self.config = config
        self.activity = Activity(at: now)
        self.stages = Stages(count: config.stages.count)
        self.holds = HoldBook(cookies: cookies)
        self.supervisor = LockerSupervisor(grabDeadline: config.lockerGrabDeadline, shortestHold: config.lockerShortestHold,
                                           underPolicy: config.policy != nil)
        self.listening = InputListening(since: now)
        self.corners = CornerWatch(settings: config.corners, firstStage: config.stages.first?.idleTime)
    }

    public func idle(at now: Instant) -> Millis { now.boottime - lastActivity }

    /// Time suspended since the last activity (given to hooks).
    public func suspended(at now: Instant) -> Millis { now.suspended - lastActivityAt.suspended }

    /// A locker process runs (started or adopted), whether or not it covers the screen yet.
    public var isLocked: Bool { supervisor.isRunning }
    /// A locker runs or is being started again after a failure: no stage may start another.
    public var lockerActive: Bool { locker != .unlocked }
    /// The next stage to fire and its name, if any is due to.
    public var nextStageName: String? { nextStageIndex.map { config.stages[$0].name } }
    public var hasNotified: Bool { !stages.notifiersShown.isEmpty }

    public mutating func handle(_ event: Event, at now: Instant) -> [Action] {
        var out: [Action] = []
        // What came due before the event, in the order written down (and explained)
        // at `TimedCheck`: a suspend first, then holds that ran out.
        run(TimedCheck.beforeEvent, now, &out)
        switch event {
        case .start(let serverIdle, let awaiting):
            activity.at = Instant(monotonic: now.monotonic - serverIdle, boottime: now.boottime - serverIdle)
            // Holds may have kept the screen unlocked all that time (an earlier agent's):
            // the budget counts from the last input, so a restart is never a fresh one.
            if config.maxInhibit != nil { holds.heldSince = lastActivityAt.boottime }
            awaitSources(awaiting, now)
            out.append(.log(.info, "started; idle for \(serverIdle) already; " + describeStages()))
            // Before the wait for what the sources hold: no hold defers this lock, and
            // like any lock only the locker's unlock ends it.
            if config.lockAtStart { lockRequest(from: "the start (--lock-at-start)", now, &out) }
        case .input:
            activity.lastInput = now
            activity(at: now, now, &out, byInput: true)
            pauseListening(now)
        case .wake(let serverIdle, let report):
            if let serverIdle { crossCheck(serverIdle: serverIdle, now, &out) }
            if let report { holdsNow(report, now, &out) }
            // A reading of the counter is what made a pause safe; a pause without an end
            // (nothing was due) ends at the first reading.
            if serverIdle != nil, listening.pauseOver(at: now.boottime) { listening.resume(at: now) }
        case .processEnded(let role, let end):
            processEnded(role, end, now, &out)
        case .stop:
            // A warning of a lock that this agent will no longer bring is withdrawn.
            stages.withdrawWarnings(&out)
            runResumeCommands(now, &out)
            if case .running = locker {
                out.append(.log(.info, "stopping; the locker keeps running (the screen stays locked)"))
            } else {
                out.append(.log(.info, "stopping"))
            }
            return out
        case .lockNow:
            lockRequest(from: "", now, &out)
        case .reset(let source, let by):
            out.append(.answer(reset(from: source, by: by, now, &out)))
        case .holdsNow(let report):
            holdsNow(report, now, &out)
        case .holdAsked(let owner, let claim):
            out.append(.answer(admit(claim, of: owner, now, &out)))
        case .holdReleased(let owner, let id):
            out.append(.answer(holdReleased(owner, id: id, now, &out)))
        case .ownerGone(let owner):
            ownerGone(owner, now, &out)
        case .sourceReady(let source, let settle):
            sourceReported(source, settle: settle, now, &out)
        case .sourceLost(let source):
            ownersGone({ $0.source == source }, now, &out)
        case .disable(let span, let by):
            out.append(.answer(disable(for: span, by: by, now, &out)))
        case .enable(let by):
            if isDisabled { enable(by: by, now, &out) }
            out.append(.answer(.done))
        case .quitAsked(let by):
            if config.secure {
                report(.quitRefused, "refused to quit for \(by): the agent runs with --secure (said once)", &out)
                out.append(.answer(.refused("the agent runs with --secure")))
            } else {
                out.append(.answer(.done))
            }
        case .lockerAdopted:
            _ = supervisor.handle(.adopted, at: now)
            out.append(.log(.info, "the locker of an earlier agent still runs; watching it (no second locker)"))
        case .lockerFact(let fact):
            apply(supervisor.handle(fact, at: now), now, &out)
        case .lockRequest(let from):
            lockRequest(from: from, now, &out)
        case .prepareForSleep(let limit):
            prepareForSleep(delayLimit: limit, now, &out)
        case .resumedFromSleep:
            resumedFromSleep(now, &out)
        case .sessionActive(let active):
            sessionActive(active, now, &out)
        case .pointerRests(let rest):
            pointerRests(rest, now, &out)
        case .powerSource(let onBattery):
            powerSource(onBattery: onBattery, now, &out)
        case .cards(let report):
            cardsReported(report, now, &out)
        }
        // What the event made due, and what its time made due, in the one order
        // written down (and explained) at `TimedCheck`.
        run(TimedCheck.afterEvent, now, &out)
        return out
    }

    // MARK: The locker

    mutating func startLocker(_ now: Instant, _ out: inout [Action]) {
        guard let stage = config.lockStage else { return }
        let attempt = supervisor.starting(at: now)
        let retry = attempt > 1 ? " (attempt \(attempt))" : ""
        let why = stages.lockRequested ? "on request" : "after \(idle(at: now)) idle"
        out.append(.log(.info, "locking \(why)\(retry)"))
        // The keyboard is looked at before the locker starts (the edge carries actions
        // out in order): a grab then is another client's, and never the locker's proof.
        out.append(.probeGrabs)
        out.append(.run(.locker, command: stage.command, environment: environment("lock", stage, now)))
        out.append(.announce(.locking(idle: idle(at: now), requested: stages.lockRequested, attempt: attempt)))
    }

    /// A failed locker is started again when its backoff ends.
    mutating func retryLockerIfDue(_ now: Instant, _ out: inout [Action]) {
        guard supervisor.retryDue(at: now.boottime) else { return }
        if supervisor.lastReturnedAtOnce {
            // The last one forked and returned: if its detached copy holds the
            // keyboard, a second one would only pile up. Ask first.
            probe(now, &out)
        } else {
            startLocker(now, &out)
        }
    }

    /// Runs the grab probe when the supervisor's schedule says so.
    mutating func probeIfDue(_ now: Instant, _ out: inout [Action]) {
        if let due = supervisor.nextProbe(hurry: sleep.waits), now.boottime >= due { probe(now, &out) }
    }

    mutating func probe(_ now: Instant, _ out: inout [Action]) {
        supervisor.probed(at: now)
        out.append(.probeGrabs)
    }

    mutating func processEnded(_ role: ProcessRole, _ end: ProcessEnd, _ now: Instant, _ out: inout [Action]) {
        if role == .beforeSleep {
            sleep.hookRunning = false
            letSleepIfReady(now, &out)
        }
        guard role == .locker else {
            if !end.succeeded { out.append(.log(.warning, "\(role) \(end)")) }
            return
        }
        let fact: LockerFact = switch end {
        case .exited(let status): .exited(status)
        case .killed(let signal): .killed(signal: signal)
        case .failedToStart(let reason): .failedToStart(reason)
        }
        apply(supervisor.handle(fact, at: now), now, &out)
    }

    /// Carries out what the supervisor decided.
    mutating func apply(_ verdict: LockerVerdict, _ now: Instant, _ out: inout [Action]) {
        switch verdict {
        case .none:
            break
        case .covered(let after):
            out.append(.log(.info, "locked: the locker holds the keyboard (\(after) after its start)"))
            out.append(.announce(.locked(idle: idle(at: now), requested: stages.lockRequested)))
            tellLockedHint(true, &out)
            screenWoken(now)
            letSleepIfReady(now, &out)
        case .notCovering:
            // Without a policy it is left running (never a second locker, and it may be a
            // locker that never grabs); say so loudly. Under the policy it was replaced.
            out.append(.log(.error, "the locker has run for \(supervisor.grabDeadline) without grabbing the keyboard: the screen may NOT be covered (left running; its exit 0 will count as an unlock)"))
            out.append(.announce(.lockerNotCovering(runningFor: supervisor.grabDeadline)))
        case .letGo(let heldFor, let runningFor):
            // As one that never grabbed (it cannot be replaced while it runs), but the
            // screen was said locked until now: logind and subscribers hear otherwise.
            out.append(.log(.error, "the locker let go of the keyboard after holding it for \(heldFor): the screen may NOT be covered (left running; its exit 0 will count as an unlock)"))
            out.append(.announce(.lockerNotCovering(runningFor: runningFor, letGo: true)))
            tellLockedHint(false, &out)
        case .grabHeldByOther(let devices, let beforeStart):
            // Said for each attempt: the retries back off to once a minute.
            let held = GrabbedDevice.phrase(devices)
            let how = beforeStart ? "held when the locker started"
                : "the keyboard stayed grabbed for \(supervisor.grabDeadline) while no window of the locker showed"
            out.append(.log(.error, "another client holds \(held) (\(how)): the locker cannot cover the screen, which may NOT be locked; close the menu, game or tool that holds it"))
            for device in devices { out.append(.announce(.grabHeldByOther(device, beforeStart: beforeStart))) }
            tellLockedHint(false, &out)
        case .failed(let failure, let retryAt, _):
            // Under the policy, one that runs without covering the screen: killed before
            // the next one starts (never two at once).
            if failure.stillRuns { out.append(.killLocker) }
            let delay = retryAt - now.boottime
            // The failure named with its likely cause: the locker could not grab what another client holds.
            let held = supervisor.heldByOther
            let reason = failure.description + (held.isEmpty ? "" : " (another client holds \(GrabbedDevice.phrase(held.sorted())))")
            out.append(.log(.error, "the locker \(reason): the screen may NOT be locked; starting it again \(delay <= .zero ? "now" : "in \(delay)")"))
            out.append(.announce(.lockerFailed(kind: failure.kind, reason: reason, retryIn: delay)))
            tellLockedHint(false, &out)
            // A retry due now starts from the locker's own time, after the event.
        case .retryNow:
            startLocker(now, &out)
        case .retryHeldOff(let until, let again):
            // Said once loudly; then quietly, with the checks backing off to once a minute.
            out.append(.log(again ? .debug : .error, "the keyboard is grabbed, most likely by a detached copy of the locker: not starting another; checking again in \(until - now.boottime)"))
        case .unlocked(let lockedFor, let covered, let hadLetGo):
            unlocked(lockedFor: lockedFor, covered: covered, hadLetGo: hadLetGo, now, &out)
        }
    }

    /// The one good end of a lock: the idle period restarts and the on-unlock hook may run.
    mutating func unlocked(lockedFor: Millis, covered: Bool, hadLetGo: Bool, _ now: Instant, _ out: inout [Action]) {
        let note = covered ? "" : hadLetGo ? " (the locker had let go of the keyboard before it exited)" : " (the locker never grabbed the keyboard)"
        out.append(.log(.info, "unlocked after \(lockedFor) locked" + note))
        let stage = config.lockStage
        // Built before the idle period restarts: how long the user was away.
        var env = environment("unlock", stage, now)
        env.append(EnvironmentVariable("XIDLELOCK_LOCKED_MS", String(lockedFor.value)))
        out.append(.announce(.unlocked(lockedFor: lockedFor)))
        tellLockedHint(false, &out)
        activity(at: now, now, &out, unlocking: true)
        screenSettingsBack(&out)
        stages.rearm()
        stages.lockRequested = false
        guard let hook = config.onUnlock else { return }
        if let last = stages.lastOnUnlock, now.boottime - last < config.onUnlockInterval {
            out.append(.log(.debug, "on-unlock hook skipped: it ran \(now.boottime - last) ago (interval \(config.onUnlockInterval))"))
            return
        }
        stages.lastOnUnlock = now.boottime
        out.append(.run(.onUnlock, command: hook, environment: env))
    }

    // MARK: Helpers

    mutating func report(_ kind: Disagreement, _ message: String, _ out: inout [Action]) {
        // Once per kind: a video player resets the counter every few seconds.
        if reported.insert(kind).inserted { out.append(.log(.info, message)) }
    }

    func environment(_ event: String, _ stage: Stage?, _ now: Instant) -> [EnvironmentVariable] {
        var env = [
            EnvironmentVariable("XIDLELOCK_EVENT", event),
            EnvironmentVariable("XIDLELOCK_IDLE_MS", String(idle(at: now).value)),
            EnvironmentVariable("XIDLELOCK_SUSPEND_GAP_MS", String(suspended(at: now).value)),
        ]
        if let stage { env.append(EnvironmentVariable("XIDLELOCK_STAGE", stage.name)) }
        return env
    }

    func describeStages() -> String {
        config.stages.map { "\($0.name) at \($0.idleTime)" }.joined(separator: ", ")
    }
}
