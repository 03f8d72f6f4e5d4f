import IdleCore
import Testing

/// Under a policy the session is logind's: the environment the user sets is held
/// against it, and where they disagree the agent follows logind and says so.
@Suite("The agent's session from logind")
struct AgentSessionTests {
    static let logind = AgentSession.Logind(id: "3", display: ":0", type: "x11", seat: "seat0")

    static func env(_ values: [String: String]) -> (String) -> String? { { values[$0] } }

    @Test("the environment agrees: logind's session, no problem")
    func agrees() {
        let s = AgentSession.reconcile(logind: Self.logind, environment: Self.env(["DISPLAY": ":0.0", "XDG_SESSION_ID": "3", "XDG_SESSION_TYPE": "x11"]))
        #expect(s.fromLogind && s.display == ":0" && s.id == "3" && s.problems.isEmpty)
        #expect(s.refusal(environment: Self.env([:])) == nil)
    }

    @Test("DISPLAY, XDG_SESSION_ID, XDG_SESSION_TYPE and WAYLAND_DISPLAY that disagree: each a problem, logind followed, no Wayland refusal for an x11 session")
    func disagrees() {
        let user = Self.env(["DISPLAY": ":5", "XDG_SESSION_ID": "9", "XDG_SESSION_TYPE": "wayland", "WAYLAND_DISPLAY": "wayland-0"])
        let s = AgentSession.reconcile(logind: Self.logind, environment: user)
        #expect(s.display == ":0" && s.id == "3" && s.type == "x11")
        #expect(s.problems == [
            "DISPLAY=:5 is not the session's display :0 (logind): watching :0",
            "XDG_SESSION_ID=9 is not the agent's session 3 (logind): following 3",
            "XDG_SESSION_TYPE=wayland, but logind says session 3 is x11: following logind",
            "WAYLAND_DISPLAY=wayland-0 in a session logind says is x11: ignored",
        ])
        #expect(s.refusal(environment: user) == nil, "the user's WAYLAND_DISPLAY refused an X11 session")
    }

    @Test("out of a policy: DISPLAY stands, and logind's session is claimed only where it is that display")
    func observedInASession() {
        let same = AgentSession.observe(logind: Self.logind, environment: Self.env(["DISPLAY": ":0.0"]))
        #expect(same.fromLogind && same.id == "3" && same.display == ":0.0" && same.problems.isEmpty)
        let other = AgentSession.observe(logind: Self.logind, environment: Self.env(["DISPLAY": ":10.0", "XDG_SESSION_ID": "c4"]))
        #expect(!other.fromLogind && other.display == ":10.0" && other.id == "c4")
    }

    @Test("out of a policy, an agent in no session (the user unit's) follows its user's display session, not the user manager's last DISPLAY")
    func observedFromAUserUnit() {
        var logind = Self.logind
        logind.usersDisplay = true
        let s = AgentSession.observe(logind: logind, environment: Self.env(["DISPLAY": ":10.0"]))
        #expect(s.fromLogind && s.id == "3" && s.display == ":0")
        #expect(s.problems == ["the agent runs in no session (a user unit's), so it watches its user's display session: DISPLAY=:10.0 is not the session's display :0 (logind): watching :0"])
        let agreeing = AgentSession.observe(logind: logind, environment: Self.env(["DISPLAY": ":0"]))
        #expect(agreeing.fromLogind && agreeing.display == ":0" && agreeing.problems.isEmpty)
    }

    @Test("a session logind says is Wayland is refused, whatever the environment says")
    func waylandByLogind() {
        var logind = Self.logind
        logind.type = "wayland"
        let s = AgentSession.reconcile(logind: logind, environment: Self.env(["XDG_SESSION_TYPE": "x11"]))
        #expect(s.refusal(environment: Self.env([:]))?.contains("Wayland session") == true)
    }

    @Test("without logind (a bare startx): the environment's facts, today's Wayland check, and why")
    func noLogind() {
        let user = Self.env(["DISPLAY": ":1", "WAYLAND_DISPLAY": "wayland-0"])
        let s = AgentSession.reconcile(logind: nil, unavailable: "no system bus", environment: user)
        #expect(!s.fromLogind && s.display == ":1")
        #expect(s.problems == ["no logind session (no system bus): the session is the environment's"])
        #expect(s.refusal(environment: user) != nil)
    }
}
