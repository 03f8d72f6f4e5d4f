// The machine's parts, in one shape, and the one order in which `handle` looks at
// their time (sd-event's prepare/dispatch shape: every source says when it is due,
// the loop sleeps until the earliest, then each looks at its own time).

/// A part of the machine (`LockerSupervisor`, `HoldBook`, `Stages`, ...): it keeps
/// its own state, says when it must next look at the time, and reacts when that time
/// comes. What it needs of the other parts (the last activity, whether the lock
/// covers) it reads from the machine; what it does (a lock, a log line) goes through
/// the machine, which carries the actions out in order. Both are static for that: the
/// part lives inside the machine, and exclusive access lets no method of the part
/// change the machine around it.
///
/// A part's deadline and its reaction are written side by side: so a deadline is
/// never kept without the reaction that serves it, nor a reaction without its
/// deadline. A reaction does nothing before its time, so running one early is harmless.
protocol MachinePart: Sendable {
    /// When the part must next look at the time; nil while it waits for nothing.
    static func nextDeadline(of machine: IdleMachine) -> BoottimeInstant?
    /// What the part does once its time has come; nothing before.
    static func timeCame(_ machine: inout IdleMachine, _ now: Instant, _ out: inout [Action])
}

extension IdleMachine {
    /// The parts whose time is looked at before the event, in this order.
    static let beforeEvent: [any MachinePart.Type] = [
        // A suspend since the last event first (it has no deadline: it is seen in the
        // clocks): the resume re-arms the stages, and the idle time everything after
        // reads counts from there.
        Activity.self,
        // Holds whose time ran out (an inhibitor's span, a disable's, the policy's
        // max-inhibit) end before the event is looked at: an event at that instant
        // meets them ended (a disable asked as the budget runs out is refused).
        HoldBook.self,
    ]

    /// The parts whose time is looked at after the event: what the event made due and
    /// what its time made due, in this order.
    static let afterEvent: [any MachinePart.Type] = [
        // The start's wait for the sources ends first, so that a stage held only by
        // the wait fires below in the same turn.
        StartupWait.self,
        // The pointer's corner is asked for, then a `+` corner's lock comes: before
        // the stages, so that a lock due from both is the corner's request (said as
        // such), and the lock stage finds the locker running.
        CornerWatch.self,
        // Logind's sleep delay ran out: the sleep goes ahead. Before the locker's
        // probe, so that the probe no longer hurries (every 10 ms) for a sleep that
        // is no longer waited for.
        SleepDelay.self,
        // The locker's grab probe, then a failed locker's next start: before the
        // stages, so that a lock stage due now finds it started and starts no second
        // locker, and a warning due now is skipped.
        LockerSupervisor.self,
        // The stages due now fire, the earliest first.
        Stages.self,
        // The monitor goes off once the lock has covered the screen long enough:
        // last, after everything above that may start or end a lock in this turn.
        MonitorPower.self,
    ]

    /// Every part with a time of its own. Listening paused after input has its
    /// deadline but no reaction here: it resumes at the wake's reading of the
    /// server's counter, which only `.wake` carries.
    static let parts: [any MachinePart.Type] = beforeEvent + afterEvent + [InputListening.self]

    /// Lets each of `parts` react to its time, in their order.
    mutating func timeCame(_ parts: [any MachinePart.Type], _ now: Instant, _ out: inout [Action]) {
        for part in parts { part.timeCame(&self, now, &out) }
    }
}

/// The earlier of two times, either of which may be none.
func earliest(_ a: BoottimeInstant?, _ b: BoottimeInstant?) -> BoottimeInstant? {
    guard let a else { return b }
    guard let b else { return a }
    return min(a, b)
}
