import IdleCore
import Testing

@Suite("Locking after the idle time")
struct LockingTests {
    @Test("locks exactly at the lock time and not a millisecond before")
    func locksAtTheLockTime() {
        var s = Story(flags: "--lock-after", "5m")
        #expect(s.machine.nextDeadline == Story.at(.minutes(5)))
        s.advance(by: .minutes(5) - .ms(1))
        #expect(s.wake().lockerStarts == 0)
        #expect(!s.machine.isLocked)
        #expect(s.machine.nextDeadline == Story.at(.minutes(5)))
        s.advance(by: .ms(1))
        let actions = s.wake()
        #expect(actions.commands(.locker) == ["lock-screen"])
        #expect(s.machine.isLocked)
        #expect(s.actions.lockerStarts == 1)
    }

    @Test("input defers the lock and the deadline moves with it")
    func inputDefersTheLock() {
        var s = Story(flags: "--lock-after", "5m")
        s.advance(by: .minutes(3))
        s.input()
        #expect(s.machine.nextDeadline == Story.at(.minutes(8)))
        s.expectLock(1, exactlyAt: Story.at(.minutes(8)))
    }

    @Test("input the machine did not listen to still defers the lock, through the server's counter")
    func unheardInputDefersTheLock() {
        var s = Story(flags: "--lock-after", "5m")
        s.input()
        #expect(!s.machine.listensForInput)
        s.advance(by: .minutes(1))
        #expect(s.input().isEmpty, "the edge does not report input while the machine does not listen")
        s.advance(by: .minutes(3))
        s.input()  // at 4m, heard only by the X server
        s.wait(until: Story.at(.minutes(5)))
        #expect(s.actions.lockerStarts == 0)
        #expect(s.machine.lastActivity == Story.at(.minutes(4)))
        #expect(s.machine.nextDeadline == Story.at(.minutes(9)))
        s.expectLock(1, exactlyAt: Story.at(.minutes(9)))
    }

    @Test("idle time from before the agent started counts")
    func idleBeforeStartCounts() {
        var s = Story(flags: "--lock-after", "5m", idleAtStart: .minutes(2))
        #expect(s.machine.idle(at: s.clock) == .minutes(2))
        #expect(s.machine.nextDeadline == Story.at(.minutes(3)))
        let already = Story(flags: "--lock-after", "5m", idleAtStart: .minutes(6))
        #expect(already.actions.runs(.locker).first?["XIDLELOCK_IDLE_MS"] == "360000")
        s.wait(until: Story.at(.minutes(3)))
        #expect(s.actions.lockerStarts == 1)
    }

    @Test("the idle time is the time since the last activity, on the boottime clock")
    func idleTime() {
        var s = Story(flags: "--lock-after", "5m")
        s.advance(by: .minutes(2))
        s.input()
        s.advance(by: .seconds(30))
        #expect(s.machine.idle(at: s.clock) == .seconds(30))
        #expect(s.machine.lastActivity == Story.at(.minutes(2)))
        s.suspend(for: .minutes(1))
        #expect(s.machine.idle(at: s.clock) == .seconds(90))
    }

    @Test("an unreadable server counter does not stop the lock")
    func unreadableServerStillLocks() {
        var s = Story(flags: "--lock-after", "5m")
        s.advance(to: Story.at(.minutes(5)))
        s.send(.wake(serverIdle: nil))
        #expect(s.actions.lockerStarts == 1)
    }
}

@Suite("Cross-checking raw input against the X server's counter")
struct CrossCheckTests {
    @Test("by default a screensaver reset without input counts as activity")
    func resetCountsByDefault() {
        var s = Story(flags: "--lock-after", "5m")
        s.advance(by: .minutes(3))
        s.screensaverReset()
        s.wait(until: Story.at(.minutes(5)))
        #expect(s.actions.lockerStarts == 0)
        #expect(s.machine.lastActivity == Story.at(.minutes(3)))
        #expect(s.actions.logs(containing: "reset without input").count == 1)
        s.expectLock(1, exactlyAt: Story.at(.minutes(8)))
    }

    @Test("a playing video keeps the screen unlocked, and the disagreement is logged once")
    func videoKeepsTheScreenOn() {
        var s = Story(flags: "--lock-after", "5m")
        for _ in 0..<120 {  // an hour of video, a reset every 30 s
            s.wait(for: .seconds(30))
            s.screensaverReset()
        }
        #expect(s.actions.lockerStarts == 0)
        #expect(s.actions.logs(containing: "reset without input").count == 1)
        #expect(s.actions.logs(containing: "counting that as activity").count == 1)
        s.wait(for: .minutes(5))  // the video ends
        #expect(s.actions.lockerStarts == 1)
    }

    @Test("with --ignore-screensaver-reset a playing video does not keep the screen unlocked")
    func ignoredResetsDoNotDefer() {
        var s = Story(flags: "--lock-after", "5m", "--ignore-screensaver-reset")
        for _ in 0..<9 {
            s.wait(for: .seconds(30))
            s.screensaverReset()
        }
        #expect(s.actions.lockerStarts == 0)
        s.wait(until: Story.at(.minutes(5)))
        #expect(s.actions.lockerStarts == 1)
        #expect(s.machine.lastActivity == Story.origin.boottime)
        #expect(s.actions.logs(containing: "ignoring it (--ignore-screensaver-reset)").count == 1)
    }

