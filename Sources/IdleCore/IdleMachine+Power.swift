// The power source and the monitor: the stages' times on battery, and the monitor
// off once the screen is locked (`--screen-off-after-lock`).

/// The monitor's part: when the X server last turned it on, whether it is off, and
/// whether this lock turned it off (then its settings go back at the lock's end).
struct MonitorPower: Sendable {
    /// The later of the lock's cover and the last activity the X server saw (which
    /// turns the monitor on): the monitor goes off this long after it.
    var onSince: BoottimeInstant?
    var isOff = false
    /// The monitor was turned off during this lock: the server's settings go back at its end.
    var turnedOff = false

    /// When it goes off: `after` its last turn-on, and only while the lock covers the screen.
    func offDue(after: Millis?, covered: Bool) -> BoottimeInstant? {
        guard let after, covered, !isOff, let onSince else { return nil }
        return onSince + after
    }
}

extension IdleMachine {
    /// UPower says the power source changed: the times on it are in force at once (a
    /// stage now overdue fires; one now later waits).
    mutating func powerSource(onBattery: Bool, _ now: Instant, _ out: inout [Action]) {
        guard onBattery != self.onBattery else { return }
        self.onBattery = onBattery
        let times = config.stages.map { "\($0.name) at \($0.idleTime(onBattery: onBattery))" }.joined(separator: ", ")
        let off = screenOffAfter.map { "; screen off \($0) after the lock" } ?? ""
        out.append(.log(.info, "on \(onBattery ? "battery" : "AC power"): \(times)\(off)" + rearmNote(now)))
        out.append(.announce(.powerSource(onBattery: onBattery)))
    }

    /// `--screen-off-after-lock` on the power source in force.
    public var screenOffAfter: Millis? {
        onBattery ? config.screenOffAfterLockOnBattery ?? config.screenOffAfterLock : config.screenOffAfterLock
    }

    /// When the monitor goes off: only while the locker covers the screen.
    var screenOffDue: BoottimeInstant? {
        monitor.offDue(after: screenOffAfter, covered: supervisor.covers)
    }

    /// The X server turned the monitor on (input, a screensaver reset, a resume), or
    /// the lock has just covered the screen: the time to turn it off starts again.
    mutating func screenWoken(_ now: Instant) {
        monitor.isOff = false
        monitor.onSince = now.boottime
    }

    mutating func turnScreenOffIfDue(_ now: Instant, _ out: inout [Action]) {
        guard let due = screenOffDue, now.boottime >= due else { return }
        monitor.isOff = true
        monitor.turnedOff = true
        let lockedFor = supervisor.lockedSince.map { now.boottime - $0 } ?? .zero
        out.append(.log(.info, "the screen has been locked for \(lockedFor), \(now.boottime - (monitor.onSince ?? now.boottime)) without input: turning the monitor off"))
        out.append(.turnScreenOff)
        out.append(.announce(.screenOff(lockedFor: lockedFor)))
    }

    /// The lock ended: the monitor's own settings go back (input has turned it on).
    mutating func screenSettingsBack(_ out: inout [Action]) {
        monitor.isOff = false
        monitor.onSince = nil
        guard monitor.turnedOff else { return }
        monitor.turnedOff = false
        out.append(.restoreScreenSettings)
    }
}
