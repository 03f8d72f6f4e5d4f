import IdleCore
import Testing

@Suite("The locker: one at a time, never killed, restarted when it fails")
struct LockerTests {
    /// A story locked at 10m idle.
    static func locked(_ extra: String...) -> Story {
        var s = Story(Story.config(["--on-unlock", "unlock-hook"] + extra))
        s.wait(until: Story.at(.minutes(10)))
        #expect(s.actions.lockerStarts == 1)
        return s
    }

    @Test("no second locker while one runs, however long the idle time grows")
    func neverTwoLockers() {
        var s = LockerTests.locked("--notify-before", "1m", "--notifier", "warn")
        #expect(s.machine.nextDeadline == nil, "nothing left to wake for while locked and away")
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
            s.wait(for: .minutes(1))
            #expect(s.machine.isLocked)
            s.advance(by: .seconds(10))
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
            s.wait(for: .minutes(1))
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

    @Test("a non-zero exit after two seconds is a warning and taken as unlocked")
    func lateNonZeroExitIsAnUnlock() {
        var s = LockerTests.locked()
        s.advance(by: .seconds(2))
        let ended = s.lockerExits(.exited(1))
        #expect(ended.lockerStarts == 0)
        #expect(ended.logs(.error).isEmpty)
        #expect(ended.logs(.warning).first?.contains("taking that as unlocked") == true)
        #expect(ended.commands(.onUnlock) == ["unlock-hook"])
        #expect(s.machine.locker == .unlocked)
        #expect(s.machine.nextDeadline == s.now + .minutes(10))
    }

    @Test("a non-zero exit just inside the two seconds is a failure")
    func nonZeroExitInsideTheWindowIsAFailure() {
        var s = LockerTests.locked()
        s.advance(by: .seconds(2) - .ms(1))
        let ended = s.lockerExits(.exited(1))
        #expect(ended.lockerStarts == 1)
        #expect(ended.logs(.error).count == 1)
    }

    @Test("unlocking within two seconds is still an unlock")
    func quickUnlock() {
        var s = LockerTests.locked()
        s.advance(by: .ms(500))
        let ended = s.lockerExits(.exited(0))
        #expect(ended.lockerStarts == 0)
        #expect(ended.commands(.onUnlock) == ["unlock-hook"])
        #expect(s.machine.locker == .unlocked)
    }

    @Test("input while the locker keeps failing stops the retries")
    func inputStopsTheRetries() {
        var s = LockerTests.locked()
        s.lockerExits(.exited(1))
        s.advance(by: .ms(100))
        s.lockerExits(.exited(1))
        guard case .retrying = s.machine.locker else {
            Issue.record("expected a retry, got \(s.machine.locker)")
            return
        }
        let retryAt = s.machine.nextDeadline
        s.advance(by: .ms(400))
        let back = s.input()
        #expect(back.logs(.warning).contains { $0.contains("the user is back") })
        #expect(s.machine.locker == .unlocked)
        #expect(s.machine.nextDeadline == s.now + .minutes(10))
        #expect(s.machine.nextDeadline != retryAt)
        s.wait(for: .minutes(10) - .ms(1))
        #expect(s.actions.lockerStarts == 2, "no restart at the old retry time")
        s.wait(for: .ms(1))
        #expect(s.actions.lockerStarts == 3, "the next lock comes after the lock time")
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
        unlocked.lockerExits(.exited(0))
        #expect(unlocked.lockerExits(.exited(1)).isEmpty, "a second end of the same locker is ignored")
    }
}
