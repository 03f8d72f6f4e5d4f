import IdleCore
import Testing

/// Dim at 2m (undim on return), a log line at 2m, lock at 10m, screen off at 20m (on at return),
/// given out of order on purpose.
let customStages = AgentConfig(stages: [
    Stage(name: "screen off", role: .custom, idleTime: .minutes(20), command: "xset dpms force off",
          resumeCommand: "xset dpms force on"),
    Stage(name: "lock", role: .lock, idleTime: .minutes(10), command: "slock"),
    Stage(name: "dim", role: .custom, idleTime: .minutes(2), command: "dim", resumeCommand: "undim"),
    Stage(name: "note", role: .custom, idleTime: .minutes(2), command: "logger idle"),
])

@Suite("Stages of one's own, with resume commands")
struct CustomStageTests {
    @Test("stages are kept in idle-time order, equal times in the order given")
    func order() {
        #expect(customStages.stages.map(\.name) == ["dim", "note", "lock", "screen off"])
        #expect(customStages.lockStage?.command == "slock")
    }

    @Test("stages fire in idle-time order, each at its time and once per idle period")
    func fireInOrderOnce() {
        var s = Story(customStages)
        var deadlines: [BoottimeInstant] = []
        while let deadline = s.machine.nextDeadline, deadline <= Story.at(.minutes(20)) {
            deadlines.append(deadline)
            s.wakeAtDeadline()
        }
        // 10 ms after the lock the grab probe looks for the locker's keyboard grab, then
        // again every 5 s while it runs.
        let reprobes = (1...119).map { Story.at(.minutes(10) + .ms(10) + .seconds(5 * $0)) }
        #expect(deadlines == [Story.at(.minutes(2)), Story.at(.minutes(10)), Story.at(.minutes(10) + .ms(10))] + reprobes + [Story.at(.minutes(20))])
        s.wait(for: .hours(5))
        #expect(s.actions.started == [.stage(0), .stage(1), .locker, .stage(3)])
        #expect(s.actions.commands(.stage(3)) == ["xset dpms force off"])
    }

    @Test("resume commands run when activity returns, only for the stages that fired, once")
    func resumeCommandsRunOnActivity() {
        var s = Story(customStages)
        s.wait(until: Story.at(.minutes(15)))
        let mark = s.actions.count
        let back = s.input()
        #expect(back.started == [.resume(0)], "dim fired, screen off did not")
        #expect(back.commands(.resume(0)) == ["undim"])
        #expect(back.runs(.resume(0)).first?["XIDLELOCK_EVENT"] == "resume")
        #expect(back.runs(.resume(0)).first?["XIDLELOCK_STAGE"] == "dim")
        s.advance(by: .seconds(5))
        s.rawInput()
        #expect(Array(s.actions[mark...]).started == [.resume(0)], "no second resume for the same firing")
    }

    @Test("after the user returns, the stages fire again in the next idle period, even while locked")
    func nextPeriodFiresAgain() {
        var s = Story(customStages)
        s.wait(until: Story.at(.minutes(25)))
        s.input()
        #expect(Array(s.actions.started.suffix(2)) == [.resume(0), .resume(3)])
        s.wait(for: .minutes(25))
        #expect(s.actions.runs(.stage(0)).count == 2)
        #expect(s.actions.runs(.stage(1)).count == 2)
        #expect(s.actions.runs(.stage(3)).count == 2)
        #expect(s.actions.lockerStarts == 1, "the locker still runs: no second one")
    }

    @Test("a custom stage's hook sees its name as the event and the stage")
    func customStageEnvironment() {
        var s = Story(customStages)
        let fired = s.wait(until: Story.at(.minutes(2)))
        let env = fired.runs(.stage(0)).first
        #expect(env?["XIDLELOCK_EVENT"] == "dim")
        #expect(env?["XIDLELOCK_STAGE"] == "dim")
        #expect(env?["XIDLELOCK_IDLE_MS"] == "120000")
    }
}

@Suite("Stopping the agent")
struct StopTests {
    @Test("stopping runs the pending resume commands and leaves the locker running")
    func stopKeepsTheLocker() {
        var s = Story(customStages)
        s.wait(until: Story.at(.minutes(12)))
        #expect(s.machine.isLocked)
        let stopped = s.send(.stop)
        #expect(stopped.started == [.resume(0)])
        #expect(stopped.terminated.isEmpty)
        #expect(stopped.logs(containing: "the locker keeps running").count == 1)
        #expect(s.machine.isLocked)
    }

    @Test("stopping with nothing pending only says so")
    func stopWithNothingPending() {
        var s = Story(flags: "--lock-after", "10m", "--notify-before", "1m", "--notifier", "warn")
        s.wait(until: Story.at(.minutes(9) + .seconds(30)))
        let stopped = s.send(.stop)
        #expect(stopped.started.isEmpty)
        #expect(!stopped.terminated.contains(.locker))
        #expect(stopped.logs(.info) == ["stopping"])
    }
}

