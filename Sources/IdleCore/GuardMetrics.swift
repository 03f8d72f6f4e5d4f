// The guard's metrics, for node_exporter's textfile collector (a fleet's Prometheus
// reads them from /var/lib/prometheus/node-exporter/xidlelock.prom): what the guard
// verified of each session, its policy's fingerprint, its own health, and what it
// counted. A value taken from the guard's state (`init`), and its text in Prometheus's
// exposition format (`text`); the edge writes the text only when the value changed.
//
// "Guarded" and "locked" here are the guard's own words (`GuardSessionState`): a
// metric never says more than the guard verified.

public struct GuardMetrics: Equatable, Sendable {
    /// One session's gauges and the labels that name it.
    public struct Session: Equatable, Sendable {
        public var id: String
        public var user: String
        public var display: String
        public var remote: Bool
        public var seat: String
        public var guarded: Bool
        public var locked: Bool
        public var policyMet: Bool
    }

    /// In the order of their ids.
    public var sessions: [Session]
    public var counts: GuardCounts
    /// The admin's policy file and its SHA-256 (nil: no file; the fingerprint nil: unreadable).
    public var policyFile: String?
    public var policySHA256: String?
    /// Lines of the policy the guard could not read (it guards with the rest).
    public var policyErrors: Int
    public var logindReachable: Bool
    /// When the guard started, in seconds since the epoch (a restart shows as a change).
    public var startTime: Int64

    /// From the guard's state. `statuses`: what each verified agent last reported
    /// (`status --json`), for whether the agent runs with the admin's policy whole.
    public init(_ machine: GuardMachine, policyFile: String?, policySHA256: String?, policyErrors: Int,
                statuses: [String: JSONValue], logindReachable: Bool, startTime: Int64) {
        sessions = machine.sessions.keys.sorted().compactMap { id in
            guard let state = machine.sessions[id] else { return nil }
            let status = state.guarded ? statuses[id] : nil
            return Session(id: id, user: state.session.userName, display: state.session.display, remote: state.session.remote,
                           seat: state.session.seat, guarded: state.guarded, locked: state.locked,
                           policyMet: status.map { GuardMetrics.policyInForce($0, file: policyFile) } ?? false)
        }
        counts = machine.counts
        self.policyFile = policyFile
        self.policySHA256 = policySHA256
        self.policyErrors = policyErrors
        self.logindReachable = logindReachable
        self.startTime = startTime
    }

    /// The agent runs with the admin's policy, the guard's file, every line read: what
    /// every profile of `doctor --policy` asks first.
    static func policyInForce(_ status: JSONValue, file: String?) -> Bool {
        let reading = PolicyCheck.AgentFacts.policyReading(status)
        return PolicyCheck.AgentFacts.policyWhole(file: reading.file, errors: reading.errors, reported: reading.reported)
            && reading.file == file
    }

    /// The file name in the collector's directory (it reads `*.prom`).
    public static let fileName = "xidlelock.prom"

