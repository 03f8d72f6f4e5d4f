@testable import IdleCore
import Testing

/// The guard's metrics file: what it says of each session, the policy and the guard,
/// what the machine counted, and that it changes only when one of those does.
@Suite("The guard's metrics")
struct GuardMetricsTests {
    static let policyFile = "/etc/xidlelock/policy"

    /// An agent's status as the guard keeps it: the admin's policy in force, `errors` unread lines.
    static func status(file: String = policyFile, errors: [String] = []) -> JSONValue {
        .object([("state", .string("idle")),
                 ("policy", .object([("file", .string(file)), ("settings", .array([])), ("errors", .array(errors.map { .string($0) }))]))])
    }

    static func metrics(_ s: GuardStory, statuses: [String: JSONValue] = [:], logind: Bool = true) -> GuardMetrics {
        GuardMetrics(s.machine, policyFile: policyFile, policySHA256: "ab12", policyErrors: 0, statuses: statuses,
                     logindReachable: logind, startTime: 1_700_000_000)
    }

    /// The sample lines of a family, without HELP and TYPE.
    static func samples(_ text: String, _ name: String) -> [String] {
        text.split(separator: "\n").map(String.init).filter { $0.hasPrefix(name + "{") || $0.hasPrefix(name + " ") }
    }

