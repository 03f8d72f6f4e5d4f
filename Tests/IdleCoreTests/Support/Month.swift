import IdleCore
import Testing

/// What the simulated user does next.
enum UserAction: Equatable {
    /// A keyboard or mouse batch: resets the server's counter; reported if the machine listens.
    case input
    /// `XResetScreenSaver` from a video player: resets the counter, no raw event.
    case screensaverReset
    /// The lid closes for this long: boottime runs on, monotonic (the X server's clock) stops.
    case suspend(Millis)
}

/// A month of office days, made up from a seed: work with pauses long enough to be
/// warned and locked, breaks, videos, lid closes of every length (clock jitter under
/// 100 ms included) and nights asleep or locked.
struct UserScript {
    private var random: SplitMix64
    private var queue: [(at: BoottimeInstant, action: UserAction)] = []
    private var head = 0
    /// Boottime up to which actions have been made up.
    private var cursor: BoottimeInstant
    private var dayStart: BoottimeInstant

    init(seed: UInt64, from start: BoottimeInstant) {
        random = SplitMix64(seed: seed)
        cursor = start
        dayStart = start
    }

    var peek: (at: BoottimeInstant, action: UserAction) {
        mutating get {
            while head == queue.count { makeUpMore() }
            return queue[head]
        }
    }

    mutating func pop() -> (at: BoottimeInstant, action: UserAction) {
        let next = peek
        head += 1
        if head > 4_096 {
            queue.removeFirst(head)
            head = 0
        }
        return next
    }

    private mutating func add(_ action: UserAction, after span: Millis) {
        cursor += span
        queue.append((cursor, action))
        if case .suspend(let asleep) = action { cursor += asleep }
    }

    /// One segment of the day, or the night.
    private mutating func makeUpMore() {
        if cursor - dayStart > .hours(12) + random.span(.zero ... .hours(2)) {
            // Evening: most nights the lid closes; some nights the machine stays on, locked.
            let nextMorning = dayStart + .hours(24) + random.span(.zero ... .minutes(45))
            if random.chance(60) {
                add(.suspend(nextMorning - cursor - .minutes(2)), after: random.span(.seconds(1) ... .minutes(1)))
            } else if random.chance(50) {
                // The machine wakes by itself at night (a timer, the network) and is left
                // alone: asleep again and again, an hour or so awake between.
                var left = 6
                while left > 0, cursor < nextMorning - .hours(2) {
                    add(.suspend(random.span(.minutes(20) ... .hours(2))), after: random.span(.minutes(40) ... .minutes(90)))
                    left -= 1
                }
            }
            cursor = max(cursor, nextMorning - random.span(.zero ... .minutes(20)))
            dayStart = nextMorning
            add(.input, after: random.span(.seconds(1) ... .minutes(20)))
            return
        }
        let roll = random.span(.ms(0) ... .ms(99)).value
        switch roll {
        case 0..<50:
            // Work: mostly typing, sometimes reading for longer than the warning or the lock.
            let end = cursor + random.span(.minutes(10) ... .hours(2))
            while cursor < end {
                let pause: Millis
                switch random.span(.ms(0) ... .ms(999)).value {
                case 0..<800: pause = random.span(.ms(150) ... .seconds(20))
                case 800..<950: pause = random.span(.seconds(20) ... .minutes(3))
                case 950..<990: pause = random.span(.minutes(3) ... .minutes(9) + .seconds(40))
                default: pause = random.span(.minutes(9) + .seconds(40) ... .minutes(14))
                }
                add(.input, after: pause)
            }
        case 50..<72:
            // A break: nothing at all.
            cursor += random.span(.minutes(1) ... .minutes(90))
        case 72..<82:
            // A video: the player resets the counter every half minute or so.
            let end = cursor + random.span(.minutes(5) ... .minutes(90))
            while cursor < end {
                add(.screensaverReset, after: random.span(.seconds(20) ... .seconds(40)))
                if random.chance(3) { add(.input, after: random.span(.seconds(1) ... .seconds(10))) }
            }
        case 82..<94:
            // The lid closes, from a few seconds to a few hours.
            add(.suspend(random.span(.seconds(2) ... .hours(3))), after: random.span(.seconds(1) ... .minutes(15)))
        default:
            // Clock jitter around and under the 100 ms threshold.
            add(.suspend(random.span(.ms(10) ... .ms(250))), after: random.span(.seconds(1) ... .minutes(5)))
        }
    }
}

