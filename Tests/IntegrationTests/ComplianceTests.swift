import Foundation
import Testing

/// Issue #22: what an auditor asks of a screen lock, on a real Xvfb with real lockers.
@Suite(.serialized) struct ComplianceTests {
    @Test("a stage after the lock (log off after a time locked) fires while the locker holds the screen",
          arguments: ["test locker", "i3lock -n"])
    func stageAfterLock(locker: String) async throws {
        let command = locker == "i3lock -n" ? "exec i3lock -n" : Script.grabbingLocker()
        try await Sandbox.with { s in
            try await s.x("xdotool", "key", "shift")
            let agent = try await s.startControlledAgent(["--lock-after", "1s", "--locker", command,
                                                          "--stage", "logoff=4s:echo $XIDLELOCK_IDLE_MS > logoff.idle"])
            let pid = try await s.waitForCoveringLocker()
            let idle = try await s.waitForNumber(in: "logoff.idle")
            #expect(idle >= 4000 + earliestLock && idle <= 4000 + latestLock, "the log-off at \(idle) ms of idle\n\(agent.log)")
            let status = try await s.status()
            #expect(status["state"] as? String == "locked", "\(status)")
            #expect(status["locker_pid"] as? Int == Int(pid), "the same locker holds the screen\n\(agent.log)")
            #expect(agent.count(of: "locking after") == 1, "\(agent.log)")
        }
    }

    @Test("--lock-at-start: locked before anything else, LockedHint set once the locker holds; disable does not end it, the unlock does")
    func lockAtStart() async throws {
        try await Sandbox.with(buses: true) { s in
            let agent = try await s.startControlledAgent(["--lock-after", "1h", "--lock-at-start", "--locker", Script.grabbingLocker()])
            let pid = try await s.waitForCoveringLocker()
            #expect(agent.log.contains("lock requested by the start (--lock-at-start)"), "\(agent.log)")
            try await s.waitUntil("LockedHint true") { try await s.bus("locked-hint") == "true" }
            #expect(try await s.client("disable").exit == .exited(0))
            #expect(isAlive(pid), "\(agent.log)")
            #expect(try await s.status()["state"] as? String == "locked")
            s.touch("unlock")
            try await agent.waitForLog(containing: "unlocked after")
            try await s.waitUntil("LockedHint false") { try await s.bus("locked-hint") == "false" }
        }
    }

    @Test("the policy's lock-at-start: a locker that returns at once is started again until one holds the screen")
    func lockAtStartFromPolicy() async throws {
        try await Sandbox.with { s in
            try s.writePolicy("lock-at-start\n")
            // The first start returns at once (as i3lock without -n does).
            let locker = "echo . >> starts; [ $(wc -l < starts) -ge 2 ] || exit 0; \(Script.grabbingLocker())"
            let agent = try await s.startControlledAgent(["--lock-after", "1h", "--locker", locker])
            _ = try await s.waitForCoveringLocker()
            #expect(s.lines("starts").count == 2, "\(agent.log)")
            #expect(agent.log.contains("the screen may NOT be locked"), "\(agent.log)")
            let settings = try await s.status()["settings"] as? [[String: Any]] ?? []
            let setting = settings.first { $0["name"] as? String == "lock-at-start" }
            #expect(setting?["from"] as? String == "policy \(s.path("etc/policy"))", "\(settings)")
        }
    }

    @Test("doctor --policy: exit 0 printing each requirement met; exit 1 naming each one not met; 64 for a bad profile; no agent is not met")
    func doctorPolicy() async throws {
        try await Sandbox.with { s in
            try s.writePolicy("max-lock-after 10m\nsecure\nlock-on-switch\n")
            try s.write("max-lock-after 15m\nsecure\ninhibit-from dbus\n", to: "met.profile")
            try s.write("lock-on-switch\n", to: "switch.profile")
            try s.write("max-lock-after 5m\nsecure\nlock-at-start\n", to: "unmet.profile")
            try s.write("max-lock-after\n", to: "bad.profile")
            _ = try await s.startControlledAgent(["--lock-after", "1h", "--locker", Script.locker])
            let met = try await s.client("doctor", "--policy", s.path("met.profile"))
            #expect(met.exit == .exited(0), "\(met.stdout)\(met.stderr)")
            #expect(met.stdout.contains("met      max-lock-after 15m: the agent locks after 10m; \(s.path("etc/policy")) keeps it at 10m or less"), "\(met.stdout)")
            #expect(met.stdout.contains("met      inhibit-from dbus: \(s.path("etc/policy")) sets secure: nothing holds the lock off"), "\(met.stdout)")
            let unmet = try await s.client("doctor", "--policy", s.path("unmet.profile"), "--json")
            #expect(unmet.exit == .exited(1), "\(unmet.stdout)\(unmet.stderr)")
            let report = try #require(jsonObject(unmet.stdout), "\(unmet.stdout)")
            let failed = (report["requirements"] as? [[String: Any]] ?? []).filter { $0["met"] as? Bool == false }
            #expect(failed.map { $0["requirement"] as? String } == ["max-lock-after 5m", "lock-at-start"], "\(unmet.stdout)")
            #expect(failed.first?["detail"] as? String == "the agent locks after 10m, above 5m")
            // lock-on-switch rests on a logind session, and this sandbox has no logind.
            let switched = try await s.client("doctor", "--policy", s.path("switch.profile"))
            #expect(switched.exit == .exited(1) && switched.stdout.contains("NOT MET  lock-on-switch: in force, but the agent follows no logind session"),
                    "\(switched.stdout)")
            let bad = try await s.client("doctor", "--policy", s.path("bad.profile"))
            #expect(bad.exit == .exited(64))
            #expect(bad.stderr == "xidlelock: error: doctor --policy: \(s.path("bad.profile")):1: 'max-lock-after' needs a value (DURATION)\n", "\(bad.stderr)")
            let none = try await s.run(agentBinary, ["doctor", "--policy", s.path("met.profile"), "--socket", s.path("none.sock")])
            #expect(none.exit == .exited(1))
            #expect(none.stdout.hasPrefix("NOT MET  agent: "), "\(none.stdout)")
        }
    }

    @Test("the example policy.stig is a profile doctor --policy reads (lock-on-card-removal needs the card removal branch)")
    func examplePolicyReads() async throws {
        let example = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appending(path: "packaging/examples/policy.stig").path
        try await Sandbox.with(display: false) { s in
            let result = try await s.run(agentBinary, ["doctor", "--policy", example, "--socket", s.path("none.sock")])
            // Read whole: exit 1 for the missing agent, not 64 for the file; until the card
            // branch is merged, its one line that this agent does not know is the error.
            let unknownCard = result.stderr.contains("unknown setting 'lock-on-card-removal'") && !result.stderr.contains("more lines")
            #expect(result.exit == .exited(1) || (result.exit == .exited(64) && unknownCard), "\(result.stderr)")
        }
    }
}
