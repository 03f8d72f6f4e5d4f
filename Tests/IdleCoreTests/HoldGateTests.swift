import IdleCore
import Testing

/// The one gate every hold passes: who may keep the screen unlocked, how many, how
/// often and for how long. Each test is an attack that worked before the gate.
@Suite("Holds: one gate in the core")
struct HoldGateTests {
    static func config(_ flags: String...) -> AgentConfig { Story.config(["--lock-after", "10s"] + flags) }

    @Test("--secure: no source holds, no client resets the idle time, disables or stops the agent")
    func secureRefusesEveryWayAround() {
        var s = Story(Self.config("--secure"))
        for source in InhibitorSource.allCases {
            #expect(s.send(.hold(source: source)).answer == .refused("the agent runs with --secure"))
        }
        s.send(.holdsNow(HoldReport(HoldOwner(.x), [HoldClaim(key: "suspended", who: "the X server", why: "suspended")])))
        #expect(s.machine.inhibitors.isEmpty)
        s.wait(until: Story.at(.seconds(8)))
        for source in [InhibitorSource.socket, .dbus] {
            if case .refused? = s.send(.reset(from: source)).answer {} else { Issue.record("a \(source) reset was taken") }
        }
        if case .refused? = s.send(.disable(for: .minutes(5))).answer {} else { Issue.record("disable was taken") }
        if case .refused? = s.send(.quitAsked(by: "pid 1 (sh)")).answer {} else { Issue.record("quit was taken") }
        s.expectLock(1, exactlyAt: Story.at(.seconds(10)))
    }

    @Test("--secure: a screensaver reset or pointer warp (the server's counter reset, no input) is not activity")
    func secureCountsOnlyInput() {
        var s = Story(Self.config("--secure"))
        for t in 1...9 {
            s.wait(until: Story.at(.seconds(Int64(t))))
            // A client's XResetScreenSaver every second: the counter restarts, no raw event.
            s.screensaverReset()
            s.wake()
        }
        s.expectLock(1, exactlyAt: Story.at(.seconds(10)))
    }

    @Test("SimulateUserActivity is a screensaver reset: not taken with --ignore-screensaver-reset; the user's own `xidlelock reset` is")
    func simulateUserActivityUnderIgnoreReset() {
        var s = Story(Self.config("--ignore-screensaver-reset"))
        s.wait(until: Story.at(.seconds(8)))
        if case .refused? = s.send(.reset(from: .dbus, by: "SimulateUserActivity from :1.9")).answer {} else { Issue.record("taken") }
        #expect(s.machine.idle(at: s.clock) == .seconds(8))
        #expect(s.send(.reset(from: .socket)).answer == .done)
        #expect(s.machine.idle(at: s.clock) == .zero)
    }

