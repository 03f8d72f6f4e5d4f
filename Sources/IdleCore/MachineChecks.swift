// The machine's timed checks: one sequence, written down once, that `handle` runs
// and `nextDeadline` reads (sd-event's prepare/dispatch shape: every source says when
// it is due, the loop sleeps until the earliest, then each looks at its own time).

/// One part's reaction to its own time. Each check says when it is due next
/// (`IdleMachine.due(_:)`) and what it does then (`IdleMachine.run(_:_:_:)`), and does
/// nothing before that time: so a deadline is never kept without the check that serves
/// it, nor a check without its deadline, and running one early is harmless.
///
/// The order of the cases is the order they run in, and it matters where said.
enum TimedCheck: CaseIterable, Sendable {
    // Before the event (after the suspend gap is noted, which has no deadline of its
    // own: it is seen in the clocks, and comes first because the resume re-arms the
    // stages and the idle time everything else reads counts from there).

    /// Holds whose time ran out (an inhibitor's span, a disable's, the policy's
    /// max-inhibit) end before the event is looked at: an event at that instant meets
    /// them ended (a disable asked as the budget runs out is refused).
    case expiredHolds

    // After the event, in this order:

    /// The start's wait for the sources ends: first, so that a stage held only by the
    /// wait fires below in the same turn.
    case startupWait
    /// The pointer's corner is asked for (the answer comes as an event of its own).
    case cornerCheck
    /// A `+` corner's lock: before the stages, so that a lock due from both is the
    /// corner's request (said as such), and the lock stage finds the locker running.
    case cornerLock
    /// Logind's sleep delay ran out: the sleep goes ahead. Before the probe, so that
    /// the probe no longer hurries (every 10 ms) for a sleep that is no longer waited for.
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

    static let beforeEvent: [TimedCheck] = [.expiredHolds]
    static let afterEvent: [TimedCheck] = [.startupWait, .cornerCheck, .cornerLock, .sleepDelay, .lockerProbe, .lockerRetry, .stages, .screenOff]
}

extension IdleMachine {
    /// When `check` is due next; nil while it waits for nothing.
    func due(_ check: TimedCheck) -> BoottimeInstant? {
        switch check {
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

    /// Runs `check`: it acts only if its time has come.
    mutating func run(_ check: TimedCheck, _ now: Instant, _ out: inout [Action]) {
        switch check {
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

    mutating func run(_ checks: [TimedCheck], _ now: Instant, _ out: inout [Action]) {
        for check in checks { run(check, now, &out) }
    }
}

/// The earlier of two times, either of which may be none.
func earliest(_ a: BoottimeInstant?, _ b: BoottimeInstant?) -> BoottimeInstant? {
    guard let a else { return b }
    guard let b else { return a }
    return min(a, b)
}
