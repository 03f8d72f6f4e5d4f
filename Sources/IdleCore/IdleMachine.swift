/// The idle state machine: events in, actions out, time passed in.
///
/// Idle time is measured on CLOCK_BOOTTIME from `lastActivity`, so time spent
/// suspended counts as idle unless the configuration says otherwise. The X
/// server's idle counter runs on CLOCK_MONOTONIC, which stops during suspend, so
/// every activity is kept in both clocks and the cross-check is made on the
/// monotonic one. Nothing
/// here reads a clock, touches X or starts a process; the edges do that.
public struct IdleMachine: Sendable {
    public let config: AgentConfig

    /// The last activity (input, a server-counter reset, an unlock), in both clocks.
    public private(set) var lastActivityAt: Instant
    /// Boottime of the last activity.
    public var lastActivity: BoottimeInstant { lastActivityAt.boottime }
    /// The last raw input event seen.
    public private(set) var lastInput: Instant?
    /// Which stages have fired in this idle period, by index of `config.stages`.
    public internal(set) var fired: [Bool]
    /// Where a stage's idle time runs from when not from the last activity: a stage
    /// that had fired is run again from the resume of a sleep without input.
    var stageFrom: [BoottimeInstant?]
    /// The power source (UPower's OnBattery): it picks the stages' times.
    public internal(set) var onBattery = false
    /// `--screen-off-after-lock`: the monitor, on or off, and since when.
    var monitor = MonitorPower()
    /// The latest activity the X server's counter showed, counted as activity or not.
    var lastServerActivity = MonotonicInstant(.zero)
    public var screenIsOff: Bool { monitor.isOff }
    /// The locker's supervision: its state and the rules for what its end means.
    public internal(set) var supervisor: LockerSupervisor
    public var locker: LockerState { supervisor.state }
    public private(set) var lastSuspendGap: SuspendGap?
    /// Whether the agent listens to raw input now, and since when.
    var listening: InputListening
    /// Whether the agent should listen to raw input now (`InputListening`).
    public var listensForInput: Bool { listening.on }
    var resumesDue: [Int] = []
    var notifiersShown: [Int] = []
    var lastOnUnlock: BoottimeInstant?
    var suspendOffset: Millis
    /// Gaps noticed since the last activity: the monotonic time each was noticed and
    /// the suspend offset before it. Server activity is placed with the offset in
    /// force at its time, before a gap when in doubt (which locks rather than not).
    var gapsSinceActivity: [(noticedAt: MonotonicInstant, offsetBefore: Millis)] = []
    var reported: Set<Disagreement> = []
    public internal(set) var inhibitors: [Inhibitor] = []
    /// The gate's own records: ids, rates, refusals, the max-inhibit budget, the start's wait.
    var holds: HoldBook
    /// When each inhibitor began (boottime), by id: status shows how long it has held.
    var inhibitorSince: [Int: BoottimeInstant] = [:]
    /// Disabled until this boottime (`.some(nil)`: until enabled); nil when enabled.
    public private(set) var disabledUntil: BoottimeInstant??
    var lockRequested = false
    /// Logind's sleep delay: until when the system waits, and for what.
    var sleep = SleepDelay()
    /// The system waits to sleep until this time at the latest (logind's delay).
    public var sleepDelayUntil: BoottimeInstant? { sleep.until }
    /// Another session is in front (another VT): no input reaches this one, so its
    /// idle time goes on and the stages fire on time.
    public internal(set) var sessionInactive = false
    /// When this session came back to the front: the X server's counter restarts then
    /// and its devices come back, which is no activity.
    var sessionBackAt: MonotonicInstant?
    /// What logind was last told.
    var hints = LogindHints()
    public var lockedHint: Bool { hints.locked }
    public var idleHint: Bool { hints.idle }
    /// The hot corners (`--corners`): the pointer's rest, as last checked.
    var corners: CornerWatch
    /// pcscd's readers and their cards (`--lock-on-card-removal`).
    var cards = CardBook()

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
        self.holds = HoldBook(cookies: cookies)
        self.supervisor = LockerSupervisor(grabDeadline: config.lockerGrabDeadline, shortestHold: config.lockerShortestHold)
        self.corners = CornerWatch(settings: config.corners, firstStage: config.stages.first?.idleTime)
        self.lastActivityAt = now
        self.listening = InputListening(since: now)
        self.suspendOffset = now.suspended
        self.fired = Array(repeating: false, count: config.stages.count)
        self.stageFrom = Array(repeating: nil, count: config.stages.count)
    }

    public func idle(at now: Instant) -> Millis { now.boottime - lastActivity }

    /// Time suspended since the last activity (given to hooks).
    public func suspended(at now: Instant) -> Millis { now.suspended - lastActivityAt.suspended }

    /// The boottime of the next thing the machine must wake up for, if any.
    /// Between deadlines the agent sleeps: nothing here needs polling. Every timed
    /// check says its own (`TimedCheck`); listening paused after input has no check:
    /// it resumes at the wake-up's reading of the server's counter.
    public var nextDeadline: BoottimeInstant? {
        var deadline: BoottimeInstant?
        func consider(_ t: BoottimeInstant?) { if let t { deadline = min(deadline ?? t, t) } }
        for check in TimedCheck.allCases { consider(due(check)) }
        consider(listening.nextDeadline)
        return deadline
    }

    /// When the next stage fires; nil while the stages left are held off or all fired.
    var nextStageDue: BoottimeInstant? { nextStageIndex.map(dueTime) }

    /// The stage that fires next: the first due of those not fired and not held.
    var nextStageIndex: Int? {
        config.stages.indices.filter { !fired[$0] && heldBy($0).isEmpty }.min { (dueTime($0), $0) < (dueTime($1), $1) }
    }

    /// When stage `i` is due in this idle period, on the power source in force.
    func dueTime(_ i: Int) -> BoottimeInstant {
        (stageFrom[i] ?? lastActivity) + config.stages[i].idleTime(onBattery: onBattery)
    }

    /// What holds stage `i` off now, in the user's words (empty: nothing): a disable,
    /// the start's wait for the sources it obeys, the sources of its holds.
    func heldBy(_ i: Int, awaiting: Bool = true) -> [String] {
        let ignored = config.stages[i].ignoresHolds
        var by: [String] = isDisabled ? ["disabled"] : []
        if awaiting, awaitingSources, !holds.awaiting.isSubset(of: ignored) { by.append("start") }
        by += InhibitorSource.allCases.filter { source in
            !ignored.contains(source) && inhibitors.contains { $0.source == source }
        }.map(\.rawValue)
        return by
    }

    /// A locker process runs (started or adopted), whether or not it covers the screen yet.
    public var isLocked: Bool { supervisor.isRunning }
    /// A locker runs or is being started again after a failure: no stage may start another.
    public var lockerActive: Bool { locker != .unlocked }
    public var isDisabled: Bool { disabledUntil != nil }
    /// The next stage to fire and its name, if any is due to.
    public var nextStageName: String? { nextStageIndex.map { config.stages[$0].name } }
    public var hasNotified: Bool { !notifiersShown.isEmpty }

    public mutating func handle(_ event: Event, at now: Instant) -> [Action] {
        var out: [Action] = []
        // A suspend since the last event first: the resume re-arms the stages, and the
        // idle time everything after reads counts from there.
        noteSuspendGap(now, &out)
        run(TimedCheck.beforeEvent, now, &out)
        switch event {
        case .start(let serverIdle, let awaiting):
            lastActivityAt = Instant(monotonic: now.monotonic - serverIdle, boottime: now.boottime - serverIdle)
            // Holds may have kept the screen unlocked all that time (an earlier agent's):
            // the budget counts from the last input, so a restart is never a fresh one.
            if config.maxInhibit != nil { holds.heldSince = lastActivityAt.boottime }
            awaitSources(awaiting, now)
            out.append(.log(.info, "started; idle for \(serverIdle) already; " + describeStages()))
            // Before the wait for what the sources hold: no hold defers this lock, and
            // like any lock only the locker's unlock ends it.
            if config.lockAtStart { lockRequest(from: "the start (--lock-at-start)", now, &out) }
        case .input:
            lastInput = now
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
            for i in notifiersShown { out.append(.terminate(.stage(i))) }
            notifiersShown = []
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

    // MARK: Suspend gaps

    mutating func noteSuspendGap(_ now: Instant, _ out: inout [Action]) {
        let offsetBefore = suspendOffset
        let grown = now.suspended - offsetBefore
        suspendOffset = now.suspended
        guard grown >= IdleMachine.gapThreshold else { return }
        lastSuspendGap = SuspendGap(noticedAt: now.boottime, length: grown)
        screenWoken(now)
        out.append(.announce(.suspendGap(length: grown)))
        let idleBefore = (now.boottime - grown) - lastActivity
        if config.suspendCountsAsIdle {
            gapsSinceActivity.append((noticedAt: now.monotonic, offsetBefore: offsetBefore))
            // A machine that woke by itself and is left alone dims, locks and sleeps
            // again: the stages that had fired run again, timed from the resume. Those
            // that had not count the sleep as idle time (a long sleep locks at once).
            let rearmed = config.stages.indices.filter { fired[$0] }
            for i in rearmed {
                fired[i] = false
                stageFrom[i] = now.boottime
            }
            let again = rearmed.isEmpty ? "" : "; from the resume, again: " + rearmed.map { config.stages[$0].name }.joined(separator: ", ")
            out.append(.log(.info, "suspend gap: slept \(grown) after \(idleBefore) idle; counted as idle time\(again)"))
        } else {
            out.append(.log(.info, "suspend gap: slept \(grown) after \(idleBefore) idle; the idle time restarts (--suspend-resets-idle)"))
            restartIdlePeriod(now, &out)
        }
    }

    /// `--suspend-resets-idle`: the idle period starts again at the resume (the
    /// agent wakes at every resume), stages and all; the user is not back, so
    /// resume commands wait for real activity.
    mutating func restartIdlePeriod(_ now: Instant, _ out: inout [Action]) {
        lastActivityAt = now
        gapsSinceActivity = []
        for i in notifiersShown { out.append(.terminate(.stage(i))) }
        notifiersShown = []
        rearmStages()
    }

    /// A new idle period: every stage may fire once more, timed from the last activity.
    mutating func rearmStages() {
        fired = Array(repeating: false, count: config.stages.count)
        stageFrom = Array(repeating: nil, count: config.stages.count)
    }

    // MARK: Activity

    /// Compares the server's idle counter with what raw input told us. The counter
    /// runs on the monotonic clock, so the comparison is made there.
    mutating func crossCheck(serverIdle: Millis, _ now: Instant, _ out: inout [Action]) {
        let tolerance = IdleMachine.crossCheckTolerance
        let serverActivity = now.monotonic - serverIdle
        // Counted or not, the server turned the monitor on for it.
        if serverActivity > max(lastServerActivity, lastActivityAt.monotonic) + IdleMachine.counterJitter { screenWoken(now) }
        lastServerActivity = max(lastServerActivity, serverActivity)
        if serverActivity > lastActivityAt.monotonic + IdleMachine.counterJitter {
            // Input explains it while listening was paused (not heard on purpose), or when
            // it follows heard input closely (a key's release after its press). Either way
            // the server's time is the exact one: the lock comes at its idle time, not before.
            let explainedByInput = !listensForInput
                || serverActivity <= max(listening.since.monotonic, lastActivityAt.monotonic) + tolerance
            if !explainedByInput {
                report(.resetWithoutInput, config.screensaverResetCountsAsActivity
                    ? "the X server's idle counter was reset without input (XResetScreenSaver from a video player, `xset s reset`, or a pointer warp); counting that as activity, as --ignore-screensaver-reset would not"
                    : "the X server's idle counter was reset without input (XResetScreenSaver from a video player, `xset s reset`, or a pointer warp\(config.xtestInputCounts ? "" : ", or XTEST input such as xdotool's")); ignoring it (\(config.onlyInputFlag))",
                    &out)
            }
            // The switch back to this session restarts the server's counter (measured on
            // Xorg with logind): that is the switch, not someone at the keyboard. Input
            // after it comes as raw input (listening is on again since the switch).
            let atSwitchBack = sessionBackAt.map { back in
                serverActivity <= back + IdleMachine.switchBackSettle && (lastInput.map { $0.monotonic < back } ?? true)
            } ?? false
            if atSwitchBack {
                report(.switchBackReset, "the X server's idle counter restarted as this session came back to the front: not counted as activity", &out)
            } else if explainedByInput || config.screensaverResetCountsAsActivity {
                let offset = gapsSinceActivity.first { serverActivity < $0.noticedAt }?.offsetBefore ?? now.suspended
                activity(at: Instant(monotonic: serverActivity, boottime: BoottimeInstant(serverActivity.sinceZero + offset)), now, &out,
                         byInput: explainedByInput)
            }
        } else if let input = lastInput, input.monotonic > serverActivity + .seconds(1) {
            report(.inputNotCounted, "raw input arrived that the X server's idle counter did not count; trusting the raw input", &out)
        }
    }

    mutating func report(_ kind: Disagreement, _ message: String, _ out: inout [Action]) {
        // Once per kind: a video player resets the counter every few seconds.
        if reported.insert(kind).inserted { out.append(.log(.info, message)) }
    }

    /// Stops listening until the next deadline; with nothing due, until the next
    /// reading of the server's counter (every hold ends with one).
    mutating func pauseListening(_ now: Instant) {
        var resume = nextDeadline
        if !config.screensaverResetCountsAsActivity {
            // Only raw input counts: pause briefly, so that activity in the pause can be
            // put down to input without mistaking a later screensaver reset for it.
            resume = min(resume ?? BoottimeInstant(.max), now.boottime + config.inputPause)
        }
        if let resume, resume <= now.boottime { return }
        listening.pause(until: resume)
    }

    // MARK: Holds (inhibitors, disable)

    mutating func endExpiredHolds(_ now: Instant, _ out: inout [Action]) {
        endHoldsIfBudgetSpent(now, &out)
        endInhibitors(where: { $0.until.map { now.boottime >= $0 } ?? false }, now, &out)
        if let until = disabledUntil ?? nil, now.boottime >= until { enable(by: "the end of its time", now, &out) }
    }

    /// `xidlelock disable`: a hold like any other, through the same rules.
    mutating func disable(for requested: Millis?, by: String, _ now: Instant, _ out: inout [Action]) -> Answer {
        if let refusal = config.secure ? "the agent runs with --secure" : budgetRefusal {
            report(.disableRefused, "refused to disable for \(by.isEmpty ? "a client" : by): \(refusal) (said once)", &out)
            return .refused(refusal)
        }
        let until = requested.map { now.boottime + $0 }
        beginHolding(now)
        disabledUntil = .some(until)
        let bound = holdBudgetEnds.map { "; \($0 - now.boottime) at the most without input (the policy's max-inhibit)" } ?? ""
        out.append(.log(.info, "disabled" + (until.map { " for \($0 - now.boottime)" } ?? "") + (by.isEmpty ? "" : " by \(by)") + bound))
        out.append(.announce(.disabled(remaining: until.map { $0 - now.boottime }, by: by)))
        return .done
    }

    /// A client asks that now count as activity. Under --secure only the user's input
    /// counts; with only real input counting (--ignore-screensaver-reset), D-Bus's
    /// SimulateUserActivity is a screensaver reset like any other and does not either.
    mutating func reset(from source: InhibitorSource, by: String, _ now: Instant, _ out: inout [Action]) -> Answer {
        let refusal: String? = if config.secure {
            "the agent runs with --secure: only input counts as activity"
        } else if source != .socket && !config.screensaverResetCountsAsActivity {
            "only input counts as activity (\(config.onlyInputFlag))"
        } else {
            nil
        }
        if let refusal {
            report(source == .socket ? .resetRefusedSocket : .resetRefusedBus, "refused a reset from \(by.isEmpty ? source.rawValue : by): \(refusal) (said once)", &out)
            return .refused(refusal)
        }
        out.append(.log(.debug, "reset requested\(by.isEmpty ? "" : " by \(by)"): counting as activity"))
        activity(at: now, now, &out)
        return .done
    }

    /// Ends every inhibitor that matches, in the order they began.
    mutating func endInhibitors(where ends: (Inhibitor) -> Bool, _ now: Instant, _ out: inout [Action]) {
        while let k = inhibitors.firstIndex(where: ends) { endInhibitor(at: k, now, &out) }
    }

    mutating func endInhibitor(at k: Int, _ now: Instant, _ out: inout [Action]) {
        let inhibitor = inhibitors.remove(at: k)
        inhibitorSince[inhibitor.id] = nil
        out.append(.log(.info, "inhibitor of \(inhibitor.who) ended" + rearmNote(now)))
        out.append(.announce(.uninhibited(inhibitor)))
    }

    mutating func enable(by: String, _ now: Instant, _ out: inout [Action]) {
        disabledUntil = nil
        out.append(.log(.info, "enabled" + (by.isEmpty ? "" : " by \(by)") + rearmNote(now)))
        out.append(.announce(.enabled(by: by)))
    }

    /// When a hold ends, the stages are re-armed from the current idle time: those
    /// already due fire now (the user has been away all along), the rest on time.
    func rearmNote(_ now: Instant) -> String {
        guard let next = nextStageIndex else { return "" }
        let name = config.stages[next].name
        let due = dueTime(next) - now.boottime
        return due <= .zero ? "; stage '\(name)' is due now (idle \(idle(at: now)))" : "; stage '\(name)' in \(due)"
    }

    /// Activity at `t`: a new idle period begins. Activity older than the last is ignored.
    /// `byInput`: the user's own input (or an unlock), which alone renews the policy's
    /// max-inhibit.
    mutating func activity(at t: Instant, _ now: Instant, _ out: inout [Action], unlocking: Bool = false, byInput: Bool = false) {
        guard t.boottime >= lastActivity else { return }
        if byInput || unlocking { userIsBack(now) }
        let idle = t.boottime - lastActivity
        lastActivityAt = t
        screenWoken(now)
        gapsSinceActivity.removeAll { $0.noticedAt <= t.monotonic }
        tellIdleHint(false, &out)
        if config.corners != nil { pointerMoved(now, &out) }
        // A failing locker is not stopped by input: the screen may be open, and
        // input proves nothing about who is there. Only an unlock ends a lock.
        let anyFired = fired.contains(true)
        rearmStages()
        guard anyFired || !resumesDue.isEmpty else { return }
        if !lockerActive { out.append(.log(.info, "activity after \(idle) idle")) }
        // An unlock is announced as such; input while locked (resume commands) is activity.
        if !unlocking { out.append(.announce(.activityResumed(idleBefore: idle))) }
        for i in notifiersShown { out.append(.terminate(.stage(i))) }
        notifiersShown = []
        runResumeCommands(now, &out)
    }

    mutating func runResumeCommands(_ now: Instant, _ out: inout [Action]) {
        for i in resumesDue {
            let stage = config.stages[i]
            if let command = stage.resumeCommand {
                out.append(.run(.resume(i), command: command, environment: environment("resume", stage, now)))
            }
        }
        resumesDue = []
    }

    // MARK: Stages

    mutating func fireDueStages(_ now: Instant, _ out: inout [Action]) {
        let idle = idle(at: now)
        let stages = config.stages
        // Each stage on its own: one that ignores a hold fires while it holds the others.
        let due = stages.indices.filter { !fired[$0] && now.boottime >= dueTime($0) && heldBy($0).isEmpty }
            .sorted { (dueTime($0), $0) < (dueTime($1), $1) }
        for i in due {
            fired[i] = true
            let stage = stages[i]
            switch stage.role {
            case .lock:
                tellIdleHint(true, &out)
                guard !lockerActive else { continue }
                startLocker(now, &out)
            case .notify:
                // A warning is pointless once locked, or when the lock is due at the same time
                // (after a suspend).
                let lockDue = due.contains { stages[$0].role == .lock && !fired[$0] }
                guard !lockerActive, !lockDue else {
                    out.append(.log(.debug, "stage '\(stage.name)' skipped: locked or locking"))
                    continue
                }
                out.append(.log(.info, "stage '\(stage.name)': idle \(idle)"))
                out.append(.run(.stage(i), command: stage.command, environment: environment(stage.name, stage, now)))
                out.append(.announce(.stageFired(name: stage.name, idle: idle)))
                notifiersShown.append(i)
            case .custom:
                out.append(.log(.info, "stage '\(stage.name)': idle \(idle)"))
                out.append(.run(.stage(i), command: stage.command, environment: environment(stage.name, stage, now)))
                out.append(.announce(.stageFired(name: stage.name, idle: idle)))
            }
            if stage.resumeCommand != nil && !resumesDue.contains(i) { resumesDue.append(i) }
        }
    }

    // MARK: The locker

    mutating func startLocker(_ now: Instant, _ out: inout [Action]) {
        guard let stage = config.lockStage else { return }
        let attempt = supervisor.starting(at: now)
        let retry = attempt > 1 ? " (attempt \(attempt))" : ""
        let why = lockRequested ? "on request" : "after \(idle(at: now)) idle"
        out.append(.log(.info, "locking \(why)\(retry)"))
        // The keyboard is looked at before the locker starts (the edge carries actions
        // out in order): a grab then is another client's, and never the locker's proof.
        out.append(.probeGrabs)
        out.append(.run(.locker, command: stage.command, environment: environment("lock", stage, now)))
        out.append(.announce(.locking(idle: idle(at: now), requested: lockRequested, attempt: attempt)))
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
            out.append(.announce(.locked(idle: idle(at: now), requested: lockRequested)))
            tellLockedHint(true, &out)
            screenWoken(now)
            letSleepIfReady(now, &out)
        case .notCovering:
            // It cannot be replaced while it runs (never a second locker); say so loudly.
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
            let delay = retryAt - now.boottime
            // The failure named with its likely cause: the locker could not grab what another client holds.
            let held = supervisor.heldByOther
            let reason = failure.description + (held.isEmpty ? "" : " (another client holds \(GrabbedDevice.phrase(held.sorted())))")
            out.append(.log(.error, "the locker \(reason): the screen may NOT be locked; starting it again \(delay <= .zero ? "now" : "in \(delay)")"))
            out.append(.announce(.lockerFailed(kind: failure.kind, reason: reason, retryIn: delay)))
            tellLockedHint(false, &out)
            // A retry due now starts from the lockerRetry check, after the event (TimedCheck).
        case .retryNow:
            startLocker(now, &out)
        case .retryHeldOff(let until, let again):
            // Said once loudly; then quietly, with the checks backing off to once a minute.
            out.append(.log(again ? .debug : .error, "the keyboard is grabbed, most likely by a detached copy of the locker: not starting another; checking again in \(until - now.boottime)"))
        case .unlocked(let lockedFor, let covered):
            unlocked(lockedFor: lockedFor, covered: covered, now, &out)
        }
    }

    /// The one good end of a lock: the idle period restarts and the on-unlock hook may run.
    mutating func unlocked(lockedFor: Millis, covered: Bool, _ now: Instant, _ out: inout [Action]) {
        out.append(.log(.info, "unlocked after \(lockedFor) locked" + (covered ? "" : " (the locker never grabbed the keyboard)")))
        let stage = config.lockStage
        // Built before the idle period restarts: how long the user was away.
        var env = environment("unlock", stage, now)
        env.append(EnvironmentVariable("XIDLELOCK_LOCKED_MS", String(lockedFor.value)))
        out.append(.announce(.unlocked(lockedFor: lockedFor)))
        tellLockedHint(false, &out)
        activity(at: now, now, &out, unlocking: true)
        screenSettingsBack(&out)
        rearmStages()
        lockRequested = false
        guard let hook = config.onUnlock else { return }
        if let last = lastOnUnlock, now.boottime - last < config.onUnlockInterval {
            out.append(.log(.debug, "on-unlock hook skipped: it ran \(now.boottime - last) ago (interval \(config.onUnlockInterval))"))
            return
        }
        lastOnUnlock = now.boottime
        out.append(.run(.onUnlock, command: hook, environment: env))
    }

    // MARK: Helpers

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
