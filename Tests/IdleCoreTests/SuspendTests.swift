import IdleCore
import Testing

@Suite("Suspend gaps")
struct SuspendTests {
    @Test("a suspend spanning the lock time locks right on resume, with the gap in the hook's environment")
    func locksOnResume() {
        var s = Story(flags: "--lock-after", "10m")
        s.advance(by: .minutes(4))
        let resumed = s.suspend(for: .minutes(7))
        #expect(s.serverIdle == .minutes(4), "the X server's clock excludes the suspend")
        let lock = resumed.runs(.locker)
        #expect(lock.count == 1, "the server's reading after resume must not cancel the lock")
        #expect(lock.first?["XIDLELOCK_SUSPEND_GAP_MS"] == "420000")
        #expect(lock.first?["XIDLELOCK_IDLE_MS"] == "660000")
        #expect(s.machine.lastSuspendGap?.noticedAt == s.now)
        #expect(s.machine.lastSuspendGap?.length == .minutes(7))
        #expect(resumed.logs(containing: "suspend gap").count == 1)
    }

    @Test("a suspend ending before the lock time locks at the lock time, not before")
    func shortSuspendLocksOnTime() {
        var s = Story(flags: "--lock-after", "10m")
        s.advance(by: .minutes(2))
        #expect(s.suspend(for: .minutes(3)).started.isEmpty, "no deadline passed while asleep")
        #expect(s.machine.idle(at: s.clock) == .minutes(5))
        s.expectLock(1, exactlyAt: Story.at(.minutes(10)))
        #expect(s.actions.runs(.locker).first?["XIDLELOCK_SUSPEND_GAP_MS"] == "180000")
    }

    @Test("with --suspend-resets-idle the gap restarts the idle time")
    func suspendResetsIdle() {
        var s = Story(flags: "--lock-after", "10m", "--suspend-resets-idle")
        s.advance(by: .minutes(4))
        let resumed = s.suspend(for: .minutes(7))
        #expect(resumed.lockerStarts == 0)
        #expect(resumed.logs(containing: "the idle time restarts").count == 1)
        #expect(s.machine.idle(at: s.clock) == .zero)
        #expect(s.machine.lastSuspendGap?.length == .minutes(7))
        let resumedAt = s.now
        s.expectLock(1, exactlyAt: resumedAt + .minutes(10))
    }

    @Test("gaps under 100 ms are clock jitter, not a suspend, and do not add up")
    func tinyGapsAreIgnored() {
        var s = Story(flags: "--lock-after", "10m")
        s.advance(by: .minutes(1))
        s.suspend(for: .ms(99))
        s.wake()
        #expect(s.machine.lastSuspendGap == nil)
        s.advance(by: .seconds(1))
        s.suspend(for: .ms(60))
        s.wake()
        s.suspend(for: .ms(60))
        s.wake()
        #expect(s.machine.lastSuspendGap == nil)
        #expect(s.actions.logs(containing: "suspend gap").isEmpty)
        s.suspend(for: .ms(100))
        s.wake()
        #expect(s.machine.lastSuspendGap?.noticedAt == s.now)
        #expect(s.machine.lastSuspendGap?.length == .ms(100))
    }

    @Test("the last gap is kept until the next one")
    func lastGapIsKept() {
        var s = Story(flags: "--lock-after", "10m")
        s.advance(by: .minutes(1))
        s.suspend(for: .minutes(2))
        s.input()
        let first = s.machine.lastSuspendGap
        #expect(first?.noticedAt == s.now)
        #expect(first?.length == .minutes(2))
        s.advance(by: .minutes(1))
        s.input()
        #expect(s.machine.lastSuspendGap == first)
        s.suspend(for: .seconds(5))
        s.wait(for: .minutes(30))
        #expect(s.machine.lastSuspendGap?.length == .seconds(5))
    }

    @Test("input after a resume restarts the idle time, gap or not")
    func inputAfterResume() {
        var s = Story(flags: "--lock-after", "10m")
        s.advance(by: .minutes(4))
        s.suspend(for: .minutes(5))
        let back = s.input()
        #expect(back.lockerStarts == 0)
        #expect(s.machine.idle(at: s.clock) == .zero)
        #expect(s.machine.lastSuspendGap?.length == .minutes(5))
    }