@Suite("What hooks are told")
struct HookEnvironmentTests {
    @Test("the locker gets the event, the idle time, the time asleep and the stage")
    func lockEnvironment() {
        var s = Story(flags: "--lock-after", "10m")
        let env = s.wait(until: Story.at(.minutes(10))).runs(.locker).first
        #expect(env?["XIDLELOCK_EVENT"] == "lock")
        #expect(env?["XIDLELOCK_IDLE_MS"] == "600000")
        #expect(env?["XIDLELOCK_SUSPEND_GAP_MS"] == "0")
        #expect(env?["XIDLELOCK_STAGE"] == "lock")
        #expect(env?["XIDLELOCK_LOCKED_MS"] == nil)
    }

    @Test("the notifier gets its own event and stage")
    func notifyEnvironment() {
        var s = Story(Story.config(NotifyTests.flags))
        let env = s.wait(until: Story.at(.minutes(9))).runs(.stage(0)).first
        #expect(env?["XIDLELOCK_EVENT"] == "notify")
        #expect(env?["XIDLELOCK_STAGE"] == "notify")
        #expect(env?["XIDLELOCK_IDLE_MS"] == "540000")
        #expect(env?["XIDLELOCK_SUSPEND_GAP_MS"] == "0")
    }

    @Test("--on-unlock gets the unlock event and how long the screen was locked")
    func unlockEnvironment() {
        var s = Story(flags: "--lock-after", "10m", "--on-unlock", "unlock-hook")
        s.wait(until: Story.at(.minutes(10) + .ms(10)))  // the probe sees the locker's grab
        s.advance(by: .seconds(42) - .ms(10))
        let env = s.lockerExits(.exited(0)).runs(.onUnlock).first
        #expect(env?["XIDLELOCK_EVENT"] == "unlock")
        #expect(env?["XIDLELOCK_LOCKED_MS"] == "42000")
        #expect(env?["XIDLELOCK_STAGE"] == "lock")
        #expect(env?["XIDLELOCK_IDLE_MS"] == "642000", "how long the user was away: 10m idle + 42s locked")
    }

    @Test("a restarted locker is told the idle time at its restart")
    func restartEnvironment() {
        var s = Story(flags: "--lock-after", "10m")
        s.wait(until: Story.at(.minutes(10)))
        s.advance(by: .ms(250))
        let env = s.lockerExits(.killed(signal: 11)).runs(.locker).first
        #expect(env?["XIDLELOCK_EVENT"] == "lock")
        #expect(env?["XIDLELOCK_IDLE_MS"] == "600250")
    }
}

/// PCI DSS 8.2.8 staged: lock at 15 minutes, log off after an hour. The log-off stage
/// comes after the lock and must fire while the locker still holds the screen.
@Suite("A stage after the lock (log off after a time locked)")
struct StageAfterLockTests {
    static let flags = ["--lock-after", "15m", "--stage", "logoff=1h:loginctl terminate-session \"$XDG_SESSION_ID\""]

    @Test("the log-off stage fires at 1h of idle while the locker runs, once")
    func firesWhileLocked() {
        var s = Story(Story.config(Self.flags))
        s.expectLock(1, exactlyAt: Story.at(.minutes(15)))
        s.wait(until: Story.at(.hours(1)) - .ms(1))
        #expect(s.actions.runs(.stage(1)).isEmpty, "not before its time")
        let fired = s.wait(until: Story.at(.hours(1)))
        #expect(fired.commands(.stage(1)) == ["loginctl terminate-session \"$XDG_SESSION_ID\""])
        #expect(fired.runs(.stage(1)).first?["XIDLELOCK_IDLE_MS"] == "3600000")
        #expect(s.machine.isLocked && s.machine.supervisor.covers, "the screen stays locked")
        s.wait(for: .hours(5))
        #expect(s.actions.runs(.stage(1)).count == 1, "once per idle period")
        #expect(s.actions.lockerStarts == 1)
    }

    @Test("a locker that fails and is restarted does not move the log-off")
    func firesWhileTheLockerIsRestarted() {
        var s = Story(Story.config(Self.flags))
        s.wait(until: Story.at(.minutes(30)))
        s.lockerExits(.killed(signal: 9))
        s.wait(until: Story.at(.hours(1)))
        #expect(s.actions.runs(.stage(1)).count == 1)
        #expect(s.actions.lockerStarts == 2)
    }

    @Test("input at the lock screen (a failed password, a nudged mouse) is activity: the hour starts again")
    func inputAtTheLockScreenRestartsTheCount() {
        var s = Story(Story.config(Self.flags))
        s.wait(until: Story.at(.minutes(30)))
        s.input()
        s.wait(until: Story.at(.hours(1)))
        #expect(s.actions.runs(.stage(1)).isEmpty)
        s.wait(until: Story.at(.minutes(90)))
        #expect(s.actions.runs(.stage(1)).count == 1, "an hour after the last input")
        #expect(s.actions.lockerStarts == 1, "still the first locker")
    }
}
