import IdleCore
import Testing

@Suite("The locker: one at a time, never killed, restarted when it fails")
struct LockerTests {
    /// A story locked at 10m idle, the locker seen holding the screen 10 ms later.
    static func locked(_ extra: String...) -> Story {
        var s = Story(Story.config(["--on-unlock", "unlock-hook"] + extra))
        s.wait(until: Story.at(.minutes(10) + .ms(10)))
        #expect(s.actions.lockerStarts == 1)
        #expect(s.machine.stateName == "locked")
        return s
    }

    @Test("no second locker while one runs, however long the idle time grows")
    func neverTwoLockers() {
        var s = LockerTests.locked("--notify-before", "1m", "--notifier", "warn")
        #expect(s.machine.nextDeadline == s.machine.supervisor.nextProbe, "nothing but the grab's re-probe to wake for while locked and away")
        for hour in 1...12 {
            s.advance(to: Story.at(.hours(Int64(hour))))
            s.wake()
        }
        s.input()  // someone tries the keyboard and walks away
        s.wait(for: .hours(2))
        for _ in 0..<10 {  // a video player resetting the counter behind the locker
            s.wait(for: .minutes(7))
            s.screensaverReset()
        }
        s.wait(for: .hours(1))
        #expect(s.actions.lockerStarts == 1)
        #expect(s.machine.isLocked)
    }

    @Test("unlocking restarts the idle period from zero and runs --on-unlock")
    func unlockRestartsTheIdlePeriod() {
        var s = LockerTests.locked()
        s.advance(by: .minutes(3))
        let unlocked = s.lockerExits(.exited(0))
        #expect(unlocked.commands(.onUnlock) == ["unlock-hook"])
        #expect(s.machine.locker == .unlocked)
        #expect(s.machine.idle(at: s.clock) == .zero)
        #expect(s.machine.nextDeadline == s.now + .minutes(10))
        let unlockedAt = s.now
        s.expectLock(2, exactlyAt: unlockedAt + .minutes(10))
    }

    @Test("--on-unlock runs at most once per --on-unlock-interval")
    func onUnlockInterval() {
        var s = Story(flags: "--lock-after", "1m", "--on-unlock", "unlock-hook", "--on-unlock-interval", "10m")
        var hookRuns: [Int] = []
        for _ in 0..<10 {  // lock at 1m idle, unlock 10 s later: one cycle every 70 s
            s.wait(for: .minutes(1) + .ms(10))  // locked, and the probe saw the grab
            #expect(s.machine.isLocked)
            s.advance(by: .seconds(10) - .ms(10))
            hookRuns.append(s.lockerExits(.exited(0)).runs(.onUnlock).count)
        }
        // Unlocks at 70 s, 140 s, ... 700 s: the hook runs at 70 s, and again once 600 s have passed.
        #expect(hookRuns == [1, 0, 0, 0, 0, 0, 0, 0, 0, 1])
        #expect(s.actions.logs(containing: "on-unlock hook skipped").count == 8)
    }

    @Test("without an interval --on-unlock runs at every unlock")
    func onUnlockEveryTime() {
        var s = Story(flags: "--lock-after", "1m", "--on-unlock", "unlock-hook")
        for _ in 0..<3 {
            s.wait(for: .minutes(1) + .ms(10))
            s.advance(by: .seconds(1))
            s.lockerExits(.exited(0))
        }
        #expect(s.actions.runs(.onUnlock).count == 3)
    }

