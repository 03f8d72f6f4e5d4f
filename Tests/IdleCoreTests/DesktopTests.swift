import IdleCore
import Testing

extension Array where Element == Action {
    var releasedSleep: Bool { contains(.releaseSleepDelay) }
    var lockedHints: [Bool] { compactMap { if case .setLockedHint(let b) = $0 { b } else { nil } } }
    var idleHints: [Bool] { compactMap { if case .setIdleHint(let b) = $0 { b } else { nil } } }
}

@Suite("The desktop: sleep, the session, logind's hints")
struct DesktopTests {
    @Test("before sleep the machine locks, and lets the system sleep once the locker covers the screen")
    func lockBeforeSleep() {
        var s = Story(flags: "--lock-after", "10m")
        s.wait(for: .minutes(2))
        let asked = s.send(.prepareForSleep(delayLimit: .ms(4500)))
        #expect(asked.lockerStarts == 1)
        #expect(!asked.releasedSleep, "the sleep must wait for the screen to be covered")
        // The grab probe sees the locker's grab 10 ms later: then the sleep may go.
        let covered = s.wait(for: .ms(10))
        #expect(covered.releasedSleep)
        #expect(covered.lockedHints == [true])
        #expect(s.actions.contains(.announce(.sleeping(covered: true))))
    }

    @Test("a locker that never covers the screen: the sleep is let go at the delay's end, loudly")
    func sleepDelayRunsOut() {
        var s = Story(flags: "--lock-after", "10m")
        s.lockerGrabsKeyboard = false
        s.send(.prepareForSleep(delayLimit: .ms(4500)))
        let early = s.wait(for: .ms(4499))
        #expect(!early.releasedSleep)
        let late = s.wait(for: .ms(1))
        #expect(late.releasedSleep)
        #expect(late.logs(.error).contains { $0.contains("did not cover the screen before the system had to sleep") })
        #expect(s.actions.contains(.announce(.sleeping(covered: false))))
    }

    // Seen on the real desktop (make test-desktop, TCG): a locker slowed by 1.5 s
    // grabbed after the 3 s probe had given up, and the sleep went at the delay's end
    // with "did not cover", though the screen was covered a second before.
    @Test("a locker that grabs after the grab deadline but within the sleep delay: the sleep goes at its grab")
    func lateGrabWithinSleepDelay() {
        var s = Story(flags: "--lock-after", "10m")
        s.lockerGrabsKeyboard = false
        s.send(.prepareForSleep(delayLimit: .ms(4500)))
        let given = s.wait(for: .ms(3500))
        #expect(given.contains(.announce(.lockerNotCovering(runningFor: .seconds(3)))))
        #expect(!given.releasedSleep)
        s.lockerGrabsKeyboard = true
        let grabbed = s.wait(for: .ms(10))
        #expect(grabbed.releasedSleep)
        #expect(grabbed.lockedHints == [true])
        #expect(s.actions.contains(.announce(.sleeping(covered: true))))
        #expect(!s.actions.logs(.error).contains { $0.contains("did not cover") })
        #expect(s.machine.stateName == "locked")
        // Once the sleep went, a covered locker is probed again only every 5 s.
        #expect(s.machine.supervisor.nextProbe(hurry: false) == s.machine.supervisor.lastProbe.map { $0.boottime + .seconds(5) })
    }

    @Test("already locked: the sleep goes at once; --no-lock-before-sleep never waits")
    func alreadyLockedOrOff() {
        var locked = Story(flags: "--lock-after", "1m")
        locked.wait(for: .minutes(1) + .ms(10))
        #expect(locked.send(.prepareForSleep(delayLimit: .seconds(4))).releasedSleep)
        var off = Story(flags: "--lock-after", "1m", "--no-lock-before-sleep")
        let sleeping = off.send(.prepareForSleep(delayLimit: .seconds(4)))
        #expect(sleeping.releasedSleep)
        #expect(sleeping.lockerStarts == 0)
    }

