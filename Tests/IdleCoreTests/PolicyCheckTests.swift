@testable import IdleCore
import Testing

/// `doctor --policy FILE`: a profile (a policy file read as requirements) held against
/// the running agent's status.
@Suite("doctor --policy")
struct PolicyCheckTests {
    static let profilePath = "/usr/share/doc/xidlelock/examples/policy.stig"
    static let profile = """
        # STIG/CIS
        max-lock-after 15m
        secure
        lock-at-start
        inhibit-from none
        max-inhibit 1h

        """

    /// The status of an agent started with `flags` under the admin's policy `policy`
    /// (nil: none), as the agent reports it.
    static func status(_ flags: [String], policy: String?, locker: String = "i3lock -n", extra: [(String, JSONValue)] = []) throws -> JSONValue {
        let sources = ConfigSources(read: { path in
            path == "/etc/xidlelock/policy" ? policy.map(FileContents.text) ?? .missing : .missing
        }, variable: { _ in nil })
        guard case .agent(let options) = try Invocation.parse(flags, sources: sources) else { throw UsageError("not an agent") }
        let machine = IdleMachine(config: options.config(locker: locker), now: Instant(monotonic: .seconds(10), boottime: .seconds(10)))
        return .object(machine.statusFields(at: Instant(monotonic: .seconds(20), boottime: .seconds(20)), lockerPid: nil) + extra)
    }

    /// Every program is the admin's (the edge's file check is not under test here).
    static let anyOwner: PolicyCheck.ProgramOwnership = { _ in nil }

    static func requirements(_ text: String = profile) throws -> [ReportedSetting] {
        try PolicyCheck.requirements(.text(text), path: profilePath)
    }

    func unmet(_ report: PolicyCheckReport) -> [String] { report.requirements.filter { !$0.met }.map(\.requirement) }

    @Test("an agent whose admin's policy sets each requirement as strictly meets the profile")
    func met() throws {
        let status = try Self.status(["--lock-after", "5m"], policy: "max-lock-after 10m\nsecure\nlock-at-start\n")
        let report = PolicyCheck.check(try Self.requirements(), path: Self.profilePath, status: status, ownership: Self.anyOwner)
        #expect(unmet(report) == [], "\(report.text)")
        #expect(report.met)
        #expect(report.text.contains("met      max-lock-after 15m: the agent locks after 5m; /etc/xidlelock/policy keeps it at 10m or less"), "\(report.text)")
        #expect(report.text.hasSuffix("=> the agent meets every requirement of \(Self.profilePath)"))
        #expect(report.json["met"] == .bool(true))
    }

    @Test("the profile's locker: the admin's program, by absolute path (found in the system's directories), root's file; a bare name, or a file of the user's, is not met")
    func lockerIsTheAdmins() throws {
        let requirements = try Self.requirements("locker i3lock -n\n")
        let resolved = try Self.status([], policy: "locker i3lock -n\n", locker: "/usr/bin/i3lock -n")
        let met = PolicyCheck.check(requirements, path: Self.profilePath, status: resolved, ownership: Self.anyOwner)
        #expect(met.met, "\(met.text)")
        #expect(met.text.contains("met      locker i3lock -n: `/usr/bin/i3lock -n`, set by /etc/xidlelock/policy"), "\(met.text)")

        let usersFile = PolicyCheck.check(requirements, path: Self.profilePath, status: resolved,
                                          ownership: { "\($0) is owned by uid 1000, not root" })
        #expect(usersFile.text.contains("NOT MET  locker i3lock -n: `/usr/bin/i3lock` is not the admin's: /usr/bin/i3lock is owned by uid 1000, not root"),
                "\(usersFile.text)")

        let bare = PolicyCheck.check(requirements, path: Self.profilePath, status: try Self.status([], policy: "locker i3lock -n\n"),
                                     ownership: Self.anyOwner)
        #expect(bare.text.contains("NOT MET  locker i3lock -n: the agent runs `i3lock -n`: `i3lock` is not named by an absolute path"), "\(bare.text)")