    @Test("a locker failing at once is restarted at once, then after 1, 2, 4 ... seconds, at most 60")
    func failingLockerBacksOff() {
        var s = LockerTests.locked()
        s.advance(by: .ms(300))
        let first = s.lockerExits(.exited(1))
        #expect(first.lockerStarts == 1, "restarted at once")
        #expect(first.logs(.error).count == 1)
        #expect(first.logs(.error).first?.contains("may NOT be locked") == true)
        var delays: [Millis] = []
        for _ in 0..<9 {
            s.advance(by: .ms(300))
            let failed = s.lockerExits(.exited(1))
            #expect(failed.lockerStarts == 0)
            #expect(failed.logs(.error).count == 1)
            guard let deadline = s.machine.nextDeadline else {
                Issue.record("no retry deadline")
                return
            }
            delays.append(deadline - s.now)
            s.advance(by: deadline - s.now - .ms(1))
            #expect(s.wake().lockerStarts == 0, "not before the delay")
            #expect(s.wakeAtDeadline().lockerStarts == 1)
        }
        #expect(delays == [1, 2, 4, 8, 16, 32, 60, 60, 60].map { Millis.seconds($0) })
        #expect(s.actions.runs(.onUnlock).isEmpty, "a failure is not an unlock")
        #expect(!s.actions.terminated.contains(.locker))
    }

    @Test("a locker killed by a signal is restarted at once, however long it ran")
    func killedLockerIsRestarted() {
        var s = LockerTests.locked()
        s.advance(by: .hours(2))
        let killed = s.lockerExits(.killed(signal: 9))
        #expect(killed.lockerStarts == 1)
        #expect(killed.logs(.error).count == 1)
        #expect(killed.runs(.onUnlock).isEmpty)
        #expect(s.machine.isLocked)
        s.advance(by: .ms(10))
        #expect(s.lockerExits(.killed(signal: 15)).logs(.error).count == 1)
        #expect(s.machine.nextDeadline == s.now + .seconds(1))
    }

    @Test("a locker that cannot start is handled like one that failed")
    func lockerThatCannotStart() {
        var s = LockerTests.locked()
        let first = s.lockerExits(.failedToStart("slock: not found"))
        #expect(first.lockerStarts == 1)
        #expect(first.logs(.error).first?.contains("could not be started (slock: not found)") == true)
        s.lockerExits(.failedToStart("slock: not found"))
        #expect(s.machine.nextDeadline == s.now + .seconds(1))
        #expect(s.wakeAtDeadline().lockerStarts == 1)
    }

    @Test("a non-zero exit at any time is a failure, even hours after the locker held the screen")
    func lateNonZeroExitIsAFailure() {
        var s = LockerTests.locked()
        s.advance(by: .hours(2))
        let ended = s.lockerExits(.exited(1))  // a crashed xsecurelock
        #expect(ended.lockerStarts == 1, "locked again at once")
        #expect(ended.logs(.error).first?.contains("exited with status 1 after 2h10ms") == true)
        #expect(ended.logs(.error).first?.contains("the screen may NOT be locked") == true)
        #expect(ended.commands(.onUnlock).isEmpty, "a failure is not an unlock")
        #expect(ended.contains(.announce(.lockerFailed(kind: "exited", reason: "exited with status 1 after 2h10ms", retryIn: .zero))))
        #expect(s.machine.idle(at: s.clock) == .hours(2) + .minutes(10) + .ms(10), "the idle period does not restart")
    }

    @Test("a non-zero exit just inside the two seconds is a failure")
    func nonZeroExitInsideTheWindowIsAFailure() {
        var s = LockerTests.locked()
        s.advance(by: .seconds(2) - .ms(1))
        let ended = s.lockerExits(.exited(1))
        #expect(ended.lockerStarts == 1)
        #expect(ended.logs(.error).count == 1)
    }

    @Test("exit 0 after the locker held the screen for a second is an unlock; sooner, it returned at once",
          arguments: [(Millis.ms(990), false), (.seconds(1), true), (.seconds(30), true)])
    func exitZero(after span: Millis, unlocks: Bool) {
        var s = LockerTests.locked()
        s.advance(by: span - .ms(10))  // span after the locker's start
        let ended = s.lockerExits(.exited(0))
        #expect((ended.commands(.onUnlock) == ["unlock-hook"]) == unlocks)
        #expect((s.machine.locker == .unlocked) == unlocks)
        #expect((ended.lockerStarts == 1) == !unlocks, "a locker that returned at once is started again")
    }

