import Foundation
import Testing

/// The audit trail, end to end: read back from the systemd journal where journald
/// runs (CI starts one: .ci/start-journald), else from the stderr lines the agent
/// writes where there is no journal.
@Suite struct AuditTests {
    /// Whether a journald takes entries on this machine.
    static let journalRuns: Bool = {
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/systemd-cat")
        probe.arguments = ["true"]
        probe.standardError = FileHandle.nullDevice
        guard (try? probe.run()) != nil else { return false }
        probe.waitUntilExit()
        return probe.terminationStatus == 0
    }()

    /// The journal's entries of this agent for one event, each as its fields.
    func journalEntries(_ s: Sandbox, pid: Int32, event: String) async throws -> [[String: Any]] {
        let out = try await s.x("journalctl", "--no-pager", "-o", "json", "-t", "xidlelock", "_PID=\(pid)", "XIDLELOCK_EVENT=\(event)")
        return out.split(separator: "\n").compactMap { jsonObject(String($0)) }
    }

    @Test("a lock, its unlock, a disable and an enable are each an entry with their fields")
    func lockUnlockDisable() async throws {
        try await Sandbox.with { s in
            try await s.x("xdotool", "key", "shift")
            let agent = try await s.startControlledAgent(["--lock-after", "2s", "--locker", Script.grabbingLocker()])
            _ = try await s.waitForLines("lockers.pids")
            s.touch("unlock")
            try await agent.waitForLog(containing: "unlocked after")
            #expect(try await s.client("disable", "--for", "1h").exit == .exited(0))
            #expect(try await s.client("enable").exit == .exited(0))
            let pid = agent.process.processIdentifier
            if Self.journalRuns {
                var lock: [[String: Any]] = []
                var enable: [[String: Any]] = []
                try await s.waitUntil("the journal to hold the lock and the enable") {
                    lock = try await journalEntries(s, pid: pid, event: "lock")
                    enable = try await journalEntries(s, pid: pid, event: "enable")
                    return !lock.isEmpty && !enable.isEmpty
                }
                #expect(lock.first?["MESSAGE_ID"] as? String == "33f4aa3521f84341af05baeccf12149c")
                #expect(lock.first?["PRIORITY"] as? String == "5")
                #expect(Int(lock.first?["XIDLELOCK_IDLE_MS"] as? String ?? "") ?? 0 >= 2000, "\(lock)")
                let unlock = try await journalEntries(s, pid: pid, event: "unlock")
                #expect(Int(unlock.first?["XIDLELOCK_LOCKED_MS"] as? String ?? "") ?? 0 >= 1100, "\(unlock)")
                let disable = try await journalEntries(s, pid: pid, event: "disable")
                #expect(disable.first?["XIDLELOCK_FOR_MS"] as? String == "3600000", "\(disable)")
                #expect((disable.first?["XIDLELOCK_BY"] as? String)?.contains("(xidlelock)") == true, "\(disable)")
                #expect((enable.first?["XIDLELOCK_BY"] as? String)?.contains("(xidlelock)") == true, "\(enable)")
            } else {
                try await agent.waitForLog(containing: "audit enable:")
                #expect(agent.log.contains("audit lock: screen locked: the locker holds the keyboard (after "), "\(agent.log)")
                #expect(agent.log.contains("audit unlock: screen unlocked after"), "\(agent.log)")
                #expect(agent.log.contains("XIDLELOCK_FOR_MS=\"3600000\""), "\(agent.log)")
            }
        }
    }

    @Test("the policy's clamp is an entry of its own, and so is an inhibitor's start and end")
    func policyAndInhibitor() async throws {
        try await Sandbox.with { s in
            try s.writePolicy("max-lock-after 1h\n")
            let agent = try await s.startControlledAgent(["--lock-after", "2h", "--locker", Script.locker, "--quiet"])
            #expect(try await s.client("inhibit", "--why", "slides", "--for", "100ms").exit == .exited(0))
            let pid = agent.process.processIdentifier
            if Self.journalRuns {
                var policy: [[String: Any]] = []
                var uninhibit: [[String: Any]] = []
                try await s.waitUntil("the journal to hold the policy's change and the inhibitor's end") {
                    policy = try await journalEntries(s, pid: pid, event: "policy")
                    uninhibit = try await journalEntries(s, pid: pid, event: "uninhibit")
                    return !policy.isEmpty && !uninhibit.isEmpty
                }
                #expect((policy.first?["MESSAGE"] as? String)?.contains("locking at 1h") == true, "\(policy)")
                #expect(policy.first?["XIDLELOCK_POLICY_FILE"] as? String == s.path("etc/policy"))
                let inhibit = try await journalEntries(s, pid: pid, event: "inhibit")
                #expect(inhibit.first?["XIDLELOCK_WHY"] as? String == "slides", "\(inhibit)")
                #expect(inhibit.first?["XIDLELOCK_SOURCE"] as? String == "socket", "\(inhibit)")
            } else {
                // --quiet drops info lines, never the audit trail.
                try await agent.waitForLog(containing: "audit uninhibit:")
                #expect(agent.log.contains("audit policy: policy \(s.path("etc/policy")): lock-after 2h"), "\(agent.log)")
                #expect(agent.log.contains("XIDLELOCK_WHY=\"slides\""), "\(agent.log)")
            }
        }
    }
}