/// What a month did, for the report and for assertions.
struct MonthReport: CustomStringConvertible {
    var machineEvents = 0
    var userInputs = 0
    var inputsReported = 0
    var screensaverResets = 0
    var suspends = 0
    var gaps = 0
    var locks = 0
    var unlocks = 0
    var lockerRestarts = 0
    var warnings = 0
    var resumeCommands = 0
    var onUnlockRuns = 0
    var customStageRuns = 0
    /// Stages run again after a resume without input (the machine woke by itself).
    var rerunsAfterResume = 0
    /// Events after which the machine will not wake by the time the lock is due
    /// (a lock that will come late).
    var lateLockDeadlines = 0
    var firstLate: [String] = []
    /// How far past the true lock time the machine's next deadline was, at worst.
    var longestLateness = Millis.zero
    /// Locks with a warning stage configured that came without a warning in their idle period,
    /// and not because a suspend made both due at once.
    var unwarnedLocks = 0
    /// Events after which the machine was unlocked with nothing to wake for: it would never lock again
    /// without input.
    var unlockedWithoutDeadline = 0
    var violations = 0
    var firstViolations: [String] = []

    var description: String {
        "\(machineEvents) events (\(inputsReported) input reports of \(userInputs) inputs, \(screensaverResets) resets), "
            + "\(suspends) suspends (\(gaps) gaps), \(locks) locks, \(unlocks) unlocks, \(lockerRestarts) restarts, "
            + "\(warnings) warnings, \(customStageRuns) custom stage runs (\(rerunsAfterResume) again after a resume), \(resumeCommands) resume commands, \(onUnlockRuns) on-unlock runs, "
            + "\(lateLockDeadlines) late lock deadlines (at worst \(longestLateness) late), \(unwarnedLocks) unwarned locks, "
            + "\(unlockedWithoutDeadline) unlocked without a deadline, "
            + "\(violations) violations"
    }
}

/// The agent's world for a month: the machine, both clocks, the X server's counter, the
/// children the machine started, and a simulated user. The clock moves only to the
/// machine's own next deadline or to the next thing the world does, exactly as the
/// real poll loop would. Every step is checked against what the user actually did.
struct MonthSimulation {
    let config: AgentConfig
    private(set) var machine: IdleMachine
    private(set) var report = MonthReport()
    private let violations = Violations()

    private var clock: Instant
    private var user: UserScript
    private var random: SplitMix64
    private let end: BoottimeInstant

    /// Monotonic time of the last input or reset the X server counted.
    private var serverActivity: MonotonicInstant
    /// Children's ends the world will report: (time, sequence, role, end, locker instance).
    private var pending: [(at: BoottimeInstant, order: Int, role: ProcessRole, end: ProcessEnd, instance: Int)] = []
    private var order = 0

    // What really happened, to judge the machine by.
    /// Boottime of the last activity the configuration says counts.
    private var trueActivity: BoottimeInstant
    /// How much later than `trueActivity` the machine may legitimately place activity.
    private let allowance: Millis
    private var lockerAlive = false
    private var probeAnswerDue = false
    /// The probe was carried out before the locker's start in the same batch.
    private var probeBeforeStart = false
    private var lockerInstance = 0
    private var unlockComing = false
    private var awaitingUnlock = false
    private var suspendedAtLastEvent: Millis
    private var firedThisPeriod = -1
    private var resumesOwed: Set<Int> = []
    /// The stages fired since the last activity or resume: each fires once a round.
    private var firedThisRound: Set<Int> = []
    /// A resume came since the last activity: stages that had fired run again, timed
    /// from it, so their order with the others no longer follows their idle times.
    private var resumedThisPeriod = false
    /// The resume after which a fired stage may run again, and when it is due then.
    private var refireDue: [Int: BoottimeInstant] = [:]
    private var listeningBound: BoottimeInstant?
    private var lastOnUnlock: BoottimeInstant?

    private let lockAfter: Millis
    private let lockIndex: Int
    private let notifyIndex: Int?

    static let tolerance = Millis(100)

    init(config: AgentConfig, seed: UInt64, days: Int64 = 30) {
        self.config = config
        let origin = Instant(monotonic: .seconds(40), boottime: .seconds(45))
        clock = origin
        machine = IdleMachine(config: config, now: origin)
        user = UserScript(seed: seed, from: origin.boottime)
        random = SplitMix64(seed: ~seed)
        end = origin.boottime + .hours(24 * days)
        serverActivity = origin.monotonic
        trueActivity = origin.boottime
        suspendedAtLastEvent = origin.suspended
        allowance = config.screensaverResetCountsAsActivity ? .zero : config.inputPause
        lockAfter = config.lockStage?.idleTime ?? .zero
        lockIndex = config.stages.firstIndex { $0.role == .lock } ?? -1
        notifyIndex = config.stages.firstIndex { $0.role == .notify }
    }