    @Test("exit 0 at once (i3lock without -n, a backgrounding wrapper, true) is an error naming the likely cause")
    func returnedAtOnce() {
        var s = Story(flags: "--lock-after", "10m", "--on-unlock", "unlock-hook")
        s.wait(until: Story.at(.minutes(10)))
        s.advance(by: .ms(40))
        let ended = s.lockerExits(.exited(0))
        #expect(ended.logs(.error).first?.contains("as i3lock does without -n") == true)
        #expect(ended.runs(.onUnlock).isEmpty)
        #expect(s.actions.lockerStarts == 2, "started again at once: nothing held the keyboard")
    }

    @Test("after an exit 0 at once, a retry waits while something holds the keyboard: detached lockers never pile up")
    func detachedLockersDoNotPileUp() {
        var s = Story(flags: "--lock-after", "10m")
        s.wait(until: Story.at(.minutes(10)))
        s.keyboardHeldByOther = true  // the forked copy grabbed the keyboard
        s.advance(by: .ms(30))
        let first = s.lockerExits(.exited(0))
        #expect(first.lockerStarts == 0, "the keyboard is held: no second locker")
        #expect(first.logs(.error).contains { $0.contains("detached copy of the locker") })
        for _ in 0..<20 { s.wakeAtDeadline() }  // minutes of checking, with backoff
        #expect(s.actions.lockerStarts == 1, "\(s.actions.lockerStarts) lockers while the detached one held the keyboard")
        s.keyboardHeldByOther = false  // the user unlocked the detached locker
        s.wakeAtDeadline()
        #expect(s.actions.lockerStarts == 2, "with the keyboard free the locker starts again")
    }

    @Test("a locker that runs but never grabs the keyboard is an error shown in status; it is not replaced; its exit 0 unlocks")
    func neverCovers() {
        var s = Story(flags: "--lock-after", "10m", "--on-unlock", "unlock-hook")
        s.lockerGrabsKeyboard = false
        s.wait(until: Story.at(.minutes(10) + .seconds(3) - .ms(1)))
        #expect(s.machine.stateName == "locking")
        let deadline = s.wait(until: Story.at(.minutes(10) + .seconds(3)))
        #expect(deadline.logs(.error).first?.contains("without grabbing the keyboard") == true)
        #expect(deadline.contains(.announce(.lockerNotCovering(runningFor: .seconds(3)))))
        #expect(s.machine.stateName == "locker-not-covering")
        let status = JSONValue.object(s.machine.statusFields(at: s.clock, lockerPid: 42))
        #expect(status["locker"]?["covers_screen"] == .bool(false))
        s.wait(for: .hours(1))
        #expect(s.actions.lockerStarts == 1, "never a second locker")
        #expect(s.machine.nextDeadline == s.machine.supervisor.nextProbe, "only the grab's re-probe once the deadline passed")
        #expect(s.machine.nextDeadline.map { $0 - s.now } ?? .zero <= .seconds(5))
        #expect(s.lockerExits(.exited(0)).commands(.onUnlock) == ["unlock-hook"])
    }

    @Test("`locked` is announced once the locker holds the screen, not when it starts")
    func lockedMeansCovered() {
        var s = Story(flags: "--lock-after", "10m")
        let start = s.wait(until: Story.at(.minutes(10)))
        #expect(start.contains(.announce(.locking(idle: .minutes(10), requested: false, attempt: 1))))
        #expect(!start.contains { if case .announce(.locked) = $0 { true } else { false } })
        let covered = s.wait(for: .ms(10))
        #expect(covered.contains(.announce(.locked(idle: .minutes(10) + .ms(10), requested: false))))
    }

