import Foundation
import Glibc
import Testing

/// Issue #28, row 2: the policy's locker is the admin's. Its program is found in the
/// system's directories (never the user's PATH), it runs with the session's
/// environment (nothing the user set), and a locker record the user plants names no
/// process the agent takes for the lock.
@Suite(.serialized) struct PolicyLockerTests {
    /// The test locker (a program: exec'd, its /proc/PID/exe is itself) under the policy.
    static func policyLocker(_ s: Sandbox) -> String {
        "\(testLockerBinary) --hold 1100 --pids \(s.path("lockers.pids")) --unlock \(s.path("unlock"))"
    }

    @Test("the policy's locker `i3lock -n`, the user's own i3lock first in PATH and LD_LIBRARY_PATH, XSECURELOCK_SAVER set: the agent runs /usr/bin/i3lock with the system's PATH and none of them")
    func systemLockerCleanEnvironment() async throws {
        try await Sandbox.with { s in
            try s.writePolicy("locker i3lock -n\n")
            let bin = s.path("userbin")
            try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
            try "#!/bin/sh\necho fake >> \(s.path("fake.ran"))\nexec sleep 600\n".write(toFile: bin + "/i3lock", atomically: true, encoding: .utf8)
            chmod(bin + "/i3lock", 0o755)
            let agent = try s.startAgent(["--lock-after", "1h", "--socket", s.socket],
                                         environment: ["PATH": "\(bin):/usr/bin:/bin", "LD_LIBRARY_PATH": s.path("userlib"),
                                                       "XSECURELOCK_SAVER": s.path("saver")])
            try await IntegrationTests.waitUntil("the agent's socket to answer", context: { agent.log }) {
                (try? await s.client("status").exit) == .exited(0)
            }
            #expect(try await s.client("lock").exit == .exited(0))
            var locker: Int32 = 0
            try await IntegrationTests.waitUntil("the locker to run", context: { agent.log }) {
                locker = (try await s.status()["locker_pid"] as? Int).map(Int32.init) ?? 0
                return locker > 0
            }
            let exe = FileManager.default.destinationOfSymbolicLinkAtPathOrNil("/proc/\(locker)/exe")
            print("figure: the policy's `i3lock -n` ran as \(exe ?? "?") with PATH=\(ProcInfo.environment(locker, "PATH") ?? "unset")")
            #expect(exe == "/usr/bin/i3lock", "the locker runs \(exe ?? "?")\n\(agent.log)")
            #expect(!s.exists("fake.ran"), "the user's i3lock ran")
            #expect(ProcInfo.environment(locker, "PATH") == "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
            #expect(ProcInfo.environment(locker, "LD_LIBRARY_PATH") == nil && ProcInfo.environment(locker, "XSECURELOCK_SAVER") == nil)
            #expect(ProcInfo.environment(locker, "DISPLAY") == s.display)
            let settings = try await s.status()["settings"] as? [[String: Any]] ?? []
            #expect(settings.contains { $0["name"] as? String == "locker" && $0["value"] as? String == "/usr/bin/i3lock -n" }, "\(settings)")
            kill(locker, SIGKILL)
        }
    }

    @Test("a process of the user's planted in the locker record, the agent started again under the policy's lock-at-start: not adopted (it is not the policy's locker), the policy's locker runs")
    func plantedLockerRecord() async throws {
        try await Sandbox.with { s in
            try s.writePolicy("locker \(Self.policyLocker(s))\nlock-at-start\n")
            let first = try s.startAgent(["--lock-after", "1h", "--socket", s.socket])
            _ = try await s.waitForLines("lockers.pids")
            // The record names the real locker: the user takes its server token.
            let record = s.contents("agent.sock.locker").split(separator: " ")
            try #require(record.count == 3, "the record: \(s.contents("agent.sock.locker"))\n\(first.log)")
            s.touch("unlock")
            try await IntegrationTests.waitUntil("the unlock", context: { first.log }) { try await s.status()["state"] as? String == "active" }
            first.send(SIGTERM)
            _ = try await first.waitForExit()
            try? FileManager.default.removeItem(atPath: s.path("unlock"))
            try? FileManager.default.removeItem(atPath: s.path("lockers.pids"))

            // A process of the user's, recorded as if it were the locker.
            let planted = try s.startBackground("/bin/sleep", ["600"], output: "planted.out")
            let pid = planted.processIdentifier
            let start = try #require(ProcInfo.statFields(pid)?[19])
            try "\(pid) \(start) \(record[2])".write(toFile: s.path("agent.sock.locker"), atomically: false, encoding: .utf8)

            let second = try s.startAgent(["--lock-after", "1h", "--socket", s.socket])
            let pids = try await s.waitForLines("lockers.pids")
            print("figure: planted pid \(pid) (sleep) in the record; the policy's locker ran as pid \(pids[0])")
            #expect(second.log.contains("the locker record names pid \(pid), which runs /usr/bin/sleep, not the policy's locker"), "\(second.log)")
            kill(pid, SIGKILL)
        }
    }
}

extension FileManager {
    func destinationOfSymbolicLinkAtPathOrNil(_ path: String) -> String? { try? destinationOfSymbolicLink(atPath: path) }
}
