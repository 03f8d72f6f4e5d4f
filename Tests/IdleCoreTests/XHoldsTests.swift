import IdleCore
import Testing

/// The X server's holds as the user sees them (#31, items 4 and 5): a client's
/// XScreenSaverSuspend is one named hold for as long as it lasts, whatever its resets
/// do to the idle time; a saver turned off says since when and what ends it, and the
/// policy's max-inhibit bounds it when its program is gone.
@Suite("The X server's holds: shown while they hold, said with what ends them")
struct XHoldsTests {
    static let mpv = XSaverSuspender(client: 0x60_0000, pid: 4242, name: "mpv")

    /// The agent's edge for the X source: it keeps the keep-awake follower and sends
    /// each reading's claims with the wake-up, as `Agent.wake` does.
    struct Edge {
        var story: Story
        var keepAwake: XKeepAwake
        /// The saver timeout the agent set (2 s before the lock time).
        let timeout: Millis

        init(lockAfter: String, timeout: Millis, policy: Millis? = nil) {
            var config = Story.config(["--lock-after", lockAfter])
            config.maxInhibit = policy
            story = Story(config)
            self.timeout = timeout
            keepAwake = XKeepAwake(atStart: ScreenSaverReading(state: .off, idle: .zero, tilOrSince: timeout, timeout: timeout))
        }

        /// What the server says now: a suspended saver reads Off, and Off with nothing
        /// left to wait once the idle time has passed the timeout.
        func reading(saverOff: Bool, dpmsOff: Bool = false) -> ScreenSaverReading {
            let idle = story.serverIdle
            if saverOff { return ScreenSaverReading(state: .disabled, idle: idle, tilOrSince: .zero, timeout: .zero, dpmsOff: dpmsOff) }
            return ScreenSaverReading(state: .off, idle: idle, tilOrSince: Swift.max(timeout - idle, .zero), timeout: timeout,
                                      sinceTimeoutSet: .hours(1))
        }

        @discardableResult
        mutating func wake(suspenders: [XSaverSuspender]?, saverOff: Bool = false, dpmsOff: Bool = false) -> [Action] {
            _ = keepAwake.update(reading(saverOff: saverOff, dpmsOff: dpmsOff), suspenders: suspenders)
            return story.send(.wake(serverIdle: story.serverIdle, holds: HoldReport(HoldOwner(.x), keepAwake.claims)))
        }

        var statusInhibitors: [JSONValue] {
            JSONValue.object(story.machine.statusFields(at: story.clock, lockerPid: nil))["inhibitors"]?.array ?? []
        }

        func announced(_ kind: String) -> [Inhibitor] {
            story.actions.compactMap {
                switch $0 {
                case .announce(.inhibited(let i)) where kind == "inhibited": i
                case .announce(.uninhibited(let i)) where kind == "uninhibited": i
                default: nil
                }
            }
        }
    }

    @Test("mpv (XScreenSaverSuspend + a reset every 10 s): one named hold from the first look to its end, in status at every look; the lock a lock time after it ends")
    func suspensionShownWhileItHolds() {
        var e = Edge(lockAfter: "8s", timeout: .seconds(6))
        e.story.wait(until: Story.at(.seconds(1)))
        // The film starts: the first look (a status request) sees it, long before the
        // idle time reaches the saver timeout.
        e.wake(suspenders: [Self.mpv])
        #expect(e.statusInhibitors.count == 1)
        #expect(e.statusInhibitors.first?["who"]?.string == "pid 4242 (mpv), X client 0x600000")
        #expect(e.statusInhibitors.first?["source"]?.string == "x")
        // Two minutes of film, looked at every 750 ms (status, the periodic check):
        // mpv resets the counter every 10 s.
        var t = Millis.seconds(1)
        while t < .seconds(120) {
            t = t + .ms(750)
            e.story.advance(to: Story.at(t))
            if t.value % 10_000 < 750 { e.story.screensaverReset() }
            e.wake(suspenders: [Self.mpv])
            #expect(e.statusInhibitors.count == 1, "no hold in status at \(t) (idle \(e.story.serverIdle))")
        }
        #expect(e.story.actions.lockerStarts == 0)
        #expect(e.announced("inhibited").count == 1, "the hold came and went")
        #expect(e.announced("uninhibited").isEmpty)
        // The film ends: mpv resumes the saver (the server counts it as activity).
        e.story.screensaverReset()
        let ended = e.story.now
        e.wake(suspenders: [])
        #expect(e.announced("uninhibited").map(\.who) == ["pid 4242 (mpv), X client 0x600000"])
        e.story.expectLock(1, exactlyAt: ended + .seconds(8))
    }