    @Test("the probe runs 10 ms after the start, then at doubling gaps up to 500 ms, until 3 s: at most a dozen")
    func probeSchedule() {
        var s = Story(flags: "--lock-after", "10m")
        s.lockerGrabsKeyboard = false
        s.wait(until: Story.at(.minutes(10)))
        var probes: [Millis] = []
        while let deadline = s.machine.nextDeadline, deadline <= Story.at(.minutes(10) + .seconds(5)) {
            s.advance(to: deadline)
            if s.wake().contains(.probeGrabs) { probes.append(s.now - Story.at(.minutes(10))) }
        }
        #expect(probes == [10, 20, 40, 80, 160, 320, 640, 1140, 1640, 2140, 2640, 3000].map { Millis.ms($0) })
    }

    @Test("while failing, status has a state of its own with the last failure and the next try")
    func failingStatus() {
        var s = LockerTests.locked()
        s.lockerExits(.exited(1))
        s.advance(by: .ms(100))
        s.lockerExits(.exited(1))
        let status = JSONValue.object(s.machine.statusFields(at: s.clock, lockerPid: nil))
        #expect(status["state"] == .string("locker-failing"))
        #expect(status["locker"]?["state"] == .string("failing"))
        #expect(status["locker"]?["next_try_in_ms"]?.integer == 1000)
        #expect(status["last_locker_failure"]?["reason"]?.string?.contains("exited with status 1") == true)
    }

    @Test("`lock` during the backoff tries again now; the count restarts after a locker that held")
    func lockDuringBackoff() {
        var s = LockerTests.locked()
        s.lockerExits(.exited(1))  // restarted at once
        s.advance(by: .ms(50))
        s.lockerExits(.exited(1))  // the next try in 1 s
        s.advance(by: .ms(50))
        guard case .retrying(let at, _) = s.machine.locker else {
            Issue.record("expected a retry, got \(s.machine.locker)")
            return
        }
        #expect(at - s.now == .ms(950))
        #expect(s.send(.lockNow).lockerStarts == 1, "tried again now")
        s.wait(for: .ms(10))  // this one holds the screen
        guard case .running(_, _, .covered, _) = s.machine.locker else {
            Issue.record("expected a covering locker, got \(s.machine.locker)")
            return
        }
        s.advance(by: .seconds(5))  // held for more than the grab deadline: a working locker
        #expect(s.lockerExits(.killed(signal: 9)).lockerStarts == 1, "the next failure is again restarted at once")
    }

    @Test("input while the locker keeps failing does not stop the retries: the screen may be open")
    func inputDoesNotStopTheRetries() {
        var s = LockerTests.locked()
        s.lockerExits(.exited(1))
        s.advance(by: .ms(100))
        s.lockerExits(.exited(1))
        guard case .retrying(let retryAt, _) = s.machine.locker else {
            Issue.record("expected a retry, got \(s.machine.locker)")
            return
        }
        s.advance(by: .ms(400))
        s.input()
        #expect(s.machine.nextDeadline == retryAt, "the retry still comes")
        s.wakeAtDeadline()
        #expect(s.actions.lockerStarts == 3)
    }

    // Issue #28, row 6: a locker can let go of the keyboard while it runs.
    @Test("while a locker runs the grab is probed again every 5 s (12 a minute); while unlocked the machine wakes only for the lock")
    func grabProbedAgainWhileLocked() {
        var s = Story(flags: "--lock-after", "10m", "--on-unlock", "unlock-hook")
        #expect(s.machine.nextDeadline == Story.at(.minutes(10)), "a wake-up before the lock while idle")
        s = LockerTests.locked()
        let coveredAt = s.now
        #expect(s.machine.nextDeadline == coveredAt + .seconds(5))
        let minute = s.wait(for: .minutes(1))
        #expect(minute.filter { $0 == .probeGrabs }.count == 12)
        #expect(s.machine.stateName == "locked")
        s.lockerExits(.exited(0))
        #expect(s.machine.nextDeadline == s.now + .minutes(10), "probing on after the unlock")
    }