    mutating func run() -> MonthReport {
        deliver(.start(serverIdle: .zero))
        while true {
            let nextUser = user.peek.at
            let nextChild = pending.min { ($0.at, $0.order) < ($1.at, $1.order) }
            let nextWorld = min(nextUser, nextChild?.at ?? nextUser)
            if let deadline = machine.nextDeadline, deadline <= nextWorld {
                guard deadline <= end else { break }
                advance(to: max(deadline, clock.boottime))
                deliver(.wake(serverIdle: clock.monotonic - serverActivity))
                continue
            }
            guard nextWorld <= end else { break }
            advance(to: nextWorld)
            if let child = nextChild, child.at <= nextUser {
                pending.removeAll { $0.order == child.order }
                childEnded(child.role, child.end, instance: child.instance)
            } else {
                act(user.pop().action)
            }
        }
        let stopped = deliver(.stop)
        check(!stopped.contains(.terminate(.locker)), "stop terminated the locker")
        report.violations = violations.count
        report.firstViolations = violations.first
        return report
    }

    // MARK: The world

    private mutating func advance(to boottime: BoottimeInstant) {
        let span = boottime - clock.boottime
        check(span >= .zero, "time went back by \(Millis.zero - span)")
        clock.boottime += span
        clock.monotonic += span
    }

    private mutating func act(_ action: UserAction) {
        switch action {
        case .input:
            report.userInputs += 1
            serverActivity = clock.monotonic
            trueActivity = clock.boottime
            if lockerAlive && !unlockComing {
                // The user is back at a locked screen and types the password.
                unlockComing = true
                schedule(.locker, .exited(0), after: random.span(.seconds(3) ... .seconds(15)))
            }
            if machine.listensForInput {
                report.inputsReported += 1
                deliver(.input)
            }
        case .screensaverReset:
            report.screensaverResets += 1
            serverActivity = clock.monotonic
            if config.screensaverResetCountsAsActivity { trueActivity = clock.boottime }
        case .suspend(let span):
            report.suspends += 1
            clock.boottime += span
            // Children that would have ended while asleep are reaped on resume.
            for i in pending.indices where pending[i].at < clock.boottime { pending[i].at = clock.boottime }
            // The agent wakes at every resume (its resume watch) and reads the counter.
            deliver(.wake(serverIdle: clock.monotonic - serverActivity))
        }
    }

    private mutating func schedule(_ role: ProcessRole, _ end: ProcessEnd, after span: Millis) {
        order += 1
        pending.append((clock.boottime + span, order, role, end, role == .locker ? lockerInstance : 0))
    }

    private mutating func childEnded(_ role: ProcessRole, _ end: ProcessEnd, instance: Int) {
        if role == .locker {
            guard instance == lockerInstance, lockerAlive else { return }  // a locker already gone
            lockerAlive = false
            unlockComing = false
        }
        deliver(.processEnded(role, end))
    }

    /// A child the machine asked for: how and when it will end.
    private mutating func started(_ role: ProcessRole) {
        switch role {
        case .locker:
            lockerAlive = true
            lockerInstance += 1
            unlockComing = false
            pending.removeAll { $0.role == .locker }
            switch random.span(.ms(0) ... .ms(999)).value {
            case 0..<30: schedule(.locker, .exited(1), after: random.span(.ms(20) ... .ms(1_500)))
            case 30..<40: schedule(.locker, .failedToStart("no such file"), after: .zero)
            case 40..<50: schedule(.locker, .killed(signal: 9), after: random.span(.minutes(1) ... .hours(3)))
            case 50..<55: schedule(.locker, .exited(1), after: random.span(.seconds(3) ... .hours(1)))
            default: break  // runs until the user unlocks
            }
        case .stage(let i) where i == notifyIndex:
            schedule(role, .exited(0), after: random.span(.seconds(3) ... .seconds(10)))
        case .stage, .resume:
            schedule(role, .exited(0), after: random.span(.ms(50) ... .seconds(1)))
        case .onUnlock, .beforeSleep, .afterResume:
            schedule(role, random.chance(5) ? .exited(1) : .exited(0), after: random.span(.ms(100) ... .seconds(20)))
        }
    }

    private mutating func terminated(_ role: ProcessRole) {
        guard let i = pending.firstIndex(where: { $0.role == role }) else { return }
        pending[i].at = clock.boottime + .ms(5)
        pending[i].end = .killed(signal: 15)
    }