    @Test("max-inhibit bounds the time unlocked without input, however holds are renewed: `inhibit --for 3s` every 2 s")
    func maxInhibitCannotBeChained() {
        var config = Self.config()
        config.maxInhibit = .seconds(3)
        var s = Story(config)
        // Input after the start: from here the budget counts from the first hold (until
        // then it counts from the last input the server saw, see maxInhibitAcrossRestarts).
        s.input()
        var t: Int64 = 9
        while t < 30 {
            s.wait(until: Story.at(.seconds(t)))
            if t == 11 { #expect(s.actions.lockerStarts == 0, "held, within the budget") }
            // A new short-lived client each time, as a shell loop would run them.
            s.send(.hold("pid \(t)", for: .seconds(3), client: "pid \(t)"))
            t += 2
        }
        // Holding began at 9 s: the budget ran out at 12 s, and the lock was due since 10 s.
        #expect(s.actions.lockerStarts == 1)
        #expect(s.actions.logs(containing: "max-inhibit (3s) is used up: every hold ends").count == 1)
    }

    @Test("max-inhibit: input renews the budget; holds begun before are bounded from the input on")
    func maxInhibitRenewedByInput() {
        var config = Self.config()
        config.maxInhibit = .seconds(30)
        var s = Story(config)
        s.send(.hold("pid 7 (mpv)"))
        s.wait(until: Story.at(.seconds(25)))
        s.input()
        // The hold stays; the screen may stay unlocked 30 s from the input, and no longer.
        #expect(s.machine.inhibitors.count == 1)
        s.expectLock(1, exactlyAt: Story.at(.seconds(55)))
    }

    @Test("max-inhibit across a restart: the budget counts from the idle time the X server reports at start, so a restart is never a fresh budget")
    func maxInhibitAcrossRestarts() {
        var config = Self.config()
        config.maxInhibit = .seconds(6)
        // Started again (by the user, to renew the budget) 5 s into the idle time; the
        // client holds again at once.
        var s = Story(config, idleAtStart: .seconds(5))
        s.send(.hold("pid 7 (inhibit)", source: .dbus, client: ":1.7"))
        // 6 s from the last input, 1 s from this start: the budget is spent; the lock was
        // due at 10 s of idle time, and nothing holds it off any longer.
        s.wait(until: Story.at(.seconds(2)))
        #expect(s.actions.logs(containing: "max-inhibit (6s) is used up").count == 1, "a fresh budget at start")
        #expect(s.machine.inhibitors.isEmpty)
        s.expectLock(1, exactlyAt: Story.at(.seconds(5)))
    }

    @Test("a client ends only its own holds: another's cookie is refused and the hold stays")
    func uninhibitOnlyByItsOwner() {
        var s = Story(Self.config())
        let id = try! #require(s.send(.hold("pid 7 (firefox)", source: .dbus, client: ":1.7")).grantedID)
        if case .refused? = s.send(.release(id, source: .dbus, client: ":1.8")).answer {} else { Issue.record("another's cookie ended it") }
        #expect(s.machine.inhibitors.map(\.id) == [id])
        #expect(s.send(.release(id, source: .dbus, client: ":1.7")).answer == .done)
        #expect(s.machine.inhibitors.isEmpty)
    }

    @Test("cookies are not 1, 2, 3: drawn from the seed the edge gives, unique while they hold")
    func cookiesAreNotGuessable() {
        func ids(seed: UInt64) -> [Int] {
            var machine = IdleMachine(config: Self.config(), now: Story.origin, seed: seed)
            return (0..<5).compactMap { k in machine.handle(.hold(client: "c\(k)"), at: Story.origin).grantedID }
        }
        let a = ids(seed: 1), b = ids(seed: 2)
        #expect(a.count == 5 && Set(a).count == 5)
        #expect(a != b)
        #expect(a != [1, 2, 3, 4, 5] && a.allSatisfy { $0 > 0 && $0 <= Int(Int32.max) })
    }

    @Test("a flood from one client: a burst is granted, the rest refused quietly; at most 32 held at once; status stays short")
    func floodFromOneClient() {
        var s = Story(Self.config())
        var granted = 0, refused = 0
        for _ in 0..<5000 {
            if s.send(.hold("pid 9 (flood)", client: ":1.9")).grantedID != nil { granted += 1 } else { refused += 1 }
        }
        #expect(granted == 20 && refused == 4980)
        // Every refusal goes to the edge's one rate limit (Log.limited), never straight to the log.
        #expect(!s.actions.contains { if case .log(.warning, _) = $0 { true } else { false } })
        #expect(s.actions.filter { if case .logRefusal = $0 { true } else { false } }.count == 4980)
        // One a second after the burst, up to the cap per client.
        for k in 1...60 {
            s.wait(until: Story.at(.seconds(Int64(k))))
            s.send(.hold("pid 9 (flood)", client: ":1.9"))
        }
        #expect(s.machine.inhibitors.count == HoldLimits.perClient)
        let status = JSONValue.object(s.machine.statusFields(at: s.clock, lockerPid: nil))
        guard case .array(let listed)? = status["inhibitors"] else { Issue.record("no inhibitors"); return }
        #expect(listed.count == 20 && status["inhibitor_count"]?.integer == 32)
        #expect(status["inhibitors_by_source"]?["socket"]?.integer == 32)
    }

    @Test("many clients: the total is capped too")
    func floodFromManyClients() {
        var s = Story(Self.config())
        for k in 0..<2000 {
            s.wait(until: Story.at(.ms(Int64(k) * 250)))
            s.send(.hold(client: "client \(k)"))
        }
        #expect(s.machine.inhibitors.count <= HoldLimits.total)
        #expect(s.machine.inhibitors.count >= HoldLimits.total - 5)
    }

    @Test("a restart during a film: no stage fires until each source has said what it holds")
    func firstDecisionWaitsForTheSources() {
        var s = Story(Self.config(), idleAtStart: .minutes(5), awaiting: [.fullscreen, .dbus])
        #expect(s.actions.lockerStarts == 0)
        s.wait(until: Story.at(.ms(300)))
        s.send(.holdsNow(HoldReport(HoldOwner(.fullscreen), [HoldClaim(key: "0x1200003", who: "\"film\"", why: "fullscreen")])))
        s.wait(until: Story.at(.ms(900)))
        s.send(.sourceReady(.dbus))
        s.wait(until: Story.at(.minutes(1)))
        #expect(s.actions.lockerStarts == 0)
        #expect(s.machine.stateName == "inhibited")
    }

    @Test("a source that never answers counts as holding nothing after 2 s, with a warning")
    func startupWaitIsBounded() {
        var s = Story(Self.config(), idleAtStart: .minutes(5), awaiting: [.audio])
        s.expectLock(1, exactlyAt: Story.at(.seconds(2)))
        #expect(s.actions.logs(containing: "no word from audio within 2s").count == 1)
    }

    @Test("the ScreenSaver service's clients get a second to take their holds again; an agent with an hour to go does not wake for the wait")
    func settleAndNoWake() {
        var s = Story(Self.config(), idleAtStart: .minutes(5), awaiting: [.dbus])
        s.send(.sourceReady(.dbus, settle: .seconds(1)))
        s.expectLock(1, exactlyAt: Story.at(.seconds(1)))
        var fresh = Story(Story.config(["--lock-after", "1h"]), awaiting: [.dbus, .logind])
        fresh.send(.sourceReady(.dbus, settle: .seconds(1)))
        #expect(fresh.machine.nextDeadline == Story.at(.hours(1)))
        #expect(fresh.actions.logs(.warning).isEmpty)
    }

    @Test("a source's report is diffed: new holds are admitted before old ones end, a refused one is not retried")
    func reportsAreDiffed() {
        var s = Story(Self.config())
        let audio = HoldOwner(.audio)
        s.send(.holdsNow(HoldReport(audio, [HoldClaim(key: "mpv", who: "mpv", why: "playing audio")])))
        let first = s.machine.inhibitors.map(\.id)
        let out = s.send(.holdsNow(HoldReport(audio, [HoldClaim(key: "vlc", who: "vlc", why: "playing audio")])))
        let announced = out.compactMap { if case .announce(let a) = $0 { a } else { nil } }
        guard announced.count == 2, case .inhibited(let vlc) = announced[0], case .uninhibited(let mpv) = announced[1] else {
            Issue.record("\(announced)")
            return
        }
        #expect(vlc.who == "vlc" && mpv.id == first[0])
        // The same report again changes nothing.
        #expect(s.send(.holdsNow(HoldReport(audio, [HoldClaim(key: "vlc", who: "vlc", why: "playing audio")]))).isEmpty)
    }

    @Test("logind's idle inhibitors: only the user's own hold by default; another user's is refused, shown in status, not retried")
    func logindOwnOnly() {
        var config = Self.config()
        config.userID = 1000
        var s = Story(config)
        let other = HoldClaim(key: "backup|running|0|77", who: "backup (pid 77, uid 0, logind)", why: "running", uid: 0)
        let own = HoldClaim(key: "mpv|film|1000|88", who: "mpv (pid 88, uid 1000, logind)", why: "film", uid: 1000)
        s.send(.holdsNow(HoldReport(HoldOwner(.logind), [other, own])))
        #expect(s.machine.inhibitors.map(\.who) == [own.who])
        #expect(s.machine.refusedHolds.map(\.claim) == [other])
        let again = s.send(.holdsNow(HoldReport(HoldOwner(.logind), [other, own])))
        #expect(again.logs(.warning).isEmpty)
    }

    @Test("logind's idle inhibitors of the user's other session are refused by name; its own session's, and those logind could not place, hold")
    func logindOwnSessionOnly() {
        var config = Self.config()
        config.userID = 1000
        config.session = AgentSession.reconcile(logind: .init(id: "c3", display: ":0", type: "x11", seat: "seat0")) { _ in nil }
        var s = Story(config)
        let elsewhere = HoldClaim(key: "raid|check|1000|77", who: "raid (pid 77, uid 1000, logind)", why: "check", uid: 1000, session: "c4")
        let here = HoldClaim(key: "mpv|film|1000|88", who: "mpv (pid 88, uid 1000, logind)", why: "film", uid: 1000, session: "c3")
        let unplaced = HoldClaim(key: "vlc|film|1000|99", who: "vlc (pid 99, uid 1000, logind)", why: "film", uid: 1000)
        s.send(.holdsNow(HoldReport(HoldOwner(.logind), [elsewhere, here, unplaced])))
        #expect(s.machine.inhibitors.map(\.who) == [here.who, unplaced.who])
        #expect(s.machine.refusedHolds.map(\.reason) == ["it runs in logind session c4, not in this agent's session c3; --logind-inhibitors own"])
        // --logind-inhibitors all: every session's.
        config.logindInhibitors = .all
        var all = Story(config)
        all.send(.holdsNow(HoldReport(HoldOwner(.logind), [elsewhere, here])))
        #expect(all.machine.inhibitors.count == 2)
    }

    @Test("a lost source ends all its holds, whoever held them")
    func lostSource() {
        var s = Story(Self.config())
        s.send(.hold(source: .dbus, client: ":1.5"))
        s.send(.hold(source: .dbus, client: ":1.6"))
        s.send(.hold(source: .socket))
        s.send(.sourceLost(.dbus))
        #expect(s.machine.inhibitors.map(\.source) == [.socket])
    }
}