    @Test("the before-sleep and after-resume hooks run at their edges")
    func sleepHooks() {
        var s = Story(flags: "--before-sleep", "pre", "--after-resume", "post")
        #expect(s.send(.prepareForSleep(delayLimit: .seconds(4))).commands(.beforeSleep) == ["pre"])
        let resumed = s.send(.resumedFromSleep)
        #expect(resumed.commands(.afterResume) == ["post"])
        #expect(resumed.contains(.announce(.resumed)))
    }

    @Test("the session's Lock locks now; during the retry backoff it tries again now")
    func lockRequest() {
        var s = Story(flags: "--lock-after", "1h")
        #expect(s.send(.lockRequest(from: "logind")).lockerStarts == 1)
        s.advance(by: .seconds(2))
        s.lockerExits(.exited(1))  // fails: restarted at once
        s.advance(by: .ms(100))
        s.lockerExits(.exited(1))  // fails again: the next try in 1 s
        #expect(s.send(.lockRequest(from: "logind")).lockerStarts == 1, "tries again now")
    }

    @Test("time with another session in front is idle time: the lock comes on time while it is away")
    func inactiveSessionLocksOnTime() {
        var s = Story(flags: "--lock-after", "10m")
        s.wait(for: .minutes(1))
        s.send(.sessionActive(false))
        s.expectLock(1, exactlyAt: Story.at(.minutes(10)))
    }

    @Test("the switch back is no activity: the server's counter restarting at the switch is not input; input after it is")
    func switchBackIsNotActivity() {
        var s = Story(flags: "--lock-after", "10m")
        s.wait(for: .minutes(1))
        s.send(.sessionActive(false))
        s.wait(for: .minutes(5))
        s.send(.sessionActive(true))
        // Xorg restarts its idle counter as the VT comes back (measured on a real desktop).
        s.screensaverReset()
        s.wake()
        #expect(s.machine.idle(at: s.clock) == .minutes(6))
        s.expectLock(1, exactlyAt: Story.at(.minutes(10)))
        // After the switch, real input is activity as ever.
        var t = Story(flags: "--lock-after", "10m")
        t.wait(for: .minutes(2))
        t.send(.sessionActive(false))
        t.send(.sessionActive(true))
        t.wait(for: .seconds(5))
        t.input()
        #expect(t.machine.idle(at: t.clock) == .zero)
    }

    @Test("a locker that failed while the session was away is started again the moment it is back")
    func failedLockerRetriedAtSwitchBack() {
        var s = Story(flags: "--lock-after", "1m")
        s.send(.sessionActive(false))
        s.wait(until: Story.at(.minutes(1)))
        s.wait(for: .seconds(2))
        s.lockerExits(.exited(1))  // i3lock: cannot grab the keyboard
        s.wait(for: .ms(100))
        s.lockerExits(.exited(1))  // again: the next try waits out a backoff
        let before = s.actions.lockerStarts
        #expect(s.send(.sessionActive(true)).lockerStarts == 1, "not started again at the switch back")
        #expect(s.actions.lockerStarts == before + 1)
    }

    @Test("--lock-on-switch locks the moment another session comes to the front")
    func lockOnSwitch() {
        var s = Story(flags: "--lock-after", "1h", "--lock-on-switch")
        s.wait(for: .seconds(30))
        #expect(s.send(.sessionActive(false)).lockerStarts == 1)
    }

    @Test("IdleHint is set at the lock time and cleared by activity; LockedHint follows the locker")
    func hints() {
        var s = Story(flags: "--lock-after", "10m")
        let atLock = s.wait(for: .minutes(10) + .ms(10))
        #expect(atLock.idleHints == [true])
        #expect(atLock.lockedHints == [true])
        s.advance(by: .seconds(30))
        let unlocked = s.lockerExits(.exited(0))
        #expect(unlocked.lockedHints == [false])
        #expect(unlocked.idleHints == [false])
    }
}

