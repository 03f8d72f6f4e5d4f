import Foundation
import Glibc
import Testing

/// Issue #20, item 1: files never stop locking. With the admin's policy in force, a
/// user's config file that cannot be used (or a line of it) is reported and skipped,
/// and the agent locks at the policy's time; a policy that exists in any form but
/// cannot be read makes the agent secure; CRLF line ends are line ends.
@Suite struct FailClosedFilesTests {
    static let policy = "secure\nmax-lock-after 4s\n"

    /// A bad user file: how to make it, and what the agent's error says about it.
    struct BadFile: CustomStringConvertible, Sendable {
        var description: String
        /// Makes it at `path` (the user's config) in sandbox `s`.
        var make: @Sendable (Sandbox, String) throws -> Void
        /// `XDG_CONFIG_HOME` for the agent, when the case is the variable itself.
        var configHome: String?
        /// A piece of the error, after the file's path.
        var reason: String
        /// The line the error names, when one line is bad (its other lines are read).
        var line: Int?
    }

    static let badFiles: [BadFile] = [
        BadFile(description: "a FIFO", make: { _, path in
            guard mkfifo(path, 0o600) == 0 else { throw POSIXError(.EEXIST) }
        }, reason: "cannot be read (it is a FIFO, not a regular file); file skipped"),
        BadFile(description: "/dev/zero", make: { _, path in
            try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: "/dev/zero")
        }, reason: "cannot be read (it is a character device, not a regular file)"),
        BadFile(description: "a directory", make: { _, path in
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        }, reason: "cannot be read (it is a directory, not a regular file)"),
        BadFile(description: "100 MB", make: { _, path in
            guard FileManager.default.createFile(atPath: path, contents: nil), truncate(path, 100 << 20) == 0 else { throw POSIXError(.EIO) }
        }, reason: "cannot be read (it is larger than 64 KiB)"),
        BadFile(description: "one 1 MB line", make: { _, path in
            try ("lock-after 1h " + String(repeating: "x", count: 1 << 20) + "\n").write(toFile: path, atomically: false, encoding: .utf8)
        }, reason: "cannot be read (it is larger than 64 KiB)"),
        BadFile(description: "not UTF-8", make: { _, path in
            let bytes = Array("locker \(Script.locker)\n".utf8) + [0x6C, 0x6F, 0x63, 0x6B, 0xFF, 0xFE, 0x0A] + Array("lock-after 1h\n".utf8)
            guard FileManager.default.createFile(atPath: path, contents: Data(bytes)) else { throw POSIXError(.EIO) }
        }, reason: "not UTF-8 text; line skipped", line: 2),
        BadFile(description: "an unknown setting", make: { _, path in
            try "locker \(Script.locker)\nfrobnicate yes\nlock-after 1h\n".write(toFile: path, atomically: false, encoding: .utf8)
        }, reason: "unknown setting 'frobnicate'", line: 2),
        BadFile(description: "a dangling symlink", make: { s, path in
            try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: s.path("nowhere"))
        }, reason: "cannot be read (it is a symbolic link to a missing file)"),
        BadFile(description: "XDG_CONFIG_HOME=/dev/null", make: { _, _ in }, configHome: "/dev/null", reason: "cannot be read (Not a directory)"),
    ]

    @Test("a bad user file under a policy (secure, max-lock-after 4s): the agent runs, locks at 4s, and status and doctor name the file",
          arguments: badFiles)
    func badUserFile(_ bad: BadFile) async throws {
        try await Sandbox.with { s in
            try s.writePolicy(Self.policy)
            let path = (bad.configHome ?? s.path("config")) + "/xidlelock/config"
            if bad.configHome == nil {
                try FileManager.default.createDirectory(atPath: s.path("config/xidlelock"), withIntermediateDirectories: true)
                try bad.make(s, path)
            }
            try await s.x("xdotool", "key", "shift")
            // The locker comes from the file where a line of it is read, else from the flags.
            let flags = bad.line == nil ? ["--locker", Script.locker] : []
            let agent = try await s.startAnsweringAgent(flags, environment: bad.configHome.map { ["XDG_CONFIG_HOME": $0] } ?? [:])
            let status = try await s.status()
            let errors = status["config_errors"] as? [String] ?? []
            let named = bad.line.map { "\(path):\($0): " } ?? "\(path): "
            #expect(errors.count == 1 && errors.first?.hasPrefix(named) == true && errors.first?.contains(bad.reason) == true,
                    "config_errors: \(errors)\n\(agent.log)")
            #expect(agent.log.contains("xidlelock: error: \(named)"), "\(agent.log)")
            let doctor = try await s.doctor()
            #expect(doctor.stdout.contains("warning  config: \(named)"), "\(doctor.stdout)")
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: 4000, case: bad.description)
            #expect(agent.process.isRunning)
        }
    }

    @Test("--config naming a file that cannot be used is reported and skipped too; the agent locks at the policy's time")
    func configFlagFile() async throws {
        try await Sandbox.with { s in
            try s.writePolicy(Self.policy)
            try await s.x("xdotool", "key", "shift")
            let missing = s.path("missing.conf")
            let agent = try await s.startAnsweringAgent(["--config", missing, "--locker", Script.locker])
            let errors = try await s.status()["config_errors"] as? [String] ?? []
            #expect(errors == ["\(missing): cannot be read (it does not exist); file skipped"], "\(errors)\n\(agent.log)")
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: 4000)
        }
    }

    @Test("a policy written with CRLF line ends: its max-lock-after applies, with no error")
    func crlfPolicy() async throws {
        try await Sandbox.with { s in
            try s.writePolicy("secure\r\nmax-lock-after 3s\r\n")
            try s.writeUserConfig("lock-after 8s\nlocker \(Script.locker)\n")
            try await s.x("xdotool", "key", "shift")
            let agent = try await s.startAnsweringAgent([])
            let policy = try await s.status()["policy"] as? [String: Any]
            #expect(policy?["errors"] as? [String] == [], "\(String(describing: policy))")
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: 3000)
            #expect(agent.log.contains("lock-after 8s is above the policy's max-lock-after: locking at 3s"), "\(agent.log)")
        }
    }

    @Test("a policy that is a dangling symlink is an error, and the agent is secure: disable is refused")
    func danglingPolicy() async throws {
        try await Sandbox.with { s in
            try FileManager.default.createDirectory(atPath: s.path("etc"), withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: s.path("etc/policy"), withDestinationPath: s.path("etc/moved-away"))
            try await s.x("xdotool", "key", "shift")
            let agent = try await s.startAnsweringAgent(["--lock-after", "3s", "--locker", Script.locker])
            let disable = try await s.client("disable")
            #expect(disable.exit != .exited(0), "disable was taken: the agent is not secure\n\(agent.log)")
            let policy = try await s.status()["policy"] as? [String: Any]
            let errors = policy?["errors"] as? [String] ?? []
            #expect(errors.first?.contains("\(s.path("etc/policy")): cannot be read (it is a symbolic link to a missing file); enforcing secure") == true,
                    "\(String(describing: policy))")
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: 3000)
        }
    }
}
