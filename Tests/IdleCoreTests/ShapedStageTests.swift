import IdleCore
import Testing

/// Stages that users shape: which holds each obeys, times on battery, the monitor off
/// once locked, and the stages run again after a resume without input.
@Suite("Shaped stages: per-stage holds, battery times, screen off, re-armed after resume")
struct ShapedStageTests {
    static let audio = HoldOwner(.audio, "pulse")
    static func playing(_ who: String = "mpv") -> Event {
        .holdsNow(HoldReport(audio, [HoldClaim(key: who, who: who, why: "playing")]))
    }
    static let silent = Event.holdsNow(HoldReport(audio, []))

    /// The role of the stage called `name` (stages are kept in idle-time order).
    func stage(_ s: Story, _ name: String) -> ProcessRole {
        .stage(s.machine.config.stages.firstIndex { $0.name == name } ?? -1)
    }

    func heldBy(_ s: Story, _ stage: String) -> [String]? {
        let fields = s.machine.statusFields(at: s.clock, lockerPid: nil)
        guard case .array(let stages)? = fields.first(where: { $0.0 == "stages" })?.1 else { return nil }
        for case .object(let members) in stages {
            guard members.contains(where: { $0.0 == "name" && $0.1 == .string(stage) }),
                  case .array(let by)? = members.first(where: { $0.0 == "held_by" })?.1 else { continue }
            return by.compactMap { if case .string(let s) = $0 { s } else { nil } }
        }
        return nil
    }

    @Test("a stage that ignores audio dims while music holds the lock off; the lock comes when the music stops")
    func stageIgnoresAudio() {
        var s = Story(flags: "--lock-after", "10m", "--stage", "dim=4m ignore=audio:dim")
        s.send(ShapedStageTests.playing())
        let dim = s.wait(for: .minutes(4))
        #expect(dim.commands(stage(s, "dim")) == ["dim"], "dim fires through the audio hold")
        #expect(heldBy(s, "lock") == ["audio"])
        #expect(heldBy(s, "dim") == [])
        s.wait(for: .minutes(20))
        #expect(s.actions.lockerStarts == 0, "the lock obeys the audio hold")
        let stopped = s.send(ShapedStageTests.silent)
        #expect(stopped.lockerStarts == 1, "the lock was due long ago: it fires when the hold ends")
        #expect(s.actions.commands(stage(s, "dim")).count == 1, "dim fired once in the idle period")
    }

    @Test("the reverse: a stage that obeys a hold the lock has no say over does not fire past it; ignore=all fires through every hold")
    func ignoreAllAndOrder() {
        // screen-off comes after the lock and ignores every hold: it fires on time even
        // though the lock before it is held.
        var s = Story(flags: "--lock-after", "5m", "--stage", "off=8m ignore=all:off", "--stage", "nap=6m:nap")
        s.send(.hold("a film", source: .socket))
        let on = s.wait(for: .minutes(10))
        #expect(on.lockerStarts == 0)
        #expect(on.commands(stage(s, "nap")).isEmpty, "nap obeys the hold")
        #expect(s.machine.config.stages.map(\.name) == ["lock", "nap", "off"])
        #expect(on.commands(stage(s, "off")) == ["off"])
        #expect(heldBy(s, "nap") == ["socket"])
    }

    @Test("a disable holds every stage, whatever it ignores")
    func disableHoldsAll() {
        var s = Story(flags: "--lock-after", "5m", "--stage", "dim=1m ignore=all:dim")
        s.send(.disable(for: nil))
        s.wait(for: .minutes(6))
        #expect(s.actions.runs(stage(s, "dim")).isEmpty)
        #expect(heldBy(s, "dim") == ["disabled"])
    }

    @Test("on battery the battery times are in force at once: an overdue lock fires, one now later waits")
    func batteryTimes() {
        var s = Story(flags: "--lock-after", "10m", "--lock-after-on-battery", "3m",
                      "--stage", "dim=8m on-battery=2m:dim")
        s.wait(for: .minutes(1))
        let unplugged = s.send(.powerSource(onBattery: true))
        #expect(unplugged.contains(.announce(.powerSource(onBattery: true))))
        #expect(unplugged.lockerStarts == 0)
        let dim = s.wait(for: .minutes(1))
        #expect(dim.commands(stage(s, "dim")) == ["dim"], "dim at 2m on battery")
        let lock = s.wait(for: .minutes(1))
        #expect(lock.lockerStarts == 1, "the lock at 3m on battery")

        var t = Story(flags: "--lock-after", "10m", "--lock-after-on-battery", "3m")
        t.send(.powerSource(onBattery: true))
        t.wait(for: .minutes(2))
        let plugged = t.send(.powerSource(onBattery: false))
        #expect(plugged.lockerStarts == 0)
        #expect(t.machine.nextDeadline == Story.at(.minutes(10)), "back on AC the lock waits for 10m")
        t.wait(for: .minutes(4))
        #expect(t.actions.lockerStarts == 0)
        let overdue = t.send(.powerSource(onBattery: true))
        #expect(overdue.lockerStarts == 1, "at 6m idle, unplugged: the battery's 3m has passed")
    }