    // MARK: The machine, checked

    @discardableResult
    private mutating func deliver(_ event: Event) -> [Action] {
        let before = machine
        let now = clock.boottime
        let actions = machine.handle(event, at: clock)
        report.machineEvents += 1
        if event == .stop { return actions }

        // Suspend gaps: every gap of 100 ms or more is noticed at the first event after it.
        let slept = clock.suspended - suspendedAtLastEvent
        suspendedAtLastEvent = clock.suspended
        let gapNoticed = slept >= IdleMachine.gapThresholdForTests
        if gapNoticed {
            report.gaps += 1
            check(machine.lastSuspendGap?.noticedAt == now && machine.lastSuspendGap?.length == slept,
                  "gap of \(slept) recorded as \(String(describing: machine.lastSuspendGap))")
            if config.suspendCountsAsIdle {
                // The stages that had fired run again from the resume; the rest count the sleep.
                for i in firedThisRound { refireDue[i] = now + config.stages[i].idleTime }
                firedThisRound = []
                resumedThisPeriod = true
            }
            if !config.suspendCountsAsIdle { trueActivity = max(trueActivity, now) }
        } else {
            check(machine.lastSuspendGap == before.lastSuspendGap, "a gap of \(slept) was recorded")
        }

        if machine.lastActivity != before.lastActivity {
            check(machine.lastActivity > before.lastActivity, "activity went back in time")
            firedThisPeriod = -1
            firedThisRound = []
            resumedThisPeriod = false
            refireDue = [:]
        }

        for action in actions {
            switch action {
            case .run(let role, _, let environment):
                if role == .locker && probeAnswerDue { probeBeforeStart = true }
                check(environment["XIDLELOCK_IDLE_MS"] != nil && environment["XIDLELOCK_EVENT"] != nil,
                      "\(role) started without its environment")
                checkRun(role, environment, before: before, gapNoticed: gapNoticed, now: now)
                started(role)
            case .terminate(let role):
                check(role != .locker, "the locker was terminated")
                terminated(role)
            case .killLocker:
                check(false, "the locker was killed (only under a policy, for one that does not cover)")
            case .log, .logRefusal, .announce, .releaseSleepDelay, .setLockedHint, .setIdleHint, .checkPointerCorner, .answer, .turnScreenOff, .restoreScreenSettings:
                break
            case .probeGrabs:
                // The edge answers at once: a running locker grabs the keyboard within
                // the first probe, as i3lock does.
                probeAnswerDue = true
            }
        }
        if probeAnswerDue {
            probeAnswerDue = false
            // Looked at before the locker's start, the keyboard is free (nothing else grabs here).
            let beforeStart = probeBeforeStart
            probeBeforeStart = false
            deliver(.lockerFact(.grabs(GrabReading(grabbed: !beforeStart && lockerAlive, lockerRuns: !beforeStart))))
        }

        // One lock, then one unlock, then the next lock.
        if before.locker != .unlocked && machine.locker == .unlocked {
            report.unlocks += 1
            check(awaitingUnlock, "an unlock without a lock")
            check(!lockerAlive, "unlocked while the locker still runs")
            awaitingUnlock = false
            trueActivity = max(trueActivity, now)  // an unlock restarts the idle period
            // --on-unlock follows a locker's end, at most once per interval.
            var lockerEnded = false
            if case .processEnded(.locker, _) = event { lockerEnded = true }
            let due = lockerEnded && config.onUnlock != nil
                && (lastOnUnlock.map { now - $0 >= config.onUnlockInterval } ?? true)
            let ran = actions.runs(.onUnlock).count
            check(ran == (due ? 1 : 0), "on-unlock ran \(ran) times at \(now), last at \(String(describing: lastOnUnlock))")
            if ran > 0 {
                lastOnUnlock = now
                report.onUnlockRuns += 1
            }
        }
        if case .running = machine.locker { check(lockerAlive, "the machine thinks a dead locker runs") }

        // Deadlines are never in the past once an event is handled.
        if let deadline = machine.nextDeadline {
            check(deadline > now, "deadline \(deadline) not after now \(now) after \(event)")
        }

        // Listening pauses only until the deadline it was paused for.
        if before.listensForInput && !machine.listensForInput {
            listeningBound = machine.nextDeadline
            check(listeningBound != nil, "listening paused with nothing to wake for")
            if !config.screensaverResetCountsAsActivity, let bound = listeningBound {
                check(bound - now <= config.inputPause, "listening paused for \(bound - now)")
            }
        }
        if case .wake = event, let bound = listeningBound, now >= bound {
            check(machine.listensForInput, "listening still paused at its deadline")
        }
        if machine.listensForInput { listeningBound = nil }

        // Unlocked, the machine must wake by the time the user has really been idle for the lock time.
        if machine.locker == .unlocked {
            let due = trueActivity + lockAfter + allowance + MonthSimulation.tolerance
            if machine.nextDeadline == nil {
                report.unlockedWithoutDeadline += 1
            } else if let deadline = machine.nextDeadline, deadline > max(due, now) {
                report.lateLockDeadlines += 1
                report.longestLateness = max(report.longestLateness, deadline - max(due, now))
                if report.firstLate.count < 3 {
                    report.firstLate.append("after \(event) at \(now): deadline \(String(describing: machine.nextDeadline)), due \(due), machine activity \(before.lastActivity) → \(machine.lastActivity), true \(trueActivity), last gap \(String(describing: machine.lastSuspendGap))")
                }
            }
        }
        return actions
    }

