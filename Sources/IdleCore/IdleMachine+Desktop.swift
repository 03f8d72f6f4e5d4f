// What the desktop tells the machine: lock requests, sleep and resume, the
// session in front; and what the machine tells logind back (its hints).

/// Logind's sleep delay: the system waits to sleep until the screen is covered and
/// the before-sleep hook has ended, or until the delay runs out.
struct SleepDelay: Sendable {
    /// The system waits to sleep until this time at the latest; nil while no sleep waits.
    var until: BoottimeInstant?
    /// The before-sleep hook runs; the sleep waits for it (within the delay).
    var hookRunning = false

    var waits: Bool { until != nil }
}

/// Whether the agent listens to raw input now. After input it need not: the server's
/// idle counter tells the rest at the next deadline, so a 1000 Hz mouse costs one
/// event per idle period instead of a thousand a second.
struct InputListening: Sendable {
    private(set) var on = true
    /// A pause ends at the first reading of the server's counter from then on; with no
    /// end (nothing was due), at the first reading.
    private(set) var resumesAt: BoottimeInstant?
    /// When listening last began: activity the server saw before it was not heard.
    private(set) var since: Instant

    init(since now: Instant) { since = now }

    /// Its deadline: the wake-up whose reading of the counter ends a pause.
    var nextDeadline: BoottimeInstant? { on ? nil : resumesAt }

    /// A reading of the server's counter at `now` ends a pause that is over (or has no end).
    func pauseOver(at now: BoottimeInstant) -> Bool { !on && now >= resumesAt ?? now }

    mutating func pause(until resume: BoottimeInstant?) {
        on = false
        resumesAt = resume
    }

    mutating func resume(at now: Instant) {
        on = true
        resumesAt = nil
        since = now
    }
}

/// What logind was last told: it hears only changes.
struct LogindHints: Sendable {
    var locked = false
    var idle = false
}

extension IdleMachine {
    /// A lock asked for now: by `xidlelock lock` (`from` empty), logind, a D-Bus client
    /// or the X server's own saver.
    mutating func lockRequest(from: String, _ now: Instant, _ out: inout [Action]) {
        let by = from.isEmpty ? "" : " by \(from)"
        switch locker {
        case .unlocked:
            stages.lockRequested = true
            if !from.isEmpty { out.append(.log(.info, "lock requested\(by)")) }
            startLocker(now, &out)
        case .retrying:
            // Asked now: do not wait out the backoff.
            stages.lockRequested = true
            out.append(.log(.info, "lock requested\(by) while the locker is failing: trying again now"))
            supervisor.retryNow(at: now.boottime)
        case .running:
            out.append(.log(.info, "lock requested\(by); the locker already runs"))
        }
    }

    /// Lock before the system sleeps, and let it sleep only once the screen is
    /// covered, or when logind's delay is about to run out (then loudly).
    mutating func prepareForSleep(delayLimit: Millis, _ now: Instant, _ out: inout [Action]) {
        sleep.until = now.boottime + delayLimit
        if let hook = config.beforeSleep {
            // Runs inside the delay: the sleep waits for it too, as long as the delay lasts.
            sleep.hookRunning = true
            out.append(.run(.beforeSleep, command: hook, environment: environment("before-sleep", nil, now)))
        }
        guard config.lockBeforeSleep else {
            out.append(.log(.info, "the system is going to sleep (not locking first: --no-lock-before-sleep)"))
            letSleepIfReady(now, &out)
            return
        }
        if supervisor.covers {
            out.append(.log(.info, "the system is going to sleep; the screen is locked"))
            letSleepIfReady(now, &out)
            return
        }
        out.append(.log(.info, "the system is going to sleep: locking first"))
        if locker == .unlocked {
            stages.lockRequested = true
            startLocker(now, &out)
        } else {
            supervisor.retryNow(at: now.boottime)
        }
    }

    /// The delay ran out before the locker covered the screen.
    mutating func sleepDelayCheck(_ now: Instant, _ out: inout [Action]) {
        guard let until = sleep.until, now.boottime >= until else { return }
        if config.lockBeforeSleep && !supervisor.covers {
            out.append(.log(.error, "the locker did not cover the screen before the system had to sleep: the screen may NOT be locked on resume"))
        } else {
            out.append(.log(.warning, "the before-sleep hook did not end within the sleep delay; letting the system sleep"))
        }
        letSleep(covered: false, now, &out)
    }

    /// Lets the system sleep once the screen is covered (unless not locking before
    /// sleep) and the before-sleep hook has ended.
    mutating func letSleepIfReady(_ now: Instant, _ out: inout [Action]) {
        guard sleep.waits, !sleep.hookRunning, supervisor.covers || !config.lockBeforeSleep else { return }
        letSleep(covered: supervisor.covers, now, &out)
    }

    mutating func letSleep(covered: Bool, _ now: Instant, _ out: inout [Action]) {
        sleep = SleepDelay()
        out.append(.announce(.sleeping(covered: covered)))
        out.append(.releaseSleepDelay)
    }

    mutating func resumedFromSleep(_ now: Instant, _ out: inout [Action]) {
        sleep.until = nil
        out.append(.announce(.resumed))
        if let hook = config.afterResume {
            out.append(.run(.afterResume, command: hook, environment: environment("after-resume", nil, now)))
        }
    }

    /// Time with another session in front (another VT) is time away from this one:
    /// no input reaches it, so its idle time goes on and the stages fire on time, and
    /// whoever switches back finds it locked. The switch back is no activity: only
    /// input after it is. `--lock-on-switch` locks the moment the session leaves.
    mutating func sessionActive(_ active: Bool, _ now: Instant, _ out: inout [Action]) {
        guard active == sessionInactive else { return }
        sessionInactive = !active
        if active {
            activity.sessionBackAt = now.monotonic
            // Input from here on must be heard as input: it alone is activity now.
            listening.resume(at: now)
            out.append(.log(.info, "this session is in front again after \(idle(at: now)) idle: the idle time goes on until input"))
            // A locker that failed while the session was away (no grab on an inactive
            // VT) is started again now, before anyone can use the desktop.
            if case .retrying = locker {
                out.append(.log(.info, "the locker failed while another session was in front: starting it again now"))
                supervisor.retryNow(at: now.boottime)
            }
        } else if config.lockOnSwitch {
            out.append(.log(.info, "another session is in front: locking now (--lock-on-switch)"))
            lockRequest(from: "the switch to another session (--lock-on-switch)", now, &out)
        } else {
            out.append(.log(.info, "another session is in front: the idle time goes on, the stages fire on time"))
        }
    }

    mutating func tellLockedHint(_ locked: Bool, _ out: inout [Action]) {
        guard locked != hints.locked else { return }
        hints.locked = locked
        out.append(.setLockedHint(locked))
    }

    mutating func tellIdleHint(_ idle: Bool, _ out: inout [Action]) {
        guard idle != hints.idle else { return }
        hints.idle = idle
        out.append(.setIdleHint(idle))
    }
}
