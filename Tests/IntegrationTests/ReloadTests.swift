import Foundation
import Glibc
import Testing

/// Issue #29, row 6: an upgrade never asks for a second unlock. The package reloads
/// the unit (SIGUSR1): the agent executes the installed binary in its own place, so
/// its locker stays its child and the unlock (the locker's exit 0) is seen, instead
/// of an agent started anew that can only adopt the locker and relock at its end.
@Suite struct ReloadTests {
    @Test("reload while locked (SIGUSR1, as `systemctl --user reload` sends it): the same pid runs the binary again, the locker stays its child, one unlock ends the lock")
    func reloadWhileLocked() async throws {
        try await Sandbox.with { s in
            let agent = try await s.startControlledAgent(["--lock-after", "1h", "--locker", Script.grabbingLocker()])
            #expect(try await s.client("lock").exit == .exited(0))
            let locker = try #require(Int32(try await s.waitForLines("lockers.pids")[0].trimmingCharacters(in: .whitespaces)))
            try await s.waitUntil("locked") { try await s.status()["state"] as? String == "locked" }

            agent.send(SIGUSR1)
            try await agent.waitForLog(containing: "the locker (pid \(locker)) is still this process's child")
            try await s.waitUntil("the agent's socket again") { (try? await s.client("status").exit) == .exited(0) }
            #expect(agent.process.isRunning, "the agent ended on reload\n\(agent.log)")
            let status = try await s.status()
            #expect(status["state"] as? String == "locked" && status["locker_pid"] as? Int == Int(locker), "\(status)\n\(agent.log)")

            let unlockedAt = ContinuousClock.now
            s.touch("unlock")
            try await s.waitUntil("the unlock") { try await s.status()["state"] as? String == "active" }
            print("figure: reload while locked; one unlock ended the lock \((ContinuousClock.now - unlockedAt).milliseconds) ms after it; lockers started: \(s.lines("lockers.pids").count)")
            // No second locker: the unlock was seen as one.
            #expect(s.lines("lockers.pids").count == 1, "a second locker after the reload\n\(agent.log)")
            #expect(!agent.log.contains("its end could not be seen"), "\(agent.log)")
        }
    }

    @Test("reload while the locker fails and waits for its next try (xidlelock lock, a locker exiting 1): the new image tries again at once, the lock is not dropped")
    func reloadWhileTheLockerFails() async throws {
        try await Sandbox.with { s in
            // Fails its first three tries, then holds.
            let locker = "echo $$ >> tries; [ $(wc -l < tries) -gt 3 ] && { echo $$ > locker.pid; exec sleep 60; }; exit 1"
            let agent = try await s.startControlledAgent(["--lock-after", "1h", "--locker", locker])
            #expect(try await s.client("lock").exit == .exited(0))
            // The backoff's third wait is 2 s, the fourth 4 s: the reload comes inside it.
            try await agent.waitForLog(containing: "starting it again in 2s")
            agent.send(SIGUSR1)
            try await s.waitUntil("the fourth try, by the new image") { s.lines("tries").count >= 4 }
            #expect(agent.log.contains("locking again at start"), "\(agent.log)")
            _ = try await s.waitForNumber(in: "locker.pid")
            try await s.waitUntil("locked") { try await s.status()["locker_pid"] as? Int != nil }
        }
    }
}
