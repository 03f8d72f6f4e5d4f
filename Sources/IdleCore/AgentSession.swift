/// The session the agent locks, under the admin's policy: logind's word, not the
/// environment's. The user sets DISPLAY, XDG_SESSION_ID, XDG_SESSION_TYPE and
/// WAYLAND_DISPLAY at will; logind knows which session the agent's process (or, for a
/// systemd user unit, its user's display session) is, and that session's display and
/// type. Where the two disagree the agent follows logind and says so.
public struct AgentSession: Equatable, Sendable {
    public var id: String
    public var display: String
    public var type: String
    public var seat: String
    /// Taken from logind; false: from the environment (no logind, a bare `startx`).
    public var fromLogind: Bool
    /// Each way the environment disagreed with logind, or why logind was not asked.
    public var problems: [String]

    /// What logind said of the agent's session.
    public struct Logind: Equatable, Sendable {
        public var id, display, type, seat: String
        /// The agent runs in no session (a systemd user unit): this is the session
        /// logind elects as its user's display session.
        public var usersDisplay: Bool
        public init(id: String, display: String, type: String, seat: String, usersDisplay: Bool = false) {
            self.id = id
            self.display = display
            self.type = type
            self.seat = seat
            self.usersDisplay = usersDisplay
        }
    }

    /// Holds the environment against logind's answer (nil, with `unavailable` saying
    /// why: the environment's facts stand).
    public static func reconcile(logind: Logind?, unavailable: String? = nil, environment: (String) -> String?) -> AgentSession {
        func env(_ name: String) -> String? { environment(name).flatMap { $0.isEmpty ? nil : $0 } }
        guard let logind else {
            return AgentSession(id: env("XDG_SESSION_ID") ?? "", display: env("DISPLAY") ?? "", type: env("XDG_SESSION_TYPE") ?? "",
                                seat: env("XDG_SEAT") ?? "", fromLogind: false,
                                problems: ["no logind session (\(unavailable ?? "logind did not say")): the session is the environment's"])
        }
        func shown(_ value: String) -> String { ClientText.sanitized(value, maxBytes: 64) }
        var session = AgentSession(id: logind.id, display: logind.display, type: logind.type, seat: logind.seat, fromLogind: true, problems: [])
        if let given = env("DISPLAY") {
            if logind.display.isEmpty {
                session.display = given
                session.problems.append("logind names no display for session \(logind.id): watching DISPLAY=\(shown(given))")
            } else if DisplayName(given) != DisplayName(logind.display) {
                session.problems.append("DISPLAY=\(shown(given)) is not the session's display \(logind.display) (logind): watching \(logind.display)")
            }
        } else if logind.display.isEmpty {
            session.problems.append("neither DISPLAY nor logind names a display for session \(logind.id)")
        }
        if let given = env("XDG_SESSION_ID"), given != logind.id {
            session.problems.append("XDG_SESSION_ID=\(shown(given)) is not the agent's session \(logind.id) (logind): following \(logind.id)")
        }
        if let given = env("XDG_SESSION_TYPE"), given != logind.type {
            session.problems.append("XDG_SESSION_TYPE=\(shown(given)), but logind says session \(logind.id) is \(logind.type): following logind")
        }
        if let given = env("WAYLAND_DISPLAY"), logind.type != "wayland" {
            session.problems.append("WAYLAND_DISPLAY=\(shown(given)) in a session logind says is \(logind.type): ignored")
        }
        return session
    }

    /// Out of a policy the environment stands (the user's own choice of display), and
    /// logind's word only names the session: its id where its display is the one the
    /// agent watches. Another display names no session of this display, so none is
    /// claimed. One exception: an agent in no session (started by the user unit) follows
    /// its user's display session, as logind elects it. Its DISPLAY is the user
    /// manager's, which every X session of the user rewrites at its start (Debian's
    /// 20dbus_xdg-runtime), so beside a remote session it names the last session
    /// started, whose own agent already runs there.
    public static func observe(logind: Logind?, unavailable: String? = nil, environment: (String) -> String?) -> AgentSession {
        func env(_ name: String) -> String? { environment(name).flatMap { $0.isEmpty ? nil : $0 } }
        let fromEnvironment = reconcile(logind: nil, unavailable: unavailable, environment: environment)
        guard let logind else { return fromEnvironment }
        if logind.usersDisplay, !logind.display.isEmpty {
            var session = reconcile(logind: logind, environment: environment)
            session.problems = session.problems.map { "the agent runs in no session (a user unit's), so it watches its user's display session: \($0)" }
            return session
        }
        let display = env("DISPLAY") ?? logind.display
        if !logind.display.isEmpty, DisplayName(display) != DisplayName(logind.display) {
            var session = fromEnvironment
            session.problems = ["logind's session \(logind.id) is on \(logind.display), not on DISPLAY=\(ClientText.sanitized(display, maxBytes: 64)), which the agent watches: the session is the environment's"]
            return session
        }
        var session = AgentSession(id: logind.id, display: display, type: logind.type, seat: logind.seat, fromLogind: true, problems: [])
        if let given = env("XDG_SESSION_ID"), given != logind.id {
            session.problems.append("XDG_SESSION_ID=\(ClientText.sanitized(given, maxBytes: 64)) is not the agent's session \(logind.id) (logind): following \(logind.id)")
        }
        return session
    }

    /// Why the agent refuses this session: only what logind says is Wayland; without
    /// logind, the environment's signs (`WaylandSession`).
    public func refusal(environment: (String) -> String?) -> String? {
        if fromLogind { return type == "wayland" ? WaylandSession.refusal(sessionType: "wayland", waylandDisplay: nil) : nil }
        return WaylandSession.refusal(sessionType: environment("XDG_SESSION_TYPE"), waylandDisplay: environment("WAYLAND_DISPLAY"))
    }

    var json: JSONValue {
        .object([
            ("id", .string(id)), ("display", .string(display)), ("type", .string(type)), ("seat", .string(seat)),
            ("from", .string(fromLogind ? "logind" : "environment")),
            ("problems", .array(problems.map(JSONValue.string))),
        ])
    }
}