    private mutating func checkRun(_ role: ProcessRole, _ environment: [EnvironmentVariable],
                                   before: IdleMachine, gapNoticed: Bool, now: BoottimeInstant) {
        switch role {
        case .locker:
            check(!lockerAlive, "a second locker while one runs")
            guard before.locker == .unlocked else {
                report.lockerRestarts += 1
                return
            }
            report.locks += 1
            check(!awaitingUnlock, "a lock before the last one was unlocked")
            awaitingUnlock = true
            let idle = now - trueActivity
            check(idle + MonthSimulation.tolerance >= lockAfter || gapNoticed,
                  "locked after only \(idle) idle at \(now)")
            check(environment["XIDLELOCK_IDLE_MS"] == String(machine.idle(at: clock).value), "lock idle time")
            let gap = Int64(environment["XIDLELOCK_SUSPEND_GAP_MS"] ?? "") ?? -1
            check(gap >= 0 && gap <= machine.idle(at: clock).value,
                  "lock suspend gap \(gap) idle \(machine.idle(at: clock)) gapNoticed \(gapNoticed) last gap \(String(describing: machine.lastSuspendGap)) now \(now) lastActivity before \(before.lastActivity) after \(machine.lastActivity) true \(trueActivity) locker before \(before.locker)")
            if let notifyIndex, !firedThisRound.contains(notifyIndex), !gapNoticed, !resumedThisPeriod { report.unwarnedLocks += 1 }
            fired(lockIndex)
        case .stage(let i):
            if i == notifyIndex {
                report.warnings += 1
                check(before.locker == .unlocked && machine.locker == .unlocked, "a warning while locked or locking")
            } else {
                report.customStageRuns += 1
            }
            let again = refireDue[i] != nil
            fired(i)
            if config.stages[i].resumeCommand != nil {
                // Run again after a resume, it still owes one resume command, run on return.
                check(resumesOwed.insert(i).inserted || again, "stage \(i) fired again before its resume command ran")
            }
        case .resume(let i):
            report.resumeCommands += 1
            check(resumesOwed.remove(i) != nil, "resume command of stage \(i) that did not fire")
        case .onUnlock:
            check(environment["XIDLELOCK_LOCKED_MS"] != nil, "on-unlock without the time locked")
        case .beforeSleep, .afterResume:
            check(false, "\(role) without logind's sleep signals")
        }
    }

    /// Stages fire in idle-time order, each once per idle period; after a resume
    /// without input, those that had fired run once more, not before their time from it.
    private mutating func fired(_ index: Int) {
        check(firedThisRound.insert(index).inserted, "stage \(index) fired twice in one round")
        if let due = refireDue.removeValue(forKey: index) {
            check(clock.boottime >= due, "stage \(index) ran again \(due - clock.boottime) before its time from the resume")
            report.rerunsAfterResume += 1
        } else if !resumedThisPeriod {
            check(index > firedThisPeriod, "stage \(index) fired after stage \(firedThisPeriod) in one idle period")
        }
        firedThisPeriod = max(firedThisPeriod, index)
    }

    /// Records a broken promise; the messages are built only for the first few.
    private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
        guard !condition else { return }
        violations.count += 1
        if violations.first.count < 10 { violations.first.append(message()) }
    }
}

/// Shared so that checks can run while the simulation is being changed.
final class Violations {
    var count = 0
    var first: [String] = []
}

extension IdleMachine {
    /// The documented threshold (100 ms) under which a gap is clock jitter.
    static let gapThresholdForTests = Millis(100)
}