    @Test("the file, whole: each family with HELP and TYPE, per-session gauges labelled, the policy's fingerprint, the guard's health, every counter from 0")
    func wholeText() {
        var s = GuardStory()
        s.guarded()
        s.send(.sessionSeen(GuardedSession(id: "c7", uid: 1001, userName: "bob", display: ":10", active: true, remote: true)))
        let text = Self.metrics(s, statuses: [s.session.id: Self.status()]).text
        #expect(text == """
            # HELP xidlelock_session_guarded 1 while a verified agent guards the graphical session (runs, not stopped, its loop answers), else 0.
            # TYPE xidlelock_session_guarded gauge
            xidlelock_session_guarded{session="c2",user="alice",display=":0",remote="no",seat=""} 1
            xidlelock_session_guarded{session="c7",user="bob",display=":10",remote="yes",seat=""} 0
            # HELP xidlelock_session_locked 1 while the guard's own locker holds the session or its verified agent says its locker covers the screen, else 0.
            # TYPE xidlelock_session_locked gauge
            xidlelock_session_locked{session="c2",user="alice",display=":0",remote="no",seat=""} 0
            xidlelock_session_locked{session="c7",user="bob",display=":10",remote="yes",seat=""} 0
            # HELP xidlelock_session_policy_met 1 while the session's verified agent runs with the guard's policy file in force, every line read, else 0.
            # TYPE xidlelock_session_policy_met gauge
            xidlelock_session_policy_met{session="c2",user="alice",display=":0",remote="no",seat=""} 1
            xidlelock_session_policy_met{session="c7",user="bob",display=":10",remote="yes",seat=""} 0
            # HELP xidlelock_policy_info The admin's policy file the guard runs with, and the SHA-256 of its bytes as sha256sum prints it (unreadable: the file could not be read).
            # TYPE xidlelock_policy_info gauge
            xidlelock_policy_info{file="/etc/xidlelock/policy",sha256="ab12"} 1
            # HELP xidlelock_policy_errors Lines of the policy file the guard could not read (it guards with the others and its defaults).
            # TYPE xidlelock_policy_errors gauge
            xidlelock_policy_errors 0
            # HELP xidlelock_guard_logind_reachable 1 while the guard can ask logind about the sessions; 0: no session counts as guarded.
            # TYPE xidlelock_guard_logind_reachable gauge
            xidlelock_guard_logind_reachable 1
            # HELP xidlelock_guard_start_time_seconds When the guard started, in seconds since the epoch.
            # TYPE xidlelock_guard_start_time_seconds gauge
            xidlelock_guard_start_time_seconds 1700000000
            # HELP xidlelock_agents_lost_total Verified agents lost since the guard started, by how (ended, stopped, frozen, unwatchable, disconnected, unresponsive, lockers_failing).
            # TYPE xidlelock_agents_lost_total counter
            xidlelock_agents_lost_total{how="ended"} 0
            xidlelock_agents_lost_total{how="stopped"} 0
            xidlelock_agents_lost_total{how="frozen"} 0
            xidlelock_agents_lost_total{how="unwatchable"} 0
            xidlelock_agents_lost_total{how="disconnected"} 0
            xidlelock_agents_lost_total{how="unresponsive"} 0
            xidlelock_agents_lost_total{how="lockers_failing"} 0
            # HELP xidlelock_guard_locks_total Lockers the guard started in sessions whose agent was lost.
            # TYPE xidlelock_guard_locks_total counter
            xidlelock_guard_locks_total 0
            # HELP xidlelock_guard_logoffs_total Sessions the guard logged off (on-agent-lost logoff, its locker failing, an X server that does not answer).
            # TYPE xidlelock_guard_logoffs_total counter
            xidlelock_guard_logoffs_total 0
            # HELP xidlelock_registrations_refused_total Registrations the guard refused: a peer that is not a verified agent of a watched session.
            # TYPE xidlelock_registrations_refused_total counter
            xidlelock_registrations_refused_total 0
            # HELP xidlelock_locker_failures_total Lockers that failed (killed, exited non-zero, returned at once, never covered): the guard's own, and those the verified agents said.
            # TYPE xidlelock_locker_failures_total counter
            xidlelock_locker_failures_total{locker="guard"} 0
            xidlelock_locker_failures_total{locker="agent"} 0

            """)
    }

    @Test("every family is named xidlelock_, has one HELP and one TYPE before its samples, and a counter's name ends in _total")
    func conventions() {
        var s = GuardStory()
        s.guarded()
        let lines = Self.metrics(s).text.split(separator: "\n").map(String.init)
        var typed: [String: String] = [:]
        for (k, line) in lines.enumerated() where line.hasPrefix("# TYPE ") {
            let words = line.split(separator: " ").map(String.init)
            #expect(words.count == 4 && words[2].hasPrefix("xidlelock_"), "\(line)")
            #expect(k > 0 && lines[k - 1].hasPrefix("# HELP \(words[2]) "), "no HELP right before \(line)")
            #expect(typed[words[2]] == nil, "two TYPE lines for \(words[2])")
            typed[words[2]] = words[3]
            #expect((words[3] == "counter") == words[2].hasSuffix("_total"), "\(line)")
        }
        for line in lines where !line.hasPrefix("#") {
            let name = String(line.prefix { $0 != "{" && $0 != " " })
            #expect(typed[name] != nil, "a sample of no family: \(line)")
        }
        #expect(typed.count == 12)
    }

    @Test("a session's gauges follow the machine: guarded, then lost (not guarded), the guard's locker (locked), the agent back")
    func sessionGaugesFollowTheMachine() {
        var s = GuardStory()
        s.guarded()
        func gauge(_ name: String) -> String? { Self.samples(Self.metrics(s).text, name).first.map { String($0.split(separator: " ").last!) } }
        #expect(gauge("xidlelock_session_guarded") == "1")
        #expect(gauge("xidlelock_session_locked") == "0")
        s.send(.agentReported(session: s.session.id, locked: true))
        #expect(gauge("xidlelock_session_locked") == "1")
        s.send(.agentLost(session: s.session.id, loss: .ended))
        #expect(gauge("xidlelock_session_guarded") == "0")
        #expect(gauge("xidlelock_session_locked") == "0", "a lost agent's word on its lock is not the guard's")
        let acted = s.wait(.seconds(10))
        #expect(acted.lockerStarts == 1)
        s.send(.lockerStarted(session: s.session.id, pid: 77))
        #expect(gauge("xidlelock_session_locked") == "1")
        s.send(.agentVerified(session: s.session.id, agent: VerifiedAgent(pid: 4343, executable: "/usr/bin/xidlelock")))
        #expect(gauge("xidlelock_session_guarded") == "1")
        s.send(.sessionGone(id: s.session.id))
        #expect(Self.samples(Self.metrics(s).text, "xidlelock_session_guarded").isEmpty)
    }

    @Test("the counters: agents lost by how, the guard's locks, locker failures (the guard's and the agents'), logoffs, refusals at the machine and at the edge")
    func counters() {
        var s = GuardStory()
        s.guarded()
        s.send(.agentLockerFailed(session: s.session.id))
        s.send(.agentLost(session: s.session.id, loss: .stopped(signal: 19)))
        s.send(.agentLost(session: s.session.id, loss: .ended))  // the same loss, now for good: not a second
        s.wait(.seconds(10))
        s.send(.lockerStarted(session: s.session.id, pid: 77))
        s.send(.lockerEnded(session: s.session.id, pid: 77, exitStatus: nil, signal: 9))
        s.wait(.seconds(5))
        s.send(.lockerStarted(session: s.session.id, pid: 78))
        s.send(.lockerEnded(session: s.session.id, pid: 78, exitStatus: 1, signal: 0))
        s.wait(.seconds(5))
        s.send(.lockerCouldNotStart(session: s.session.id, reason: "no such file"))
        s.send(.agentVerified(session: "c9", agent: s.agent))
        _ = s.machine.refused(pid: 5, uid: 1000, reason: "its executable is not xidlelock")
        let counts = s.machine.counts
        #expect(counts.agentsLost == ["stopped": 1])
        #expect(counts.guardLocks == 2)
        #expect(counts.guardLockerFailures == 3)
        #expect(counts.agentLockerFailures == 1)
        #expect(counts.logoffs == 1, "three failed lockers in a row log the session off")
        #expect(counts.refusedRegistrations == 2)
        let text = Self.metrics(s).text
        #expect(Self.samples(text, "xidlelock_agents_lost_total").contains("xidlelock_agents_lost_total{how=\"stopped\"} 1"))
        #expect(Self.samples(text, "xidlelock_locker_failures_total") == ["xidlelock_locker_failures_total{locker=\"guard\"} 3",
                                                                         "xidlelock_locker_failures_total{locker=\"agent\"} 1"])
        #expect(Self.samples(text, "xidlelock_guard_logoffs_total") == ["xidlelock_guard_logoffs_total 1"])
        #expect(Self.samples(text, "xidlelock_registrations_refused_total") == ["xidlelock_registrations_refused_total 2"])
    }

    @Test("the metrics do not change with what they do not show: a proof of life, a lock due, an agent's status that says the same")
    func unchangedWithoutChange() {
        var s = GuardStory()
        s.guarded()
        let before = Self.metrics(s, statuses: [s.session.id: Self.status()])
        s.send(.agentAnswered(session: s.session.id))
        s.send(.agentSaysLockDue(session: s.session.id, in: .minutes(5)))
        s.wait(.minutes(30))
        var status = Self.status()
        if case .object(var fields) = status { fields[0] = ("state", .string("locked")); status = .object(fields) }
        #expect(Self.metrics(s, statuses: [s.session.id: status]) == before)
        #expect(Self.metrics(s, statuses: [s.session.id: status], logind: false) != before)
    }

    @Test("policy met: the verified agent runs with the guard's own policy file, every line read")
    func policyMet() {
        var s = GuardStory()
        s.guarded()
        func met(_ status: JSONValue?) -> Bool? {
            Self.metrics(s, statuses: status.map { [s.session.id: $0] } ?? [:]).sessions.first?.policyMet
        }
        #expect(met(Self.status()) == true)
        #expect(met(Self.status(errors: ["/etc/xidlelock/policy:3: bad"])) == false)
        #expect(met(Self.status(file: "/tmp/other")) == false)
        #expect(met(.object([("state", .string("idle")), ("policy", .null)])) == false)
        #expect(met(nil) == false)
        s.send(.agentLost(session: s.session.id, loss: .ended))
        #expect(met(Self.status()) == false, "an unguarded session meets nothing")
    }

    @Test("label values escape backslash, double quote and line feed (also in CRLF); HELP has none of them")
    func escaping() {
        var s = GuardStory()
        s.send(.sessionSeen(GuardedSession(id: "c\"1", uid: 1, userName: "a\\b\r\nc", display: ":0", active: false, seat: "seat0")))
        let line = Self.samples(Self.metrics(s).text, "xidlelock_session_guarded").first
        #expect(line == #"xidlelock_session_guarded{session="c\"1",user="a\\b\#r\nc",display=":0",remote="no",seat="seat0"} 0"#)
    }

    @Test("no policy file: no policy_info sample; an unreadable one is said so")
    func policyInfo() {
        let s = GuardStory()
        let none = GuardMetrics(s.machine, policyFile: nil, policySHA256: nil, policyErrors: 0, statuses: [:], logindReachable: true, startTime: 1)
        #expect(Self.samples(none.text, "xidlelock_policy_info").isEmpty)
        let unreadable = GuardMetrics(s.machine, policyFile: "/p", policySHA256: nil, policyErrors: 1, statuses: [:], logindReachable: true, startTime: 1)
        #expect(Self.samples(unreadable.text, "xidlelock_policy_info") == [#"xidlelock_policy_info{file="/p",sha256="unreadable"} 1"#])
        #expect(Self.samples(unreadable.text, "xidlelock_policy_errors") == ["xidlelock_policy_errors 1"])
    }

    @Test("SHA-256 as sha256sum prints it (FIPS 180-4's examples, and a message over two blocks)")
    func sha256() {
        #expect(SHA256.hex([]) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hex(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hex(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(SHA256.hex(Array(repeating: UInt8(ascii: "a"), count: 1000))
                == "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3")
    }

    @Test("metrics-directory: an absolute path, or none; Debian's node_exporter directory by default")
    func metricsDirectorySetting() {
        func read(_ line: String) -> (GuardSettings, [String]) {
            let (policy, _, errors) = Policy.read([(1, line)], path: "/etc/xidlelock/policy")
            return (policy.guardSettings, errors)
        }
        #expect(read("secure").0.metricsDirectory == "/var/lib/prometheus/node-exporter")
        #expect(read("metrics-directory /srv/prom").0.metricsDirectory == "/srv/prom")
        #expect(read("metrics-directory none").0.metricsDirectory == nil)
        #expect(read("metrics-directory prom").1 == ["/etc/xidlelock/policy:1: metrics-directory: 'prom' is not an absolute path or none"])
    }
}