@Suite("The X server's keep-awake signals")
struct XKeepAwakeTests {
    func reading(_ state: ScreenSaverReading.State, idle: Int64, til: Int64 = 0, timeout: Int64 = 600_000) -> ScreenSaverReading {
        ScreenSaverReading(state: state, idle: .ms(idle), tilOrSince: .ms(til), timeout: .ms(timeout))
    }

    @Test("xset s off while running is a hold; off at start is the user's setting")
    func saverOff() {
        var running = XKeepAwake(atStart: reading(.off, idle: 10, til: 599_990))
        #expect(running.update(reading(.disabled, idle: 20, timeout: 0)) == [.began(.saverOff)])
        #expect(running.update(reading(.disabled, idle: 30, timeout: 0)) == [])
        #expect(running.update(reading(.off, idle: 40, til: 599_960)) == [.ended(.saverOff)])
        var offAtStart = XKeepAwake(atStart: reading(.disabled, idle: 10, timeout: 0))
        #expect(offAtStart.offAtStart)
        #expect(offAtStart.update(reading(.disabled, idle: 20, timeout: 0)) == [])
    }

    @Test("a client's suspension shows only a second past the timeout: Off with nothing left to wait")
    func suspension() {
        var x = XKeepAwake(atStart: reading(.off, idle: 0, til: 600_000))
        #expect(x.update(reading(.off, idle: 600_000, til: 0)) == [], "right at the timeout the server may not have turned its saver on yet")
        #expect(x.update(reading(.off, idle: 601_000, til: 0)) == [.began(.suspended)])
        #expect(x.update(reading(.on, idle: 602_000, til: 2000)) == [.ended(.suspended)], "an unsuspended server says On")
        #expect(x.update(reading(.off, idle: 5, til: 599_995)) == [])
    }

    @Test("after the agent sets the timeout, Off with nothing left to wait is no suspension until the server's timer has run it")
    func timeoutJustSet() {
        func read(idle: Int64, since: Int64) -> ScreenSaverReading {
            ScreenSaverReading(state: .off, idle: .ms(idle), tilOrSince: .zero, timeout: .seconds(4), sinceTimeoutSet: .ms(since))
        }
        var x = XKeepAwake(atStart: reading(.off, idle: 3000, til: 597_000))
        #expect(x.update(read(idle: 6000, since: 3000)) == [], "idle past the timeout, but the timer restarted 3 s ago")
        #expect(x.update(read(idle: 7999, since: 4999)) == [])
        #expect(x.update(read(idle: 8000, since: 5000)) == [.began(.suspended)], "the timer ran 4 s and a second more: a client holds it")
        #expect(x.update(read(idle: 4999, since: 600_000)) == [.ended(.suspended)], "set long ago: the idle time tells, as before")
        #expect(x.update(read(idle: 5000, since: 600_000)) == [.began(.suspended)])
    }

    @Test("the saver timeout is lowered to 2 s before the lock time, only when it is longer; never when off")
    func timeoutToSet() {
        #expect(XKeepAwake.timeoutToSet(server: .minutes(10), lockAfter: .minutes(5)) == .seconds(298))
        #expect(XKeepAwake.timeoutToSet(server: .minutes(10), lockAfter: .minutes(15)) == nil)
        #expect(XKeepAwake.timeoutToSet(server: .zero, lockAfter: .minutes(5)) == nil)
        #expect(XKeepAwake.timeoutToSet(server: .minutes(10), lockAfter: .seconds(1)) == .seconds(1))
    }

    @Test("xset s activate is a forced activation; the timeout's own is not")
    func forcedActivation() {
        #expect(XKeepAwake.isForcedActivation(reading(.on, idle: 50, timeout: 600_000)))
        #expect(!XKeepAwake.isForcedActivation(reading(.on, idle: 600_010, timeout: 600_000)))
        #expect(!XKeepAwake.isForcedActivation(reading(.off, idle: 50)))
    }
}

