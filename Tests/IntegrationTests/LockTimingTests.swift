import Foundation
import Testing

/// The lock comes when the X server has been idle for the lock time: not before, not much after.
@Suite struct LockTimingTests {
    @Test("locks once the server has been idle for the lock time, not before",
          arguments: [1000, 2000, 3000], 1...2)
    func locksAfterIdleness(lockAfter: Int, run: Int) async throws {
        try await Sandbox.with { s in
            try await s.x("xdotool", "key", "shift")  // the idle period starts now
            let agent = try s.startAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.locker])
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: lockAfter)
            #expect(agent.count(of: "locking after") == 1, "\(agent.log)")
        }
    }

    @Test("a hook that hangs does not stall the agent: the lock comes on time")
    func hangingNotifier() async throws {
        let lockAfter = 2000
        try await Sandbox.with { s in
            try await s.x("xdotool", "key", "shift")
            _ = try s.startAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.locker,
                                  "--notify-before", "1s", "--notifier", "echo $$ > notifier.pid; exec sleep 60"])
            let notifier = Int32(try await s.waitForNumber(in: "notifier.pid"))
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: lockAfter)
            #expect(isAlive(notifier), "the notifier was meant to hang through the lock")
        }
    }

    @Test("an on-unlock hook that hangs does not delay the next lock")
    func hangingOnUnlockHook() async throws {
        let lockAfter = 1000
        // The first locker holds the screen just over a second, then unlocks; the second holds the lock.
        let locker = "echo $$ >> locks.pids; if [ $(wc -l < locks.pids) -lt 2 ]; then \(Script.grabbingLocker(unlock: ".")); else echo $XIDLELOCK_IDLE_MS > lock2.idle; exec sleep 60; fi"
        try await Sandbox.with { s in
            try await s.x("xdotool", "key", "shift")
            let agent = try s.startAgent(["--lock-after", "\(lockAfter)ms", "--locker", locker,
                                          "--on-unlock", "echo $$ > on-unlock.pid; exec sleep 60"])
            _ = try await s.waitForLines("locks.pids", count: 1)
            _ = try await s.waitForNumber(in: "on-unlock.pid")
            // The agent's idle time at the second lock counts from the unlock: the lock
            // time, however long the hook hangs.
            let idle = try await s.waitForNumber(in: "lock2.idle")
            #expect(idle >= lockAfter && idle <= lockAfter + latestLock,
                    "second lock at \(idle) ms idle after the unlock\n\(agent.log)")
        }
    }
}