    @Test("a server reading after the resume wake does not cancel the lock")
    func laterServerReadingAfterResume() {
        // Notify at 9m, lock at 10m. Idle 5m, asleep 3m: no deadline passes while asleep,
        // so the gap is noticed at the 9m wake. The 10m wake reads the server again,
        // whose counter (CLOCK_MONOTONIC) still lacks the 3 minutes asleep.
        var s = Story(Story.config(NotifyTests.flags))
        s.advance(by: .minutes(5))
        s.suspend(for: .minutes(3))
        let warned = s.wait(until: Story.at(.minutes(9)))
        #expect(warned.runs(.stage(0)).count == 1)
        #expect(s.machine.lastSuspendGap?.length == .minutes(3))
        s.advance(to: Story.at(.minutes(10)))
        #expect(s.serverIdle == .minutes(7))
        let due = s.wake()
        #expect(due.terminated.isEmpty)
        #expect(due.lockerStarts == 1)
        #expect(s.machine.lastActivity == Story.origin.boottime)
    }

    @Test("two suspends in one idle period both count toward the lock")
    func twoGapsInOnePeriod() {
        var s = Story(flags: "--lock-after", "10m")
        s.advance(by: .minutes(1))
        s.suspend(for: .minutes(2))
        s.advance(by: .minutes(1))
        s.wake()  // e.g. a hook ended: any event notices the gap
        #expect(s.machine.lastSuspendGap?.length == .minutes(2))
        s.suspend(for: .minutes(3))  // 7m idle at resume
        s.wait(until: Story.at(.minutes(10)))
        #expect(s.actions.lockerStarts == 1)
        #expect(s.actions.runs(.locker).first?["XIDLELOCK_SUSPEND_GAP_MS"] == "300000")
    }

    @Test("with --suspend-resets-idle the warning comes again before the next lock")
    func suspendResetsIdleRestartsTheStages() {
        var s = Story(Story.config(NotifyTests.flags + ["--suspend-resets-idle"]))
        s.wait(until: Story.at(.minutes(9) + .seconds(30)))
        #expect(s.actions.runs(.stage(0)).count == 1)
        let resumed = s.suspend(for: .hours(1))
        #expect(resumed.lockerStarts == 0)
        let resumedAt = s.now
        s.wait(until: resumedAt + .minutes(10))
        #expect(s.actions.lockerStarts == 1)
        #expect(s.actions.runs(.stage(0)).count == 2, "warned again at 9m after the resume")
        #expect(resumed.terminated == [.stage(0)], "the old warning is ended when the idle time restarts")
    }

    @Test("with --suspend-resets-idle the idle time restarts at the resume, not at the next wake")
    func suspendResetsIdleAtResume() {
        // Idle 2m, asleep 3m; the user stays away. The agent wakes at the resume.
        var s = Story(flags: "--lock-after", "10m", "--suspend-resets-idle")
        s.advance(by: .minutes(2))
        s.suspend(for: .minutes(3))
        let resumedAt = s.now
        s.wait(until: resumedAt + .minutes(10))
        #expect(s.actions.lockerStarts == 1)
        s.wait(until: resumedAt + .minutes(15))
        #expect(s.actions.lockerStarts == 1)
    }

    @Test("with --suspend-resets-idle, a locker that fails after a resume still leaves the next lock coming")
    func lockerEndingAfterResumeKeepsTheNextLock() {
        var s = Story(flags: "--lock-after", "10m", "--suspend-resets-idle")
        s.wait(until: Story.at(.minutes(10)))
        #expect(s.machine.isLocked)
        #expect(s.suspend(for: .hours(1)).started.isEmpty, "nothing starts while locked")
        let ended = s.lockerExits(.exited(1))  // e.g. the locker trips over the display on resume
        #expect(ended.logs(.error).contains { $0.contains("the screen may NOT be locked") })
        #expect(ended.lockerStarts == 1, "a failure: locked again at once, not taken as an unlock")
        s.wait(for: .seconds(30))
        s.lockerExits(.exited(0))  // the user comes back and unlocks
        #expect(s.machine.locker == .unlocked)
        #expect(s.machine.nextDeadline == s.now + .minutes(10))
        s.wait(for: .hours(2))
        #expect(s.actions.lockerStarts == 3, "locked again after 10m of idle")
    }

    @Test("with --suspend-resets-idle, coming back after a resume runs the resume commands")
    func inputAfterResumeRunsResumeCommands() {
        var config = customStages
        config.suspendCountsAsIdle = false
        var s = Story(config)
        s.wait(until: Story.at(.minutes(25)))
        #expect(s.actions.started == [.stage(0), .stage(1), .locker, .stage(3)])
        let mark = s.actions.count
        s.suspend(for: .hours(1))
        s.input()
        #expect(Array(s.actions[mark...]).started == [.resume(0), .resume(3)])
    }
}