    /// Prometheus's text exposition format (version 0.0.4): HELP and TYPE before each
    /// family, one sample a line, label values escaped.
    public var text: String {
        var out = ""
        func family(_ name: String, _ type: String, _ help: String) {
            out += "# HELP \(name) \(GuardMetrics.escapedHelp(help))\n# TYPE \(name) \(type)\n"
        }
        func sample(_ name: String, _ labels: [(String, String)] = [], _ value: String) {
            out += name
            if !labels.isEmpty { out += GuardMetrics.labelSet(labels) }
            out += " \(value)\n"
        }
        func bool(_ b: Bool) -> String { b ? "1" : "0" }
        // Each session's labels, escaped once for its three gauges.
        let labels = sessions.map { s in
            GuardMetrics.labelSet([("session", s.id), ("user", s.user), ("display", s.display), ("remote", s.remote ? "yes" : "no"),
                                   ("seat", s.seat)])
        }
        func gauges(_ name: String, _ value: (Session) -> Bool) {
            for (k, s) in sessions.enumerated() { out += name + labels[k] + (value(s) ? " 1\n" : " 0\n") }
        }

        family("xidlelock_session_guarded", "gauge", "1 while a verified agent guards the graphical session (runs, not stopped, its loop answers), else 0.")
        gauges("xidlelock_session_guarded", \.guarded)
        family("xidlelock_session_locked", "gauge", "1 while the guard's own locker holds the session or its verified agent says its locker covers the screen, else 0.")
        gauges("xidlelock_session_locked", \.locked)
        family("xidlelock_session_policy_met", "gauge", "1 while the session's verified agent runs with the guard's policy file in force, every line read, else 0.")
        gauges("xidlelock_session_policy_met", \.policyMet)

        family("xidlelock_policy_info", "gauge", "The admin's policy file the guard runs with, and the SHA-256 of its bytes as sha256sum prints it (unreadable: the file could not be read).")
        if let policyFile { sample("xidlelock_policy_info", [("file", policyFile), ("sha256", policySHA256 ?? "unreadable")], "1") }
        family("xidlelock_policy_errors", "gauge", "Lines of the policy file the guard could not read (it guards with the others and its defaults).")
        sample("xidlelock_policy_errors", [], String(policyErrors))
        family("xidlelock_guard_logind_reachable", "gauge", "1 while the guard can ask logind about the sessions; 0: no session counts as guarded.")
        sample("xidlelock_guard_logind_reachable", [], bool(logindReachable))
        family("xidlelock_guard_start_time_seconds", "gauge", "When the guard started, in seconds since the epoch.")
        sample("xidlelock_guard_start_time_seconds", [], String(startTime))

        family("xidlelock_agents_lost_total", "counter", "Verified agents lost since the guard started, by how (ended, stopped, frozen, unwatchable, disconnected, unresponsive, lockers_failing).")
        for how in AgentLoss.kinds { sample("xidlelock_agents_lost_total", [("how", how)], String(counts.agentsLost[how] ?? 0)) }
        family("xidlelock_guard_locks_total", "counter", "Lockers the guard started in sessions whose agent was lost.")
        sample("xidlelock_guard_locks_total", [], String(counts.guardLocks))
        family("xidlelock_guard_logoffs_total", "counter", "Sessions the guard logged off (on-agent-lost logoff, its locker failing, an X server that does not answer).")
        sample("xidlelock_guard_logoffs_total", [], String(counts.logoffs))
        family("xidlelock_registrations_refused_total", "counter", "Registrations the guard refused: a peer that is not a verified agent of a watched session.")
        sample("xidlelock_registrations_refused_total", [], String(counts.refusedRegistrations))
        family("xidlelock_locker_failures_total", "counter", "Lockers that failed (killed, exited non-zero, returned at once, never covered): the guard's own, and those the verified agents said.")
        sample("xidlelock_locker_failures_total", [("locker", "guard")], String(counts.guardLockerFailures))
        sample("xidlelock_locker_failures_total", [("locker", "agent")], String(counts.agentLockerFailures))
        return out
    }

    /// `{name="value",…}`.
    static func labelSet(_ labels: [(String, String)]) -> String {
        var out = "{"
        for (k, (name, value)) in labels.enumerated() {
            if k > 0 { out += "," }
            out += name + "=\"" + escapedLabel(value) + "\""
        }
        return out + "}"
    }

    /// A label value: backslash, double quote and line feed escaped.
    static func escapedLabel(_ value: String) -> String { escaped(value, quotes: true) }

    /// A HELP text: backslash and line feed escaped.
    static func escapedHelp(_ text: String) -> String { escaped(text, quotes: false) }

    private static func escaped(_ value: String, quotes: Bool) -> String {
        // Most values (ids, user names, displays) need nothing: no copy made.
        guard value.utf8.contains(where: { $0 == 0x5C || $0 == 0x0A || ($0 == 0x22 && quotes) }) else { return value }
        var out = ""
        // By scalar: "\r\n" is one Character, and its line feed must be escaped too.
        for c in value.unicodeScalars {
            switch c {
            case "\\": out += "\\\\"
            case "\"" where quotes: out += "\\\""
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }
}
