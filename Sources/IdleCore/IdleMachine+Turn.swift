// One turn of the machine, read in one place: what it looks at before an event, what
// after, and when it must wake next (sd-event's prepare/dispatch shape: every check
// says when it is due, the loop sleeps until the earliest, then each looks at its time).

/// The machine's timed checks, in the order a turn runs them, each with why it comes
/// where it does. Each says when it is due (`IdleMachine.due`) and what it does then
/// (`IdleMachine.run`), both below; a case has to be in both, so a deadline is never
/// kept without the reaction that serves it, nor a reaction without its deadline. A
/// check does nothing before its time, so running one early is harmless.
enum TimedCheck: CaseIterable, Sendable {
    // Before the event:

    /// A suspend since the last event, first. It has no deadline: it is seen in the
    /// clocks, at whatever event comes first after it. The resume re-arms the stages,
    /// and the idle time everything after reads counts from there.
    case suspendGap
    /// Holds whose time ran out (an inhibitor's span, a disable's, the policy's
    /// max-inhibit) end before the event is looked at: an event at that instant meets
    /// them ended (a disable asked as the budget runs out is refused).
    case expiredHolds

    // After the event (what the event made due, and what its time made due):

    /// The start's wait for the sources ends first, so that a stage held only by the
    /// wait fires below in the same turn.
    case startupWait
    /// The pointer's corner is asked for (the answer comes as an event of its own).
    case cornerCheck
    /// A `+` corner's lock: before the stages, so that a lock due from both is the
    /// corner's request (said as such), and the lock stage finds the locker running.
    case cornerLock
    /// Logind's sleep delay ran out: the sleep goes ahead. Before the locker's probe, so
    /// that the probe no longer hurries (every 10 ms) for a sleep no longer waited for.
    case sleepDelay
    /// The locker's grab probe, on the supervisor's schedule.
    case lockerProbe
    /// A failed locker's next start (or, when the last one returned at once, a probe
    /// first): before the stages, so that a lock stage due now finds it started and
    /// starts no second locker, and a warning due now is skipped.
    case lockerRetry
    /// The stages due now fire, the earliest first.
    case stages
    /// The monitor goes off once the lock has covered the screen long enough: last,
    /// after everything above that may start or end a lock in this turn.
    case screenOff

    static let beforeEvent: [TimedCheck] = [.suspendGap, .expiredHolds]
    static let afterEvent: [TimedCheck] = [.startupWait, .cornerCheck, .cornerLock, .sleepDelay, .lockerProbe, .lockerRetry, .stages, .screenOff]
}

extension IdleMachine {
    /// When `check` is due next; nil while it waits for nothing.
    func due(_ check: TimedCheck) -> BoottimeInstant? {
        switch check {
        case .suspendGap: nil
        case .expiredHolds: holdsExpire
        case .startupWait: startupWaitDue
        case .cornerCheck: corners.checkDue(restFrom: lastActivity)
        case .cornerLock: corners.lockDue(restFrom: lastActivity)
        case .sleepDelay: sleep.until
        case .lockerProbe: supervisor.nextProbe(hurry: sleep.waits)
        case .lockerRetry: supervisor.retryAt
        case .stages: nextStageDue
        case .screenOff: screenOffDue
        }
    }

    /// What `check` does once its time has come; nothing before.
    mutating func run(_ check: TimedCheck, _ now: Instant, _ out: inout [Action]) {
        switch check {
        case .suspendGap: noteSuspendGap(now, &out)
        case .expiredHolds: endExpiredHolds(now, &out)
        case .startupWait: endStartupWaitIfDue(now, &out)
        case .cornerCheck: checkCornerIfDue(now, &out)
        case .cornerLock: lockFromCornerIfDue(now, &out)
        case .sleepDelay: sleepDelayCheck(now, &out)
        case .lockerProbe: probeIfDue(now, &out)
        case .lockerRetry: retryLockerIfDue(now, &out)
        case .stages: fireDueStages(now, &out)
        case .screenOff: turnScreenOffIfDue(now, &out)
        }
    }

    /// Runs `checks` in their order.
    mutating func run(_ checks: [TimedCheck], _ now: Instant, _ out: inout [Action]) {
        for check in checks { run(check, now, &out) }
    }

    /// The boottime of the next thing the machine must wake up for, if any.
    /// Between deadlines the agent sleeps: nothing here needs polling.
    public var nextDeadline: BoottimeInstant? {
        var deadline: BoottimeInstant?
        for check in TimedCheck.allCases { deadline = earliest(deadline, due(check)) }
        // Listening paused after input has a deadline and no check: the wake-up at it
        // reads the server's counter, and that reading (`.wake` in `handle`) resumes it.
        return earliest(deadline, listening.nextDeadline)
    }
}

/// The earlier of two times, either of which may be none.
public func earliest<Instant: Comparable>(_ a: Instant?, _ b: Instant?) -> Instant? {
    guard let a else { return b }
    guard let b else { return a }
    return min(a, b)
}
