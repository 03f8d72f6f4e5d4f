import Foundation
import Testing

extension Sandbox {
    func doctor(_ extra: String...) async throws -> CommandResult {
        try await run(agentBinary, ["doctor", "--socket", socket] + extra)
    }
}

/// `xidlelock doctor` on a real Xvfb: a healthy setup, and broken ones, each named
/// with what to do and a non-zero exit.
@Suite struct DoctorTests {
    @Test("healthy: the agent runs, its locker is there, nothing holds: exit 0 and when the lock comes")
    func healthy() async throws {
        try await Sandbox.with { s in
            _ = try await s.startControlledAgent(["--lock-after", "1h", "--locker", Script.grabbingLocker()])
            let result = try await s.doctor()
            #expect(result.exit == .exited(0), "\(result.stdout)\(result.stderr)")
            #expect(result.stdout.contains("ok       agent: running"), "\(result.stdout)")
            #expect(result.stdout.contains("ok       locker: `exec \(testLockerBinary)"), "\(result.stdout)")
            #expect(result.stdout.contains("locker exec \(testLockerBinary)") && result.stdout.contains("(flag)"), "\(result.stdout)")
            #expect(result.stdout.contains("=> the screen will lock in 59m"), "\(result.stdout)")
            let json = try #require(jsonObject(try await s.doctor("--json").stdout))
            #expect(json["lock_would_happen"] as? Bool == true)
        }
    }

    @Test("an X server without MIT-SCREEN-SAVER: the display is the problem, and what to do names the extensions; exit 1")
    func missingExtension() async throws {
        try await Sandbox.with(serverArguments: ["-extension", "MIT-SCREEN-SAVER"]) { s in
            let result = try await s.doctor()
            #expect(result.exit == .exited(1))
            #expect(result.stdout.contains("PROBLEM  display: the X server has no MIT-SCREEN-SAVER extension"), "\(result.stdout)")
            #expect(result.stdout.contains("what to do: use an X server with the MIT-SCREEN-SAVER and XInput 2 extensions"),
                    "\(result.stdout)")
        }
    }

    @Test("no agent: a problem that says how to start one; exit 1")
    func noAgent() async throws {
        try await Sandbox.with { s in
            let result = try await s.doctor()
            #expect(result.exit == .exited(1))
            #expect(result.stdout.contains("PROBLEM  agent: no xidlelock agent is running for this display"), "\(result.stdout)")
            #expect(result.stdout.contains("systemctl --user start xidlelock"), "\(result.stdout)")
        }
    }

    @Test("an inhibitor holding: named by source, who, why and how long, with what to do; exit 1")
    func inhibitorHolds() async throws {
        try await Sandbox.with { s in
            _ = try await s.startControlledAgent(["--lock-after", "1h", "--locker", Script.grabbingLocker()])
            #expect(try await s.client("inhibit", "--why", "quarterly slides", "--for", "2h").exit == .exited(0))
            let result = try await s.doctor()
            #expect(result.exit == .exited(1))
            #expect(result.stdout.contains("PROBLEM  held off: by pid "), "\(result.stdout)")
            #expect(result.stdout.contains("[socket] for "), "\(result.stdout)")
            #expect(result.stdout.contains(": quarterly slides"), "\(result.stdout)")
            #expect(result.stdout.contains("what to do: it ends when its `xidlelock inhibit` command ends"), "\(result.stdout)")
            let json = try #require(jsonObject(try await s.doctor("--json").stdout))
            #expect(json["lock_would_happen"] as? Bool == false)
        }
    }

    @Test("the agent's locker is gone from disk: the screen could not be locked; exit 1")
    func lockerGone() async throws {
        try await Sandbox.with { s in
            let locker = s.path("my-locker")
            try "#!/bin/sh\nexec sleep 60\n".write(toFile: locker, atomically: true, encoding: .utf8)
            chmod(locker, 0o755)
            _ = try await s.startControlledAgent(["--lock-after", "1h", "--locker", locker])
            try FileManager.default.removeItem(atPath: locker)
            let result = try await s.doctor()
            #expect(result.exit == .exited(1))
            #expect(result.stdout.contains("PROBLEM  locker: '\(locker)' (of `\(locker)`; from flag) is not found in PATH or is not executable"), "\(result.stdout)")
        }
    }

    @Test("another program holds the keyboard grab: a locker could not grab it; exit 1")
    func keyboardHeld() async throws {
        try await Sandbox.with { s in
            _ = try await s.startControlledAgent(["--lock-after", "1h", "--locker", Script.grabbingLocker()])
            // A menu or a game holding the keyboard, as the test locker does.
            _ = try s.startBackground(testLockerBinary, ["--pids", "grabber.pid", "--unlock", "never"], output: "grabber.out")
            _ = try await s.waitForLines("grabber.pid")
            let result = try await s.doctor()
            #expect(result.exit == .exited(1))
            #expect(result.stdout.contains("PROBLEM  keyboard: another program holds the keyboard grab"), "\(result.stdout)")
        }
    }
}
