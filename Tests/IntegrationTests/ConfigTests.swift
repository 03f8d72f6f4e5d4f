import Foundation
import Testing

extension Sandbox {
    /// Writes the user's config file (`$XDG_CONFIG_HOME/xidlelock/config`).
    func writeUserConfig(_ text: String) throws { try write(text, to: "config/xidlelock/config") }

    /// Writes the admin's policy (a debug build reads it from `$XIDLELOCK_TEST_ETC/policy`).
    func writePolicy(_ text: String) throws { try write(text, to: "etc/policy") }

    func write(_ text: String, to name: String) throws {
        let url = directory.appending(path: name)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try text.write(to: url, atomically: true, encoding: .utf8)
    }
}

/// Config files and the admin's policy, end to end on a real Xvfb.
@Suite struct ConfigTests {
    @Test("the user's file is read and a flag wins over it; status names the file")
    func userFileAndFlag() async throws {
        try await Sandbox.with { s in
            try s.writeUserConfig("# from the file\nlock-after 1h\nlocker \(Script.locker)\n")
            try await s.x("xdotool", "key", "shift")
            let agent = try await s.startControlledAgent(["--lock-after", "3s"])
            let files = try await s.status()["config_files"] as? [String]
            #expect(files == [s.path("config/xidlelock/config")])
            // The locker is the file's (it writes lock.idle); the lock time the flag's.
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: 3000)
            #expect(agent.log.contains("settings read from \(s.path("config/xidlelock/config"))"), "\(agent.log)")
        }
    }

    @Test("a config error names the file and the line, and the line is skipped: the agent runs; only a flag's error exits 64")
    func configError() async throws {
        try await Sandbox.with { s in
            try s.writeUserConfig("lock-after 5m\nlocker\n")
            let agent = try await s.startControlledAgent(["--lock-after", "3s"])
            let problem = "\(s.path("config/xidlelock/config")):2: 'locker' needs a value (CMD); line skipped"
            #expect(try await s.status()["config_errors"] as? [String] == [problem])
            #expect(agent.log.contains("xidlelock: error: \(problem)"), "\(agent.log)")
            let human = try await s.client("status")
            #expect(human.stdout.contains("config errors (skipped):\n  \(problem)"), "\(human.stdout)")
            let flagged = try await s.run(agentBinary, ["--lock-after", "3x"])
            #expect(flagged.exit == .exited(64))
            #expect(flagged.stderr.contains("--lock-after: '3x' is not a duration"), "\(flagged.stderr)")
        }
    }

    @Test("the policy's max-lock-after clamps a longer lock time: the lock comes at the policy's time")
    func clampedLockTime() async throws {
        try await Sandbox.with { s in
            try s.writePolicy("max-lock-after 2s\n")
            try s.writeUserConfig("lock-after 1h\n")
            try await s.x("xdotool", "key", "shift")
            let agent = try await s.startControlledAgent(["--locker", Script.locker])
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: 2000)
            #expect(agent.log.contains("lock-after 1h is above the policy's max-lock-after: locking at 2s"), "\(agent.log)")
        }
    }

    @Test("the policy's secure refuses disable and inhibit over the socket, whatever the flags; status shows the policy")
    func policySecure() async throws {
        try await Sandbox.with { s in
            try s.writePolicy("secure\n")
            try await s.x("xdotool", "key", "shift")
            _ = try await s.startControlledAgent(["--lock-after", "4s", "--locker", Script.locker])
            let disable = try await s.client("disable")
            #expect(disable.exit != .exited(0))
            #expect(disable.stderr.contains("refused: the agent runs with --secure"), "\(disable.stderr)")
            let inhibit = try await s.client("inhibit", "--for", "1h")
            #expect(inhibit.exit != .exited(0))
            let policy = try await s.status()["policy"] as? [String: Any]
            #expect(policy?["file"] as? String == s.path("etc/policy"))
            let human = try await s.client("status")
            #expect(human.stdout.contains("policy: \(s.path("etc/policy")) is in force"), "\(human.stdout)")
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: 4000)
        }
    }
}