    @Test("with --ignore-screensaver-reset, server activity while listening was paused is taken as input")
    func pausedListeningAttributesServerActivityToInput() {
        var s = Story(flags: "--lock-after", "5m", "--ignore-screensaver-reset")
        s.input()
        #expect(!s.machine.listensForInput)
        s.advance(by: .ms(500))
        s.input()  // not reported: the machine does not listen
        s.wakeAtDeadline()  // listening resumes after 1 s
        #expect(s.clock.boottime == Story.at(.seconds(1)))
        #expect(s.machine.lastActivity == Story.at(.ms(500)))
        #expect(s.actions.logs(containing: "reset without input").isEmpty)
        s.wait(until: Story.at(.minutes(5)))
        #expect(s.actions.lockerStarts == 0)
        s.wait(until: Story.at(.minutes(5) + .ms(500)))
        #expect(s.actions.lockerStarts == 1)
    }

    @Test("raw input the server's counter missed is trusted, and that is logged once")
    func rawInputTheServerMissedIsTrusted() {
        var s = Story(flags: "--lock-after", "5m")
        s.advance(by: .minutes(2))
        s.send(.input)  // the fake server's counter is not reset
        s.advance(to: Story.at(.minutes(5)))
        #expect(s.wake().lockerStarts == 0, "the server says idle 5m, raw input says 3m")
        s.advance(by: .minutes(1))
        s.wake()
        #expect(s.actions.logs(containing: "did not count").count == 1)
        s.wait(until: Story.at(.minutes(7)))
        #expect(s.actions.lockerStarts == 1)
    }
}

@Suite("Listening to raw input only when it matters")
struct ListeningTests {
    @Test("listening pauses after input and resumes at the next deadline")
    func pausesUntilTheNextDeadline() {
        var s = Story(flags: "--lock-after", "5m", "--notify-before", "1m", "--notifier", "warn")
        #expect(s.machine.listensForInput)
        s.advance(by: .minutes(1))
        s.input()
        #expect(!s.machine.listensForInput)
        #expect(s.machine.nextDeadline == Story.at(.minutes(5)))
        s.advance(to: Story.at(.minutes(5)) - .ms(1))
        s.wake()
        #expect(!s.machine.listensForInput)
        s.wakeAtDeadline()
        #expect(s.machine.listensForInput)
        #expect(s.actions.runs(.stage(0)).count == 1, "the notifier at 4m idle")
    }

    @Test("with --ignore-screensaver-reset listening resumes one second after input")
    func pausesOneSecondWhenResetsAreIgnored() {
        var s = Story(flags: "--lock-after", "5m", "--ignore-screensaver-reset")
        s.advance(by: .minutes(1))
        s.input()
        #expect(!s.machine.listensForInput)
        #expect(s.machine.nextDeadline == Story.at(.minutes(1) + .seconds(1)))
        s.wakeAtDeadline()
        #expect(s.machine.listensForInput)
        #expect(s.machine.nextDeadline == Story.at(.minutes(6)))
        #expect(s.actions.lockerStarts == 0)
    }

    @Test("input that keeps coming is heard once per deadline, not per event")
    func oneReportPerPeriod() {
        var s = Story(flags: "--lock-after", "5m")
        var reported = 0
        for _ in 0..<(20 * 60) {  // 20 minutes of input, one batch a second
            s.wait(for: .seconds(1))
            if s.machine.listensForInput { reported += 1 }
            s.input()
        }
        #expect(reported <= 6, "\(reported) input reports in 20 minutes")
        #expect(s.actions.lockerStarts == 0)
    }
}

@Suite("The warning before the lock")
struct NotifyTests {
    static let flags = ["--lock-after", "10m", "--notify-before", "1m", "--notifier", "warn"]

    @Test("the notifier runs at lock-after minus notify-before; input ends it and cancels the lock")
    func inputAfterTheWarningCancelsTheLock() {
        var s = Story(Story.config(NotifyTests.flags))
        #expect(s.machine.nextDeadline == Story.at(.minutes(9)))
        let warned = s.wakeAtDeadline()
        #expect(warned.commands(.stage(0)) == ["warn"])
        s.advance(by: .seconds(30))
        let back = s.input()
        #expect(back.terminated == [.stage(0)])
        #expect(!s.machine.isLocked)
        s.wait(until: Story.at(.minutes(19) + .seconds(30)) - .ms(1))
        #expect(s.actions.lockerStarts == 0, "the next lock is a full period after the input")
        #expect(s.actions.runs(.stage(0)).count == 2, "and it is warned about again")
        s.wait(until: Story.at(.minutes(19) + .seconds(30)))
        #expect(s.actions.lockerStarts == 1)
        #expect(!s.actions.terminated.contains(.locker))
    }

    @Test("without input the lock follows the warning")
    func lockFollowsTheWarning() {
        var s = Story(Story.config(NotifyTests.flags))
        s.wait(until: Story.at(.minutes(10)))
        #expect(s.actions.started == [.stage(0), .locker])
        #expect(s.actions.terminated.isEmpty)
    }

    @Test("no warning when the lock is due at the same time, after a suspend")
    func noWarningWhenTheLockIsDue() {
        var s = Story(Story.config(NotifyTests.flags))
        s.advance(by: .minutes(5))
        let resumed = s.suspend(for: .hours(1))
        #expect(resumed.started == [.locker])
        #expect(resumed.logs(.debug).contains { $0.contains("skipped") })
    }

    @Test("no warning while locked")
    func noWarningWhileLocked() {
        var s = Story(Story.config(NotifyTests.flags))
        s.wait(until: Story.at(.minutes(10)))
        #expect(s.machine.isLocked)
        s.advance(by: .minutes(2))
        s.input()  // typing at the locker's prompt, then giving up
        let mark = s.actions.count
        s.wait(for: .minutes(30))
        #expect(s.actions[mark...].filter { if case .run = $0 { true } else { false } }.isEmpty)
        #expect(s.machine.isLocked)
    }
}
