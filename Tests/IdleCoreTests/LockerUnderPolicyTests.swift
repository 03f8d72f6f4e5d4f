import IdleCore
import Testing

/// Issue #35: under the admin's policy the session's user is one of the attackers. A
/// locker killed as it starts is replaced at once, every time; one that does not cover
/// the screen is killed and replaced; a let-go is judged when its grace ends.
@Suite("The locker under the policy: replaced at once, and replaced when it does not cover")
struct LockerUnderPolicyTests {
    static func config(policy: Bool, _ extra: [String] = []) -> AgentConfig {
        var config = Story.config(["--on-unlock", "unlock-hook"] + extra)
        if policy { config.policy = PolicyReport(path: "/etc/xidlelock/policy") }
        return config
    }

    /// Locked at 10m idle, the locker seen holding the screen 10 ms later.
    static func locked(policy: Bool = true) -> Story {
        var s = Story(config(policy: policy))
        s.wait(until: Story.at(.minutes(10) + .ms(10)))
        #expect(s.machine.stateName == "locked")
        return s
    }

    /// The delay before each restart of a locker that is killed `times` times, 300 ms after each start.
    static func restartDelays(policy: Bool, times: Int) -> [Millis] {
        var s = locked(policy: policy)
        var delays: [Millis] = []
        for _ in 0..<times {
            s.advance(by: .ms(300))
            let before = s.actions.lockerStarts
            let killed = s.lockerExits(.killed(signal: 9))
            #expect(killed.logs(.error).count == 1, "each failure said loudly")
            if s.actions.lockerStarts > before {
                delays.append(.zero)
                continue
            }
            guard let retry = s.machine.supervisor.retryAt else {
                Issue.record("no retry planned")
                return delays
            }
            delays.append(retry - s.now)
            s.wait(until: retry)
            #expect(s.actions.lockerStarts == before + 1)
        }
        return delays
    }

    @Test("a locker killed as it starts is replaced at once, three times in a row, then 500 ms apart: never the 1, 2, 4 ... 60 s back-off")
    func noBackOff() {
        let delays = LockerUnderPolicyTests.restartDelays(policy: true, times: 8)
        #expect(delays == [0, 0, 0, 500, 500, 500, 500, 500].map { Millis($0) })
        let without = LockerUnderPolicyTests.restartDelays(policy: false, times: 5)
        #expect(without == [0, 1, 2, 4, 8].map { Millis.seconds($0) }, "the back-off stays without a policy")
    }

    @Test("a locker that fails at once for ever makes two starts a second, not a busy loop")
    func instantFailuresAreBounded() {
        var s = LockerUnderPolicyTests.locked()
        let start = s.now
        while s.now < start + .minutes(1) {
            s.lockerExits(.exited(127))  // sh: the locker is gone
            if let retry = s.machine.supervisor.retryAt { s.wait(until: retry) }
        }
        let starts = s.actions.lockerStarts
        #expect(starts >= 110 && starts <= 125, "\(starts) starts in a minute")
        #expect(s.actions.runs(.onUnlock).isEmpty)
    }

    @Test("a keyboard grabbed after a locker returned at once is checked again 500 ms later, not at once for ever")
    func heldOffRetriesAreBounded() {
        var s = LockerUnderPolicyTests.locked()
        s.advance(by: .seconds(2))
        s.lockerExits(.exited(0))  // 2 s: an unlock
        s.wait(until: s.now + .minutes(10))
        s.lockerGrabsKeyboard = false
        s.advance(by: .ms(5))
        s.keyboardHeldByOther = true  // its detached copy holds the keyboard
        s.lockerExits(.exited(0))
        let minute = s.wait(for: .minutes(1))
        let probes = minute.filter { $0 == .probeGrabs }.count
        #expect(probes >= 100 && probes <= 125, "\(probes) checks in a minute")
        #expect(minute.lockerStarts == 0, "no second locker on top of the detached one")
    }

    @Test("a locker that never grabs the keyboard is killed at the grab deadline and replaced at once, as a failure")
    func neverGrabbedIsReplaced() {
        var s = Story(LockerUnderPolicyTests.config(policy: true))
        s.lockerGrabsKeyboard = false
        s.wait(until: Story.at(.minutes(10) + .seconds(3) - .ms(1)))
        #expect(s.actions.lockerStarts == 1)
        #expect(!s.actions.contains(.killLocker))
        let deadline = s.wait(until: Story.at(.minutes(10) + .seconds(3)))
        #expect(deadline.filter { $0 == .killLocker }.count == 1)
        #expect(deadline.lockerStarts == 1, "replaced at once")
        let kill = deadline.firstIndex(of: .killLocker) ?? 0
        let run = deadline.firstIndex { if case .run(.locker, _, _) = $0 { true } else { false } } ?? -1
        #expect(kill < run, "killed before the next one starts: never two")
        #expect(deadline.logs(.error).contains { $0.contains("without grabbing the keyboard") && $0.contains("killed") }, "\(deadline.logs(.error))")
        #expect(deadline.contains { if case .announce(.lockerFailed(kind: "not-covering", _, _)) = $0 { true } else { false } })
        #expect(s.machine.stateName == "locking")
        s.lockerGrabsKeyboard = true
        s.wait(for: .ms(10))
        #expect(s.machine.stateName == "locked")
    }

