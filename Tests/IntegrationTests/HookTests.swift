import Foundation
import Testing

/// Each hook announces its pid and execs `sleep`, which keeps the hook's process: its
/// session, signal mask and dispositions, descriptors and environment. The test reads
/// them from /proc (asking the shell itself would show its own redirection descriptors).
enum Hook: String, CaseIterable, Sendable {
    case notifier, locker, onUnlock

    static let probe = "echo hook-says-hello; echo hook-complains >&2; echo $$ > hook.pid; exec sleep 60"

    var arguments: [String] {
        switch self {
        case .notifier:
            ["--lock-after", "3s", "--locker", Script.locker, "--notify-before", "2s", "--notifier", Hook.probe]
        case .locker:
            ["--lock-after", "1s", "--locker", Hook.probe]
        case .onUnlock:
            // A locker that holds the screen for just over a second, then unlocks.
            ["--lock-after", "1s", "--locker", Script.grabbingLocker(unlock: "."), "--on-unlock", Hook.probe,
             "--on-unlock-interval", "1h"]
        }
    }

    /// XIDLELOCK_EVENT and XIDLELOCK_STAGE.
    var event: (name: String, stage: String) {
        switch self {
        case .notifier: ("notify", "notify")
        case .locker: ("lock", "lock")
        case .onUnlock: ("unlock", "lock")
        }
    }
}

/// A signal set from /proc/<pid>/status (`SigBlk:`, `SigIgn:`).
func signalSet(_ name: String, of pid: Int) -> UInt64? {
    let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix("\(name):") }
    return line.flatMap { UInt64($0.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces), radix: 16) }
}

/// Signals 32 and 33 are glibc's own (SIGCANCEL, SIGSETXID): glibc's posix_spawn leaves
/// them ignored in every child and sigaction cannot change them, so they are not checked.
let glibcInternalSignals: UInt64 = 1 << 31 | 1 << 32

@Suite struct HookTests {
    @Test("a hook runs in its own session with default signals, /dev/null stdin, the event variables, and its output in the log",
          arguments: Hook.allCases)
    func hookProcess(hook: Hook) async throws {
        try await Sandbox.with { s in
            let agent = try s.startAgent(hook.arguments)
            let pid = try await s.waitForNumber(in: "hook.pid")
            // Until sleep sleeps: while the loader runs it has libraries open.
            try await s.waitUntil("the hook to exec sleep and settle") {
                (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)) == "sleep\n"
                    && (try? String(contentsOfFile: "/proc/\(pid)/wchan", encoding: .utf8))?.contains("nanosleep") == true
            }

            let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
            let fields = stat[stat.index(after: stat.lastIndex(of: ")") ?? stat.startIndex)...].split(separator: " ")
            // state ppid pgrp session
            #expect(fields.count > 3 && fields[2] == "\(pid)" && fields[3] == "\(pid)",
                    "process group and session of pid \(pid): \(stat)")
            #expect(fields.count > 1 && fields[1] == "\(agent.pid)", "parent: \(stat)")

            #expect(signalSet("SigBlk", of: pid) == 0, "blocked signals")
            #expect(signalSet("SigIgn", of: pid).map { $0 & ~glibcInternalSignals } == 0, "ignored signals")
            let fds = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").sorted()
            #expect(fds == ["0", "1", "2"], "descriptors leaked into the hook")
            #expect(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/0") == "/dev/null")
            #expect(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/2") == agent.logFile.path,
                    "stderr goes to the agent's log")

            let environ = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/environ"))) ?? Data()
            var env: [String: String] = [:]
            for entry in environ.split(separator: 0) {
                let parts = String(decoding: entry, as: UTF8.self).split(separator: "=", maxSplits: 1).map(String.init)
                if parts[0].hasPrefix("XIDLELOCK_") { env[parts[0]] = parts.count > 1 ? parts[1] : "" }
            }
            #expect(env["XIDLELOCK_EVENT"] == hook.event.name, "\(env)")
            #expect(env["XIDLELOCK_STAGE"] == hook.event.stage, "\(env)")
            #expect(env["XIDLELOCK_IDLE_MS"].flatMap { Int($0) } != nil, "\(env)")
            #expect(env["XIDLELOCK_SUSPEND_GAP_MS"] == "0", "\(env)")
            #expect((env["XIDLELOCK_LOCKED_MS"].flatMap { Int($0) } != nil) == (hook == .onUnlock), "\(env)")

            try await agent.waitForLog(containing: "hook-says-hello")
            try await agent.waitForLog(containing: "hook-complains")
        }
    }

    @Test("hooks see only this event's variables, not stale XIDLELOCK_ ones from the agent's own environment")
    func staleVariablesAreNotPassedOn() async throws {
        try await Sandbox.with { s in
            // As when the agent is restarted from one of its own on-unlock hooks.
            let agent = try s.startAgent(["--lock-after", "1s", "--locker", Hook.probe],
                                         environment: ["XIDLELOCK_LOCKED_MS": "123", "XIDLELOCK_EVENT": "unlock"])
            let pid = try await s.waitForNumber(in: "hook.pid")
            try await s.waitUntil("the hook to exec sleep") {
                (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)) == "sleep\n"
            }
            let environ = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/environ"))) ?? Data()
            let names = environ.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
                .filter { $0.hasPrefix("XIDLELOCK_") }
            #expect(names.contains("XIDLELOCK_EVENT=lock"), "\(names)\n\(agent.log)")
            #expect(!names.contains { $0.hasPrefix("XIDLELOCK_LOCKED_MS=") }, "\(names)")
        }
    }

    @Test("a notifier still running at the lock is ended at the unlock")
    func notifierEndedAtUnlock() async throws {
        let locker = Script.grabbingLocker()
        try await Sandbox.with { s in
            try await s.x("xdotool", "key", "shift")
            let agent = try s.startAgent(["--lock-after", "4s", "--locker", locker,
                                          "--notify-before", "3s", "--notifier", "echo $$ > notifier.pid; exec sleep 60"])
            let notifier = Int32(try await s.waitForNumber(in: "notifier.pid"))
            _ = try await s.waitForNumber(in: "lockers.pids")
            s.touch("unlock")
            try await agent.waitForLog(containing: "unlocked after")
            try await s.waitUntil("the notifier (pid \(notifier)) to be ended") { !isAlive(notifier) }
        }
    }
}