    @Test("a locker that lets go of the keyboard while locked, and has not exited 1.5 s later, is not covering within 6.5 s, as one that never grabbed: an error, LockedHint false, not replaced; a grab again locks again")
    func lockerLetsGo() {
        var s = LockerTests.locked()
        s.lockerGrabsKeyboard = false
        let seen = s.wait(for: .seconds(5))
        #expect(seen.logs(.error).isEmpty, "perhaps the unlock: judged when the grace ends")
        #expect(s.machine.stateName == "locked")
        let lost = s.wait(for: s.machine.supervisor.letGoGrace)
        #expect(s.machine.stateName == "locker-not-covering")
        #expect(lost.logs(.error).contains { $0.contains("the locker let go of the keyboard") }, "\(lost.logs(.error))")
        #expect(lost.lockedHints == [false])
        let status = JSONValue.object(s.machine.statusFields(at: s.clock, lockerPid: 42))
        #expect(status["locker"]?["covers_screen"] == .bool(false))
        #expect(status["locker"]?["let_go"] == .bool(true))
        s.wait(for: .minutes(1))
        #expect(s.actions.lockerStarts == 1, "never a second locker")
        s.lockerGrabsKeyboard = true
        let again = s.wait(for: .seconds(5))
        #expect(s.machine.stateName == "locked")
        #expect(again.lockedHints == [true])
    }

    @Test("the end of a process the machine does not track as the locker changes nothing")
    func otherProcessesEnding() {
        var s = LockerTests.locked("--notify-before", "1m", "--notifier", "warn")
        let ended = s.send(.processEnded(.stage(0), .exited(3)))
        #expect(ended.logs(.warning).first?.contains("stage #1 exited with status 3") == true)
        s.send(.processEnded(.onUnlock, .killed(signal: 9)))
        #expect(s.machine.isLocked)
        #expect(s.actions.lockerStarts == 1)
        var unlocked = LockerTests.locked()
        unlocked.advance(by: .seconds(5))
        unlocked.lockerExits(.exited(0))
        #expect(unlocked.lockerExits(.exited(1)).isEmpty, "a second end of the same locker is ignored")
    }
}

/// Found by the migration of these tests: how long a locker ran is waking time.
@Suite("A suspend right after a lock is not time the locker held the screen")
struct LockerAcrossASuspendTests {
    @Test("the grab deadline counts waking time: 5 ms awake and an hour asleep are not 3 s without a grab")
    func grabDeadlineAcrossASuspend() {
        var s = Story(flags: "--lock-after", "10m")
        s.lockerGrabsKeyboard = false  // not grabbed yet when the lid closes (xsecurelock takes a while)
        s.wait(until: Story.at(.minutes(10)))
        s.advance(by: .ms(5))
        let resumed = s.suspend(for: .hours(1))  // `xidlelock lock; systemctl suspend`
        s.lockerGrabsKeyboard = true  // it grabs a moment after the resume
        let after = s.wait(for: .seconds(1))
        #expect(resumed.logs(.error).isEmpty, "5 ms awake is not 3 s without a grab")
        #expect(!resumed.contains(.announce(.lockerNotCovering(runningFor: .seconds(3)))))
        #expect(after.contains { if case .announce(.locked) = $0 { true } else { false } })
        #expect(s.machine.stateName == "locked")
    }

    @Test("an exit 0 a few milliseconds of waking time after the start is no unlock, even with a suspend in between")
    func shortestHoldAcrossASuspend() {
        var s = Story(flags: "--lock-after", "10m", "--on-unlock", "unlock-hook")
        s.lockerGrabsKeyboard = false  // a wrapper that backgrounds the locker, or `true`
        s.wait(until: Story.at(.minutes(10)))
        s.advance(by: .ms(5))
        s.suspend(for: .hours(1))  // the lid closes before the locker's exit is reaped
        let ended = s.lockerExits(.exited(0))  // it returned at once: 5 ms of waking time
        #expect(ended.logs(.error).contains { $0.contains("without holding the screen") })
        #expect(ended.commands(.onUnlock).isEmpty)
        #expect(s.machine.locker != .unlocked, "the screen may be open: the locker is started again")
    }
}
