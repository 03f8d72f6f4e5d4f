import Foundation
import Testing

/// Issue #10, "fail closed", with a real i3lock: killed, unable to grab the keyboard,
/// forking and returning at once. Only an exit 0 after the locker held the screen is
/// an unlock. One test at a time: each runs i3lock for seconds, and the timing tests of
/// the other suites need the CPU.
@Suite(.serialized) struct FailClosedI3lockTests {
    // Cases 1 and 2.
    @Test("a real i3lock -n killed by SIGKILL after it covered the screen: an error naming the signal, a new i3lock at once, no unlock")
    func killedI3lock() async throws {
        try await Sandbox.with { s in
            let agent = try await s.startAnsweringAgent(["--lock-after", "1s", "--locker", "i3lock -n",
                                                         "--on-unlock", "touch unlocked"])
            let first = try await s.waitForCoveringLocker()
            // A simple command is exec'ed: the agent's child is i3lock itself, not a shell.
            #expect(ProcInfo.name(first) == "i3lock", "the locker process is \(ProcInfo.name(first) ?? "gone")")
            #expect(ProcInfo.parent(first) == agent.pid)
            let killed = ContinuousClock.now
            kill(first, SIGKILL)
            let second = try await s.waitForCoveringLocker(other: first)
            let relock = ContinuousClock.now - killed
            #expect(ProcInfo.name(second) == "i3lock")
            #expect(ProcInfo.parent(second) == agent.pid)
            #expect(relock < .seconds(3), "the new i3lock held the screen \(relock) after the kill")
            #expect(agent.log.contains("error: the locker was killed by signal 9 (SIGKILL) after"), "\(agent.log)")
            #expect(agent.log.contains("the screen may NOT be locked; starting it again now"), "\(agent.log)")
            #expect(!agent.log.contains("unlocked after"), "the kill was taken for an unlock\n\(agent.log)")
            #expect(!s.exists("unlocked"), "the on-unlock hook ran")
            #expect(i3lockInstances(on: try #require(s.display)) == [second], "exactly one i3lock runs")
        }
    }

    // Case 3.
    @Test("an i3lock that cannot grab the keyboard exits 1 after about 2.3 s: a failure and a retry, never an unlock")
    func i3lockThatCannotGrab() async throws {
        try await Sandbox.with { s in
            // Another client holds the keyboard first (a menu, a game, a stuck grab).
            _ = try startProcess(testLockerBinary, ["--unlock", "holder.release", "--pids", "holder.pids"],
                                 environment: s.environment, in: s.directory,
                                 stdout: s.directory.appending(path: "holder.out"),
                                 stderr: s.directory.appending(path: "holder.err"))
            _ = try await s.waitForLines("holder.pids")
            let agent = try s.startAgent(["--lock-after", "1s", "--locker", "i3lock -n", "--on-unlock", "touch unlocked"])
            try await agent.waitForLog(containing: "the locker exited with status 1 after", count: 2)
            let ran = durations(after: "the locker exited with status 1 after ", in: agent.log)
            // i3lock tries for about 2.3 s (longer on a loaded machine) before it gives up.
            #expect(ran.count >= 2 && ran.allSatisfy { $0 >= 1500 }, "i3lock ran \(ran) ms before giving up\n\(agent.log)")
            #expect(agent.log.contains("(attempt 2)"), "no retry\n\(agent.log)")
            #expect(agent.count(of: "the screen may NOT be locked") >= 2, "\(agent.log)")
            #expect(!agent.log.contains("unlocked after"), "a failed i3lock was taken for an unlock\n\(agent.log)")
            #expect(!s.exists("unlocked"), "the on-unlock hook ran")
        }
    }

    // Case 4.
    @Test("i3lock without -n forks and returns 0 at once: an error naming the cause, and never a pile-up of i3locks")
    func forkingI3lock() async throws {
        try await Sandbox.with { s in
            let display = try #require(s.display)
            let agent = try s.startAgent(["--lock-after", "1s", "--locker", "i3lock", "--on-unlock", "touch unlocked"])
            try await agent.waitForLog(containing: "forked and returned")
            // Sampled for as long as many retries take: the retries find the keyboard
            // held by the detached i3lock and start no second one.
            let started = ContinuousClock.now
            var most = 0
            try await s.waitUntil("18 s of i3lock counts", timeout: .seconds(25), every: .milliseconds(500)) {
                most = max(most, i3lockInstances(on: display).count)
                return ContinuousClock.now - started >= .seconds(18)
            }
            let instances = i3lockInstances(on: display)
            #expect(instances.count == 1, "i3lock processes of \(display): \(instances)\n\(agent.log)")
            #expect(most == 1, "up to \(most) i3locks ran at once\n\(agent.log)")
            #expect(agent.log.contains("error: the locker exited 0 after"), "\(agent.log)")
            #expect(agent.log.contains("the keyboard is grabbed, most likely by a detached copy of the locker"), "\(agent.log)")
            #expect(!agent.log.contains("unlocked after"), "\(agent.log)")
            #expect(!s.exists("unlocked"), "the on-unlock hook ran")
        }
    }

    // Case 4, a command that is no locker at all.
    @Test("--locker true returns at once: errors that say so, retries, never an unlock")
    func lockerThatReturnsAtOnce() async throws {
        try await Sandbox.with { s in
            let agent = try await s.startAnsweringAgent(["--lock-after", "1s", "--locker", "true", "--on-unlock", "touch unlocked"])
            try await agent.waitForLog(containing: "forked and returned", count: 2)
            let failure = try #require(try await s.status()["last_locker_failure"] as? [String: Any], "\(agent.log)")
            #expect(failure["kind"] as? String == "returned-at-once")
            #expect(agent.log.contains("error: the locker exited 0 after"), "\(agent.log)")
            #expect(!agent.log.contains("unlocked after"), "\(agent.log)")
            #expect(!s.exists("unlocked"), "the on-unlock hook ran")
        }
    }
}