    @Test("without X-Resource a suspension still shows past the saver timeout, as before")
    func suspensionWithoutXRes() {
        var e = Edge(lockAfter: "8s", timeout: .seconds(6))
        e.wake(suspenders: nil)
        #expect(e.statusInhibitors.isEmpty, "before the timeout a suspended server looks like any other")
        e.story.advance(to: Story.at(.ms(7500)))
        e.wake(suspenders: nil)
        #expect(e.statusInhibitors.first?["who"]?.string == "the X server")
        #expect(e.story.actions.lockerStarts == 0)
    }

    @Test("two clients suspend: each is a hold of its own; one ending leaves the other")
    func twoSuspenders() {
        var e = Edge(lockAfter: "8s", timeout: .seconds(6))
        let game = XSaverSuspender(client: 0x80_0000, pid: nil)
        e.wake(suspenders: [Self.mpv, game])
        #expect(e.statusInhibitors.compactMap { $0["who"]?.string }.sorted()
            == ["X client 0x800000 (pid unknown)", "pid 4242 (mpv), X client 0x600000"])
        e.story.advance(by: .seconds(3))
        e.wake(suspenders: [game])
        #expect(e.statusInhibitors.compactMap { $0["who"]?.string } == ["X client 0x800000 (pid unknown)"])
    }

    @Test("a saver turned off (a presentation) says what ends it, DPMS too, and since when")
    func saverOffSaysWhatEndsIt() throws {
        var e = Edge(lockAfter: "8s", timeout: .seconds(6))
        e.story.advance(by: .seconds(2))
        e.wake(suspenders: [], saverOff: true, dpmsOff: true)
        e.story.advance(by: .minutes(5))
        e.wake(suspenders: [], saverOff: true, dpmsOff: true)
        let hold = try #require(e.statusInhibitors.first)
        #expect(hold["why"]?.string?.contains("`xset s on` ends this hold") == true)
        #expect(hold["why"]?.string?.contains("`xset +dpms`") == true)
        #expect(hold["since_ms"]?.integer == 300_000)
        let text = HumanText.status(JSONValue.object(e.story.machine.statusFields(at: e.story.clock, lockerPid: nil)))
        #expect(text.contains("inhibited by the X server [x] (while the saver is off or suspended; held 5m)"), "\(text)")
    }

    @Test("a saver left off by a program that is gone holds until `xset s on`, or, under the policy, until max-inhibit runs out")
    func orphanedSaverOffBoundedByMaxInhibit() {
        var e = Edge(lockAfter: "8s", timeout: .seconds(6), policy: .minutes(30))
        e.story.advance(by: .seconds(1))
        // LibreOffice turned the saver off and was killed: the server keeps it off.
        e.wake(suspenders: [], saverOff: true)
        var t = Millis.seconds(1)
        while e.story.actions.lockerStarts == 0 && t < .hours(1) {
            t = t + .seconds(4)
            e.story.advance(to: Story.at(t))
            e.wake(suspenders: [], saverOff: true)
        }
        #expect(e.story.actions.lockerStarts == 1)
        #expect(t >= .minutes(30) && t <= .minutes(30) + .seconds(4), "locked at \(t)")
        #expect(e.story.actions.logs(containing: "max-inhibit (30m) is used up: every hold ends").count == 1)
    }
}

@Suite("Holds are printed without empty-field punctuation")
struct HoldTextTests {
    @Test("an application and its reason, either of them empty", arguments: [
        ("firefox", "Playing video", "firefox: Playing video"),
        ("", "Playing video", "Playing video"),
        ("vlc", "", "vlc"),
        ("", "", ""),
        ("a\nb", "c", "a\\u{a}b: c"),
    ])
    func appAndReason(app: String, reason: String, shown: String) {
        #expect(ClientText.appAndReason(app, reason) == shown)
    }

    @Test("status, events and doctor never print `by :`, `: ` before nothing, or an unsanitized who")
    func noEmptyFields() throws {
        let status = try JSONValue(parsing: #"{"state":"inhibited","idle_ms":5,"inhibitors":[{"id":1,"source":"dbus","who":"","why":"","remaining_ms":null}]}"#)
        let text = HumanText.status(status)
        #expect(text.contains("inhibited by an unnamed client [dbus] (while it runs)\n") || text.hasSuffix("inhibited by an unnamed client [dbus] (while it runs)"), "\(text)")
        let ended = try JSONValue(parsing: #"{"event":"uninhibited","id":1,"who":"w\u001b[2J"}"#)
        #expect(HumanText.event(ended) == "inhibitor of w\\u{1b}[2J ended")
        let began = try JSONValue(parsing: #"{"event":"inhibited","id":1,"who":"","why":""}"#)
        #expect(HumanText.event(began) == "inhibited by an unnamed client")
    }
}
