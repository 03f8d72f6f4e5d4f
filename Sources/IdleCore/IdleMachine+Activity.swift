// The last activity, and what a suspend did to the idle time since: the part every
// other reads the idle time from.

/// The activity's part: the last activity in both clocks, the raw input and the X
/// server's counter behind it, and the suspends since. It has no deadline: a suspend
/// is seen in the clocks, at whatever event comes first after it.
struct Activity: Sendable {
    /// The last activity (input, a server-counter reset, an unlock), in both clocks.
    var at: Instant
    /// The last raw input event seen.
    var lastInput: Instant?
    /// The latest activity the X server's counter showed, counted as activity or not.
    var lastServer = MonotonicInstant(.zero)
    /// Time suspended as of the last event: a gap is the growth of it.
    var suspendOffset: Millis
    /// Gaps noticed since the last activity: the monotonic time each was noticed and
    /// the suspend offset before it. Server activity is placed with the offset in
    /// force at its time, before a gap when in doubt (which locks rather than not).
    var gapsSince: [(noticedAt: MonotonicInstant, offsetBefore: Millis)] = []
    var lastSuspendGap: SuspendGap?
    /// When this session came back to the front: the X server's counter restarts then
    /// and its devices come back, which is no activity.
    var sessionBackAt: MonotonicInstant?

    init(at now: Instant) {
        at = now
        suspendOffset = now.suspended
    }
}

extension IdleMachine {
    // MARK: Suspend gaps

    mutating func noteSuspendGap(_ now: Instant, _ out: inout [Action]) {
        let offsetBefore = activity.suspendOffset
        let grown = now.suspended - offsetBefore
        activity.suspendOffset = now.suspended
        guard grown >= IdleMachine.gapThreshold else { return }
        activity.lastSuspendGap = SuspendGap(noticedAt: now.boottime, length: grown)
        screenWoken(now)
        out.append(.announce(.suspendGap(length: grown)))
        let idleBefore = (now.boottime - grown) - lastActivity
        if config.suspendCountsAsIdle {
            activity.gapsSince.append((noticedAt: now.monotonic, offsetBefore: offsetBefore))
            // A machine that woke by itself and is left alone dims, locks and sleeps
            // again: the stages that had fired run again, timed from the resume. Those
            // that had not count the sleep as idle time (a long sleep locks at once).
            let rearmed = stages.rearmFired(from: now.boottime)
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
        activity.at = now
        activity.gapsSince = []
        stages.withdrawWarnings(&out)
        stages.rearm()
    }

    // MARK: Activity

    /// Compares the server's idle counter with what raw input told us. The counter
    /// runs on the monotonic clock, so the comparison is made there.
    mutating func crossCheck(serverIdle: Millis, _ now: Instant, _ out: inout [Action]) {
        let tolerance = IdleMachine.crossCheckTolerance
        let serverActivity = now.monotonic - serverIdle
        // Counted or not, the server turned the monitor on for it.
        if serverActivity > max(activity.lastServer, lastActivityAt.monotonic) + IdleMachine.counterJitter { screenWoken(now) }
        activity.lastServer = max(activity.lastServer, serverActivity)
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
            let atSwitchBack = activity.sessionBackAt.map { back in
                serverActivity <= back + IdleMachine.switchBackSettle && (lastInput.map { $0.monotonic < back } ?? true)
            } ?? false
            if atSwitchBack {
                report(.switchBackReset, "the X server's idle counter restarted as this session came back to the front: not counted as activity", &out)
            } else if explainedByInput || config.screensaverResetCountsAsActivity {
                let offset = activity.gapsSince.first { serverActivity < $0.noticedAt }?.offsetBefore ?? now.suspended
                activity(at: Instant(monotonic: serverActivity, boottime: BoottimeInstant(serverActivity.sinceZero + offset)), now, &out,
                         byInput: explainedByInput)
            }
        } else if let input = lastInput, input.monotonic > serverActivity + .seconds(1) {
            report(.inputNotCounted, "raw input arrived that the X server's idle counter did not count; trusting the raw input", &out)
        }
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

    /// Activity at `t`: a new idle period begins. Activity older than the last is ignored.
    /// `byInput`: the user's own input (or an unlock), which alone renews the policy's
    /// max-inhibit.
    mutating func activity(at t: Instant, _ now: Instant, _ out: inout [Action], unlocking: Bool = false, byInput: Bool = false) {
        guard t.boottime >= lastActivity else { return }
        if byInput || unlocking { userIsBack(now) }
        let idle = t.boottime - lastActivity
        activity.at = t
        screenWoken(now)
        activity.gapsSince.removeAll { $0.noticedAt <= t.monotonic }
        tellIdleHint(false, &out)
        if config.corners != nil { pointerMoved(now, &out) }
        // A failing locker is not stopped by input: the screen may be open, and
        // input proves nothing about who is there. Only an unlock ends a lock.
        let anyFired = stages.fired.contains(true)
        stages.rearm()
        guard anyFired || !stages.resumesDue.isEmpty else { return }
        if !lockerActive { out.append(.log(.info, "activity after \(idle) idle")) }
        // An unlock is announced as such; input while locked (resume commands) is activity.
        if !unlocking { out.append(.announce(.activityResumed(idleBefore: idle))) }
        stages.withdrawWarnings(&out)
        runResumeCommands(now, &out)
    }
}