    @Test("a let-go followed by exit 0 within 1.5 s is an unlock: no error, no kill, no new locker")
    func letGoThenExitIsAnUnlock() {
        for policy in [true, false] {
            var s = LockerUnderPolicyTests.locked(policy: policy)
            s.lockerGrabsKeyboard = false  // the right password: i3lock lets go ...
            let seen = s.wait(for: .seconds(5))
            #expect(seen.filter { $0 == .probeGrabs }.count == 1)
            let seenAt = s.now
            #expect(s.machine.nextDeadline == seenAt + .ms(1500), "looked at again when the grace ends")
            #expect(s.machine.stateName == "locked")
            s.advance(by: .ms(319))  // ... and exits 0, 319 ms later
            let unlocked = s.lockerExits(.exited(0))
            #expect(unlocked.commands(.onUnlock) == ["unlock-hook"])
            let all = seen + unlocked
            #expect(all.logs(.error).isEmpty, "\(all.logs(.error))")
            #expect(!all.contains(.killLocker))
            #expect(all.lockerStarts == 0)
            #expect(unlocked.logs(.info).contains { $0.hasPrefix("unlocked after") && !$0.contains("(") }, "\(unlocked.logs(.info))")
            #expect(s.machine.locker == .unlocked)
        }
    }

    @Test("an exit 0 a moment before the grace ends is an unlock too")
    func exitJustInsideTheGrace() {
        var s = LockerUnderPolicyTests.locked()
        s.lockerGrabsKeyboard = false
        s.wait(for: .seconds(5))
        s.advance(by: .ms(1499))
        let unlocked = s.lockerExits(.exited(0))
        #expect(unlocked.logs(.error).isEmpty)
        #expect(unlocked.commands(.onUnlock) == ["unlock-hook"])
    }

    @Test("a let-go that stays past 1.5 s is not covering: killed and replaced at once, as a failure")
    func letGoThatStaysIsReplaced() {
        var s = LockerUnderPolicyTests.locked()
        s.lockerGrabsKeyboard = false
        s.wait(for: .seconds(5))
        let before = s.wait(for: .ms(1499))
        #expect(!before.contains(.killLocker))
        let graceEnd = s.wait(for: .ms(1))
        #expect(graceEnd.filter { $0 == .killLocker }.count == 1)
        #expect(graceEnd.lockerStarts == 1)
        #expect(graceEnd.logs(.error).contains { $0.contains("let go of the keyboard") && $0.contains("killed") }, "\(graceEnd.logs(.error))")
        #expect(graceEnd.lockedHints == [false])
        #expect(graceEnd.runs(.onUnlock).isEmpty)
        s.lockerGrabsKeyboard = true
        s.wait(for: .ms(10))
        #expect(s.machine.stateName == "locked")
    }

    @Test("without a policy an exit 0 after a let-go past the grace unlocks, and says it had let go, not that it never grabbed")
    func unlockAfterALetGoSaysSo() {
        var s = LockerUnderPolicyTests.locked(policy: false)
        s.lockerGrabsKeyboard = false
        s.wait(for: .seconds(5) + .ms(1500))
        #expect(s.machine.stateName == "locker-not-covering")
        s.advance(by: .seconds(10))
        let unlocked = s.lockerExits(.exited(0))
        let line = unlocked.logs(.info).first { $0.hasPrefix("unlocked after") } ?? ""
        #expect(line.contains("had let go of the keyboard"), "\(line)")
        #expect(!line.contains("never grabbed"))
    }

    @Test("a locker that grabs again within the grace stays locked, quietly")
    func grabbedAgainWithinTheGrace() {
        var s = LockerUnderPolicyTests.locked()
        s.lockerGrabsKeyboard = false
        s.wait(for: .seconds(5))
        s.lockerGrabsKeyboard = true
        let later = s.wait(for: .minutes(1))
        #expect(later.logs(.error).isEmpty)
        #expect(!later.contains(.killLocker))
        #expect(s.machine.stateName == "locked")
    }
}
