// One turn of the machine, read in one place: what it looks at before an event, what
// after, and when it must wake next (sd-event's prepare/dispatch shape: every check
// says when it is due, the loop sleeps until the earliest, then each looks at its time).

/// One timed check: when it is due next and what it does then, on one row, so that a
/// deadline is never kept without the reaction that serves it, nor a reaction without
/// its deadline. A check does nothing before its time, so running one early is harmless.
struct TimedCheck: Sendable {
    /// When it is due next; nil while it waits for nothing.
    let due: @Sendable (IdleMachine) -> BoottimeInstant?
    /// What it does once its time has come; nothing before.
    let run: @Sendable (inout IdleMachine, Instant, inout [Action]) -> Void
}

extension IdleMachine {
    /// Looked at before the event, in this order.
    static let beforeEvent: [TimedCheck] = [
        // A suspend since the last event first. It has no deadline: it is seen in the
        // clocks, at whatever event comes first after it. The resume re-arms the stages,
        // and the idle time everything after reads counts from there.
        TimedCheck(due: { _ in nil }, run: { $0.noteSuspendGap($1, &$2) }),
        // Holds whose time ran out (an inhibitor's span, a disable's, the policy's
        // max-inhibit) end before the event is looked at: an event at that instant
        // meets them ended (a disable asked as the budget runs out is refused).
        TimedCheck(due: { $0.holdsExpire }, run: { $0.endExpiredHolds($1, &$2) }),
    ]

    /// Looked at after the event: what the event made due and what its time made due,
    /// in this order.
    static let afterEvent: [TimedCheck] = [
        // The start's wait for the sources ends first, so that a stage held only by the
        // wait fires below in the same turn.
        TimedCheck(due: { $0.startupWaitDue }, run: { $0.endStartupWaitIfDue($1, &$2) }),
        // The pointer's corner is asked for (the answer comes as an event of its own).
        TimedCheck(due: { $0.corners.checkDue(restFrom: $0.lastActivity) }, run: { $0.checkCornerIfDue($1, &$2) }),
        // A `+` corner's lock: before the stages, so that a lock due from both is the
        // corner's request (said as such), and the lock stage finds the locker running.
        TimedCheck(due: { $0.corners.lockDue(restFrom: $0.lastActivity) }, run: { $0.lockFromCornerIfDue($1, &$2) }),
        // Logind's sleep delay ran out: the sleep goes ahead. Before the locker's probe,
        // so that the probe no longer hurries (every 10 ms) for a sleep no longer waited for.
        TimedCheck(due: { $0.sleep.until }, run: { $0.sleepDelayCheck($1, &$2) }),
        // The locker's grab probe, on the supervisor's schedule.
        TimedCheck(due: { $0.supervisor.nextProbe(hurry: $0.sleep.waits) }, run: { $0.probeIfDue($1, &$2) }),
        // A failed locker's next start (or, when the last one returned at once, a probe
        // first): before the stages, so that a lock stage due now finds it started and
        // starts no second locker, and a warning due now is skipped.
        TimedCheck(due: { $0.supervisor.retryAt }, run: { $0.retryLockerIfDue($1, &$2) }),
        // The stages due now fire, the earliest first.
        TimedCheck(due: { $0.nextStageDue }, run: { $0.fireDueStages($1, &$2) }),
        // The monitor goes off once the lock has covered the screen long enough: last,
        // after everything above that may start or end a lock in this turn.
        TimedCheck(due: { $0.screenOffDue }, run: { $0.turnScreenOffIfDue($1, &$2) }),
    ]

    /// The boottime of the next thing the machine must wake up for, if any.
    /// Between deadlines the agent sleeps: nothing here needs polling.
    public var nextDeadline: BoottimeInstant? {
        var deadline: BoottimeInstant?
        for check in IdleMachine.beforeEvent + IdleMachine.afterEvent { deadline = earliest(deadline, check.due(self)) }
        // Listening paused after input has a deadline and no check: the wake-up at it
        // reads the server's counter, and that reading (`.wake` in `handle`) resumes it.
        return earliest(deadline, listening.nextDeadline)
    }

    /// Runs `checks` in their order; each acts only if its time has come.
    mutating func run(_ checks: [TimedCheck], _ now: Instant, _ out: inout [Action]) {
        for check in checks { check.run(&self, now, &out) }
    }
}

/// The earlier of two times, either of which may be none.
func earliest(_ a: BoottimeInstant?, _ b: BoottimeInstant?) -> BoottimeInstant? {
    guard let a else { return b }
    guard let b else { return a }
    return min(a, b)
}