@Suite("The before-sleep hook runs inside the sleep delay")
struct BeforeSleepTests {
    @Test("the sleep waits for the hook as well as for the lock, within the delay")
    func sleepWaitsForTheHook() {
        var s = Story(flags: "--before-sleep", "sync-mail")
        s.send(.prepareForSleep(delayLimit: .seconds(4)))
        let covered = s.wait(for: .ms(10))
        #expect(!covered.releasedSleep, "the hook still runs")
        let hookEnded = s.send(.processEnded(.beforeSleep, .exited(0)))
        #expect(hookEnded.releasedSleep)
    }

    @Test("a hook that hangs is cut off by the delay: the sleep goes, with a warning")
    func hangingHook() {
        var s = Story(flags: "--before-sleep", "hang", "--no-lock-before-sleep")
        s.send(.prepareForSleep(delayLimit: .seconds(4)))
        let end = s.wait(for: .seconds(4))
        #expect(end.releasedSleep)
        #expect(end.logs(.warning).contains { $0.contains("before-sleep hook did not end") })
    }
}

/// KDE's LockOnStart: an auto-login kiosk, a session restored without a password.
@Suite("--lock-at-start")
struct LockAtStartTests {
    @Test("the locker starts with the agent, before the sources have said what they hold")
    func locksAtOnce() {
        var s = Story(Story.config(["--lock-after", "1h", "--lock-at-start"]), awaiting: [.dbus, .logind, .x])
        #expect(s.actions.lockerStarts == 1, "\(s.actions)")
        #expect(s.actions.logs(containing: "lock requested by the start (--lock-at-start)").count == 1)
        let covered = s.wait(for: .ms(10))
        #expect(covered.lockedHints == [true], "LockedHint once the locker holds the screen")
    }

    @Test("a hold, a disable or input does not end it; a locker that returns at once or fails is started again")
    func heldUntilUnlock() {
        var s = Story(Story.config(["--lock-after", "1h", "--lock-at-start"]), awaiting: [.dbus])
        s.send(.holdsNow(HoldReport(HoldOwner(.dbus, ""), [HoldClaim(key: "1", who: "film", why: "playing", span: nil)])))
        s.send(.disable(for: nil))
        s.input()
        #expect(s.machine.isLocked)
        s.advance(by: .ms(50))
        s.lockerExits(.exited(0))  // returned at once: never held the screen
        s.wait(for: .seconds(1))
        s.lockerExits(.exited(1))
        s.wait(for: .seconds(5))
        #expect(s.actions.lockerStarts == 3, "\(s.actions.logs(.error))")
        #expect(s.machine.lockerActive)
        s.wait(for: .seconds(5))
        let unlocked = s.lockerExits(.exited(0))
        #expect(unlocked.lockedHints == [false])
        #expect(!s.machine.lockerActive)
    }

    @Test("without it the start waits, as ever; the policy's lock-at-start the user cannot undo")
    func flagAndPolicy() throws {
        var plain = Story(Story.config(["--lock-after", "1h"]), awaiting: [.dbus])
        plain.wait(for: .seconds(10))
        #expect(plain.actions.lockerStarts == 0)

        let sources = ConfigSources(read: { $0 == "/etc/xidlelock/policy" ? .text("lock-at-start\n") : .missing }, variable: { _ in nil })
        guard case .agent(let options) = try Invocation.parse(["--lock-after", "1h"], sources: sources) else {
            Issue.record("not an agent invocation")
            return
        }
        #expect(options.lockAtStart)
        #expect(options.policy?.changes == ["lock-at-start: the screen locks the moment the agent starts"])
        let setting = options.config(locker: "lock-screen").settings.first { $0.name == "lock-at-start" }
        #expect(setting?.from == "policy /etc/xidlelock/policy")
        var s = Story(options.config(locker: "lock-screen"))
        #expect(s.actions.lockerStarts == 1)
        s.wait(for: .seconds(1))
    }
}