    @Test("screen off after the lock: DURATION after the cover and after each input, whatever holds; settings back at unlock")
    func screenOffAfterLock() {
        var s = Story(flags: "--lock-after", "5m", "--screen-off-after-lock", "30s")
        s.send(.hold("a film", source: .socket))
        s.send(.lockNow)
        s.wait(for: .ms(10))  // the grab probe sees the cover
        #expect(s.machine.supervisor.covers)
        let early = s.wait(for: .ms(29_999))
        #expect(!early.contains(.turnScreenOff))
        let off = s.wait(for: .ms(1))
        #expect(off.contains(.turnScreenOff), "30s after the cover, with a hold in place")
        #expect(s.machine.screenIsOff)
        #expect(s.machine.nextDeadline == s.machine.supervisor.nextProbe, "nothing but the grab's re-probe to wake for once off")
        s.wait(for: .minutes(2))
        #expect(s.actions.count { $0 == .turnScreenOff } == 1, "off once, not again and again")
        s.input()  // the server turns the monitor on
        #expect(!s.machine.screenIsOff)
        s.wait(for: .ms(29_000))
        #expect(s.actions.count { $0 == .turnScreenOff } == 1)
        s.wait(for: .seconds(2))
        #expect(s.actions.count { $0 == .turnScreenOff } == 2, "off again 30s after the input")
        let unlocked = s.lockerExits(.exited(0))
        #expect(unlocked.contains(.restoreScreenSettings))
        #expect(s.machine.nextDeadline.map { $0 > s.now + .seconds(30) } ?? true, "no screen-off while unlocked")
    }

    @Test("a locker that does not cover the screen never turns the monitor off; a screensaver reset wakes it like input")
    func screenOffNeedsCover() {
        var s = Story(flags: "--lock-after", "5m", "--screen-off-after-lock", "30s", "--ignore-screensaver-reset")
        s.lockerGrabsKeyboard = false
        s.send(.lockNow)
        s.wait(for: .minutes(2))
        #expect(!s.actions.contains(.turnScreenOff))

        var t = Story(flags: "--lock-after", "5m", "--screen-off-after-lock", "30s", "--ignore-screensaver-reset")
        t.send(.lockNow)
        t.wait(for: .ms(30_010))
        #expect(t.machine.screenIsOff)
        t.screensaverReset()  // a player behind the lock: the server turns the monitor on
        t.wake()
        #expect(!t.machine.screenIsOff, "not counted as activity, yet the monitor is on again")
        t.wait(for: .seconds(31))
        #expect(t.actions.count { $0 == .turnScreenOff } == 2)
    }

    @Test("on battery the screen goes off sooner")
    func screenOffOnBattery() {
        var s = Story(flags: "--screen-off-after-lock", "1m", "--screen-off-after-lock-on-battery", "10s")
        s.send(.powerSource(onBattery: true))
        s.send(.lockNow)
        #expect(s.wait(for: .ms(10_010)).contains(.turnScreenOff))
    }

    @Test("after a resume without input, the stages that had fired run again from the resume; the locker is not started twice")
    func rearmedAfterResume() {
        var s = Story(flags: "--lock-after", "10m", "--stage", "dim=4m:dim", "--stage", "sleep=30m:systemctl suspend")
        s.wait(for: .minutes(30))
        #expect(s.actions.commands(stage(s, "dim")) == ["dim"])
        #expect(s.actions.commands(stage(s, "sleep")) == ["systemctl suspend"])
        #expect(s.actions.lockerStarts == 1)
        // The machine sleeps two hours and wakes by itself (a timer); nobody is there.
        let resumed = s.suspend(for: .hours(2))
        #expect(resumed.runs(stage(s, "dim")).isEmpty, "not at once: from the resume")
        let dim = s.wait(for: .minutes(4))
        #expect(dim.commands(stage(s, "dim")) == ["dim"], "dim again 4m after the resume")
        let asleep = s.wait(for: .minutes(26))
        #expect(asleep.commands(stage(s, "sleep")) == ["systemctl suspend"], "asleep again 30m after the resume")
        #expect(s.actions.lockerStarts == 1, "the locker still runs: no second one")
        // Input ends the idle period: each stage fires once in the next.
        s.lockerExits(.exited(0))
        s.wait(for: .minutes(30))
        #expect(s.actions.commands(stage(s, "sleep")).count == 3)
    }

    @Test("a stage that had not fired counts the sleep as idle time: a long sleep locks at once")
    func unfiredStagesCountTheSleep() {
        var s = Story(flags: "--lock-after", "10m", "--stage", "dim=4m:dim")
        s.wait(for: .minutes(5))
        let resumed = s.suspend(for: .minutes(30))
        #expect(resumed.lockerStarts == 1, "the lock was due during the sleep")
        #expect(resumed.runs(stage(s, "dim")).isEmpty, "dim had fired: it waits 4m from the resume")
    }
}
