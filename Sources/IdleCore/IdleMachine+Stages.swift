// The stages: each fires once an idle period, at its idle time on the power source in
// force, unless a hold it obeys holds it off.

/// The stages' part: which have fired in this idle period and from when each runs,
/// the warnings shown, the resume commands owed, and what the lock in force came from.
struct Stages: Sendable {
    /// Which stages have fired in this idle period, by index of `config.stages`.
    private(set) var fired: [Bool]
    /// Where a stage's idle time runs from when not from the last activity: a stage
    /// that had fired is run again from the resume of a sleep without input.
    private(set) var from: [BoottimeInstant?]
    /// The stages whose resume command runs when activity returns.
    var resumesDue: [Int] = []
    /// The warnings (notify stages) shown in this idle period: withdrawn at activity.
    var notifiersShown: [Int] = []
    /// The lock in force was asked for (a request, a corner, a sleep), not the lock
    /// stage's idle time.
    var lockRequested = false
    /// When the on-unlock hook last ran (`--on-unlock-interval`).
    var lastOnUnlock: BoottimeInstant?

    init(count: Int) {
        fired = Array(repeating: false, count: count)
        from = Array(repeating: nil, count: count)
    }

    /// A new idle period: every stage may fire once more, timed from the last activity.
    mutating func rearm() {
        fired = Array(repeating: false, count: fired.count)
        from = Array(repeating: nil, count: from.count)
    }

    /// The stages that had fired may fire again, timed from `resume`; returns them.
    mutating func rearmFired(from resume: BoottimeInstant) -> [Int] {
        let rearmed = fired.indices.filter { fired[$0] }
        for i in rearmed {
            fired[i] = false
            from[i] = resume
        }
        return rearmed
    }

    mutating func fire(_ i: Int) { fired[i] = true }

    /// A warning of a lock that will not come now (activity, the agent's stop) is withdrawn.
    mutating func withdrawWarnings(_ out: inout [Action]) {
        for i in notifiersShown { out.append(.terminate(.stage(i))) }
        notifiersShown = []
    }
}

extension IdleMachine {
    /// When the next stage fires; nil while the stages left are held off or all fired.
    var nextStageDue: BoottimeInstant? { nextStageIndex.map(dueTime) }

    /// The stage that fires next: the first due of those not fired and not held.
    var nextStageIndex: Int? {
        config.stages.indices.filter { !stages.fired[$0] && heldBy($0).isEmpty }.min { (dueTime($0), $0) < (dueTime($1), $1) }
    }

    /// When the lock stage is due in this idle period: nil once it fired or a locker
    /// runs, and while it is held off. The agent tells the guard, which asks for proof
    /// of life when that time passes without a word.
    public var lockDue: BoottimeInstant? {
        guard !lockerActive, let i = config.stages.firstIndex(where: { $0.role == .lock }),
              !stages.fired[i], heldBy(i).isEmpty else { return nil }
        return dueTime(i)
    }

    /// When stage `i` is due in this idle period, on the power source in force.
    func dueTime(_ i: Int) -> BoottimeInstant {
        (stages.from[i] ?? lastActivity) + config.stages[i].idleTime(onBattery: onBattery)
    }

    /// What holds stage `i` off now, in the user's words (empty: nothing): a disable,
    /// the start's wait for the sources it obeys, the sources of its holds.
    func heldBy(_ i: Int, awaiting: Bool = true) -> [String] {
        let ignored = config.stages[i].ignoresHolds
        var by: [String] = isDisabled ? ["disabled"] : []
        if awaiting, awaitingSources, !startupWait.awaiting.isSubset(of: ignored) { by.append("start") }
        by += InhibitorSource.allCases.filter { source in
            !ignored.contains(source) && inhibitors.contains { $0.source == source }
        }.map(\.rawValue)
        return by
    }

    /// When a hold ends, the stages are re-armed from the current idle time: those
    /// already due fire now (the user has been away all along), the rest on time.
    func rearmNote(_ now: Instant) -> String {
        guard let next = nextStageIndex else { return "" }
        let name = config.stages[next].name
        let due = dueTime(next) - now.boottime
        return due <= .zero ? "; stage '\(name)' is due now (idle \(idle(at: now)))" : "; stage '\(name)' in \(due)"
    }

    mutating func runResumeCommands(_ now: Instant, _ out: inout [Action]) {
        for i in stages.resumesDue {
            let stage = config.stages[i]
            if let command = stage.resumeCommand {
                out.append(.run(.resume(i), command: command, environment: environment("resume", stage, now)))
            }
        }
        stages.resumesDue = []
    }

    mutating func fireDueStages(_ now: Instant, _ out: inout [Action]) {
        let idle = idle(at: now)
        let configured = config.stages
        // Each stage on its own: one that ignores a hold fires while it holds the others.
        let due = configured.indices.filter { !stages.fired[$0] && now.boottime >= dueTime($0) && heldBy($0).isEmpty }
            .sorted { (dueTime($0), $0) < (dueTime($1), $1) }
        for i in due {
            stages.fire(i)
            let stage = configured[i]
            switch stage.role {
            case .lock:
                tellIdleHint(true, &out)
                guard !lockerActive else { continue }
                startLocker(now, &out)
            case .notify, .custom:
                if stage.role == .notify {
                    // A warning is pointless once locked, or when the lock is due at the same time
                    // (after a suspend).
                    let lockDue = due.contains { configured[$0].role == .lock && !stages.fired[$0] }
                    guard !lockerActive, !lockDue else {
                        out.append(.log(.debug, "stage '\(stage.name)' skipped: locked or locking"))
                        continue
                    }
                }
                out.append(.log(.info, "stage '\(stage.name)': idle \(idle)"))
                out.append(.run(.stage(i), command: stage.command, environment: environment(stage.name, stage, now)))
                out.append(.announce(.stageFired(name: stage.name, idle: idle)))
                if stage.role == .notify { stages.notifiersShown.append(i) }
            }
            if stage.resumeCommand != nil && !stages.resumesDue.contains(i) { stages.resumesDue.append(i) }
        }
    }
}