        let other = PolicyCheck.check(requirements, path: Self.profilePath,
                                      status: try Self.status([], policy: "locker i3lock -n\n", locker: "/home/u/bin/i3lock -n -c 000000"),
                                      ownership: Self.anyOwner)
        #expect(!other.met, "\(other.text)")
    }

    @Test("ignore-xtest: met when the admin's policy sets it or secure; not when only the user's flag does")
    func ignoreXtest() throws {
        let profile = try Self.requirements("ignore-xtest\n")
        func detail(_ flags: [String], _ policy: String?) throws -> (Bool, String) {
            let report = PolicyCheck.check(profile, path: Self.profilePath, status: try Self.status(flags, policy: policy), ownership: Self.anyOwner)
            let r = try #require(report.requirements.first { $0.requirement == "ignore-xtest" })
            return (r.met, r.detail)
        }
        #expect(try detail([], "ignore-xtest\n") == (true, "XTEST input (xdotool, jigglers, remote sessions) is not activity; set by /etc/xidlelock/policy"))
        #expect(try detail([], "secure\n") == (true, "/etc/xidlelock/policy sets secure, which counts no XTEST input"))
        #expect(try detail(["--ignore-xtest"], "max-lock-after 1h\n").0 == false)
        #expect(try detail([], "max-lock-after 1h\n").0 == false)
    }

    @Test("the guard's settings: on-agent-lost and agent-grace are met by the admin's policy (or its defaults), not otherwise")
    func guardSettings() throws {
        let profile = try Self.requirements("on-agent-lost lock\nagent-grace 10s\n")
        let met = PolicyCheck.check(profile, path: Self.profilePath, status: try Self.status([], policy: "on-agent-lost lock\nagent-grace 5s\n"),
                                    ownership: Self.anyOwner)
        #expect(met.met, "\(met.text)")
        let defaults = PolicyCheck.check(profile, path: Self.profilePath, status: try Self.status([], policy: "secure\n"), ownership: Self.anyOwner)
        #expect(defaults.met, "\(defaults.text)")
        let logoff = PolicyCheck.check(profile, path: Self.profilePath, status: try Self.status([], policy: "on-agent-lost logoff\nagent-grace 1m\n"),
                                       ownership: Self.anyOwner)
        #expect(unmet(logoff) == ["on-agent-lost lock", "agent-grace 10s"], "\(logoff.text)")
        let none = PolicyCheck.check(profile, path: Self.profilePath, status: try Self.status([], policy: nil), ownership: Self.anyOwner)
        #expect(unmet(none).contains("on-agent-lost lock") && unmet(none).contains("agent-grace 10s"), "\(none.text)")
    }

    @Test("each requirement the agent does not meet is named with why")
    func notMet() throws {
        // The user's own flags meet some of it, but nothing stops the user undoing them.
        let status = try Self.status(["--lock-after", "30m", "--secure", "--lock-at-start"], policy: "inhibit-from dbus, audio\n")
        let report = PolicyCheck.check(try Self.requirements(), path: Self.profilePath, status: status, ownership: Self.anyOwner)
        #expect(!report.met)
        #expect(unmet(report) == ["max-lock-after 15m", "secure", "lock-at-start", "inhibit-from none", "max-inhibit 1h"], "\(report.text)")
        let details = Dictionary(uniqueKeysWithValues: report.requirements.map { ($0.requirement, $0.detail) })
        #expect(details["max-lock-after 15m"] == "the agent locks after 30m, above 15m")
        #expect(details["secure"] == "in force, but not set by /etc/xidlelock/policy: the user can turn it off")
        #expect(details["inhibit-from none"] == "/etc/xidlelock/policy also lets dbus, audio hold the lock off")
        #expect(report.text.hasSuffix("=> 5 of 7 requirements of \(Self.profilePath) NOT met"), "\(report.text)")
    }

    @Test("a lock time within the limit is not enough: the policy must keep the user from raising it")
    func lockTimeNotLocked() throws {
        let status = try Self.status(["--lock-after", "5m"], policy: "max-lock-after 1h\nsecure\n")
        let report = PolicyCheck.check(try Self.requirements("max-lock-after 15m\n"), path: Self.profilePath, status: status, ownership: Self.anyOwner)
        #expect(report.requirements.last?.detail == "the agent locks after 5m, but /etc/xidlelock/policy lets the user set up to 1h, above 15m")
        let none = try Self.status(["--lock-after", "5m"], policy: nil)
        let without = PolicyCheck.check(try Self.requirements("max-lock-after 15m\n"), path: Self.profilePath, status: none, ownership: Self.anyOwner)
        #expect(unmet(without) == ["policy", "max-lock-after 15m"], "\(without.text)")
    }

    @Test("card removal: an agent without it (older), with it off, with it failing, with it on and set by the policy")
    func cardRemoval() throws {
        let requirements = try Self.requirements("lock-on-card-removal\n")
        /// The real agent's status under `policy`, its card object replaced by `card`
        /// (pcscd's state is the edge's), or taken out (an agent from before card removal).
        func detail(_ card: JSONValue?, policy: String = "secure\nlock-on-card-removal\n") throws -> String? {
            guard case .object(let members) = try Self.status([], policy: policy) else { return nil }
            let status = JSONValue.object(members.filter { $0.0 != "card" } + (card.map { [("card", $0)] } ?? []))
            let report = PolicyCheck.check(requirements, path: Self.profilePath, status: status, ownership: Self.anyOwner)
            return report.requirements.last.map { ($0.met ? "met: " : "") + $0.detail }
        }
        #expect(try detail(nil) == "this agent has no card removal (lock-on-card-removal): it does not lock when the smart card is removed")
        #expect(try detail(.object([("lock_on_removal", .bool(false)), ("error", .null)])) == "the agent does not lock when the smart card is removed")
        #expect(try detail(.object([("lock_on_removal", .bool(true)), ("error", .string("pcscd is not running"))])) == "the agent cannot watch the smart card: pcscd is not running")
        #expect(try detail(.object([("lock_on_removal", .bool(true)), ("error", .null)]))?.hasPrefix("met: removing the smart card locks the screen; set by /etc/xidlelock/policy") == true)
        // The user's own --lock-on-card-removal is not the admin's: not met.
        #expect(try detail(.object([("lock_on_removal", .bool(true)), ("error", .null)]), policy: "secure\n")?.hasPrefix("met") == false)
    }

    @Test("no agent: every requirement is not met, the first says why")
    func noAgent() throws {
        let report = PolicyCheck.check(try Self.requirements(), path: Self.profilePath, status: nil,
                                       agentProblem: "no agent answers at /run/user/1000/xidlelock/0.sock", ownership: Self.anyOwner)
        #expect(!report.met)
        #expect(report.requirements.first?.detail == "no agent answers at /run/user/1000/xidlelock/0.sock: nothing can be checked")
        #expect(report.requirements.allSatisfy { !$0.met })
    }

    @Test("the agent's policy with a line it could not read is not met (it runs secure by accident)")
    func brokenPolicy() throws {
        let status = try Self.status([], policy: "max-lock-after 10m\nlock-after-max 5m\n")
        let report = PolicyCheck.check(try Self.requirements("max-lock-after 15m\n"), path: Self.profilePath, status: status, ownership: Self.anyOwner)
        #expect(unmet(report) == ["policy"], "\(report.text)")
        #expect(report.requirements[1].detail.contains("/etc/xidlelock/policy:2: unknown setting 'lock-after-max'"), "\(report.text)")
    }

    @Test("a bad profile is an error naming the file and line, never a pass", arguments: [
        ("max-lock-after 15m\nsecure yes\n", "doctor --policy: /usr/share/doc/xidlelock/examples/policy.stig:2: 'secure' takes no value"),
        ("max-lock-after soon\n", "doctor --policy: /usr/share/doc/xidlelock/examples/policy.stig:1: max-lock-after: 'soon' is not a duration (examples: 90, 90s, 500ms, 5m, 1h30m)"),
        ("# only comments\n\n", "doctor --policy: /usr/share/doc/xidlelock/examples/policy.stig sets no requirement (write the policy settings it asks for, e.g. max-lock-after 15m)"),
    ])
    func badProfile(text: String, error: String) {
        #expect(throws: UsageError(error)) { try Self.requirements(text) }
        #expect(throws: UsageError("doctor --policy: /nowhere does not exist")) { try PolicyCheck.requirements(.missing, path: "/nowhere") }
    }

    @Test("doctor --policy FILE is parsed; an empty path is refused")
    func parse() throws {
        #expect(try Invocation.parse(["doctor", "--policy", "p.stig", "--json"]) == .doctor({
            var o = DoctorOptions(); o.policy = "p.stig"; o.json = true; return o
        }()))
        #expect(throws: UsageError("--policy: the path is empty")) { try Invocation.parse(["doctor", "--policy", ""]) }
    }
}
