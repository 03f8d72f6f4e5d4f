import Foundation
import Testing

/// The pids of the processes whose parent is `pid`.
func children(of pid: Int32) -> [Int32] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap(Int32.init).filter { child in
        guard let stat = try? String(contentsOfFile: "/proc/\(child)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")")
        else { return false }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 1 && Int32(fields[1]) == pid
    }
}

/// The locker is supervised: one at a time, restarted when it fails, never killed.
@Suite struct LockerTests {
    @Test("one locker at a time; after it exits, the next lock comes one lock time later")
    func oneLockerAtATime() async throws {
        let lockAfter = 1000
        // Locker number n records its pid and the agent's idle time, and holds the lock
        // until the test creates `unlock<n>`.
        let locker = """
            echo $$ >> lockers.pids; n=$(wc -l < lockers.pids); echo $XIDLELOCK_IDLE_MS > lock$n.idle; \
            while [ ! -e unlock$n ]; do sleep 0.02; done
            """
        try await Sandbox.with { s in
            try await s.x("xdotool", "key", "shift")
            let agent = try s.startAgent(["--lock-after", "\(lockAfter)ms", "--locker", locker])
            let first = Int32(try await s.waitForNumber(in: "lockers.pids"))
            try await s.waitUntil("the server idle to pass four lock times", every: .milliseconds(200)) {
                try await s.serverIdle() >= 4 * lockAfter
            }
            #expect(s.lines("lockers.pids").count == 1, "a second locker started\n\(agent.log)")
            #expect(isAlive(first))
            #expect(children(of: agent.pid) == [first], "the agent's children")
            #expect(agent.count(of: "locking after") == 1, "\(agent.log)")

            let unlockedAt = ContinuousClock.now
            s.touch("unlock1")
            _ = try await s.waitForLines("lockers.pids", count: 2)
            let gap = (ContinuousClock.now - unlockedAt).milliseconds
            // The locker notices the unlock file within 20 ms; the test polls every 25 ms.
            #expect(gap >= lockAfter + earliestLock && gap <= lockAfter + latestLock + 50,
                    "second lock \(gap) ms after the unlock\n\(agent.log)")
            let agentIdle = try await s.waitForNumber(in: "lock2.idle")
            #expect(agentIdle >= lockAfter && agentIdle <= lockAfter + latestLock, "XIDLELOCK_IDLE_MS=\(agentIdle)")
            #expect(agent.log.contains("unlocked after"), "\(agent.log)")
            s.touch("unlock2")
        }
    }

    @Test("the agent's log file opened with truncation (an Xsession's `2> file`): the locker's lines on the inherited stderr are appended, never written over the agent's first lines")
    func lockerOutputAppendsToTheLog() async throws {
        try await Sandbox.with { s in
            let agent = try s.startAgent(["--lock-after", "1h", "--locker", "echo the-locker-speaks >&2; echo $$ > locker.pid; exec sleep 60",
                                          "--socket", s.socket])
            try await agent.waitForLog(containing: "started")
            let first = agent.log.split(separator: "\n").first.map(String.init) ?? ""
            #expect(try await s.client("lock").exit == .exited(0))
            _ = try await s.waitForNumber(in: "locker.pid")
            try await agent.waitForLog(containing: "the-locker-speaks")
            #expect(agent.log.hasPrefix(first + "\n"), "the agent's first line was written over:\n\(agent.log)")
        }
    }

    @Test("input while locked starts no second locker and no notifier; after the unlock the lock comes again")
    func inputWhileLocked() async throws {
        let lockAfter = 1000
        let locker = Script.grabbingLocker()
        try await Sandbox.with { s in
            try await s.x("xdotool", "key", "shift")
            let agent = try s.startAgent(["--lock-after", "\(lockAfter)ms", "--locker", locker,
                                          "--notify-before", "500ms", "--notifier", "echo $$ >> notifier.pids"])
            let first = Int32(try await s.waitForNumber(in: "lockers.pids"))
            try await s.x("xdotool", "key", "shift")  // the user starts typing a password
            try await s.waitUntil("the server idle to pass 2.5 lock times after the key", every: .milliseconds(200)) {
                try await s.serverIdle() >= lockAfter * 5 / 2
            }
            #expect(s.lines("lockers.pids").count == 1, "a second locker started\n\(agent.log)")
            #expect(s.lines("notifier.pids").count == 1, "a warning while locked\n\(agent.log)")
            #expect(children(of: agent.pid) == [first], "the agent's children")
            s.touch("unlock")
            _ = try await s.waitForLines("lockers.pids", count: 2)
            #expect(agent.log.contains("unlocked after"), "\(agent.log)")
        }
    }

    @Test("a locker that fails at once is logged as an error and restarted", arguments: [
        "false",
        "echo $$ >> starts.pids; exit 3",
    ])
    func failingLockerIsRestarted(locker: String) async throws {
        try await Sandbox.with { s in
            let agent = try s.startAgent(["--lock-after", "1s", "--locker", locker])
            try await agent.waitForLog(containing: "(attempt 3)")
            try await agent.waitForLog(containing: "the screen may NOT be locked", count: 2)
            #expect(agent.log.contains("xidlelock: error: the locker exited with status"), "\(agent.log)")
            if locker.contains("starts.pids") {
                #expect(try await s.waitForLines("starts.pids", count: 3).count >= 3)
                #expect(agent.log.contains("exited with status 3"), "\(agent.log)")
            }
            #expect(!agent.log.contains("unlocked after"), "a failed locker was taken for an unlock\n\(agent.log)")
        }
    }

    @Test("a locker killed by a signal, even after it locked, is an error and is restarted")
    func killedLockerIsRestarted() async throws {
        let lockAfter = 1000
        try await Sandbox.with { s in
            let agent = try s.startAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.locker])
            let first = Int32(try await s.waitForNumber(in: "locker.pid"))
            // Past the window in which any failure counts as "failed at once".
            try await s.waitUntil("the locker to hold the lock for 2.5 s", every: .milliseconds(100)) {
                try await s.serverIdle() >= lockAfter + 2500
            }
            kill(first, SIGKILL)
            try await s.waitUntil("a new locker") {
                let pid = Int32(s.lines("locker.pid").first ?? "")
                return pid != nil && pid != first
            }
            #expect(agent.log.contains("the locker was killed by signal 9"), "\(agent.log)")
            #expect(agent.log.contains("may NOT be locked"), "\(agent.log)")
        }
    }

    @Test("SIGTERM, SIGINT and SIGHUP stop the agent and leave the locker running",
          arguments: [SIGTERM, SIGINT, SIGHUP])
    func stoppingLeavesTheLockerRunning(signal: Int32) async throws {
        try await Sandbox.with { s in
            let agent = try s.startAgent(["--lock-after", "1s", "--locker", Script.locker])
            let locker = Int32(try await s.waitForNumber(in: "locker.pid"))
            agent.send(signal)
            #expect(try await agent.waitForExit() == .exited(0), "\(agent.log)")
            #expect(isAlive(locker), "the agent's exit unlocked the screen\n\(agent.log)")
            #expect(agent.log.contains("the locker (pid"), "\(agent.log)")
            kill(locker, SIGTERM)
            try await waitUntil("the locker to end") { !isAlive(locker) }
        }
    }

    @Test("the on-unlock hook runs after an unlock, at most once per --on-unlock-interval",
          arguments: zip(["0s", "1m"], [2, 1]))
    func onUnlockHook(interval: String, expectedRuns: Int) async throws {
        // Lockers 1 and 2 hold the screen just over a second, then unlock; locker 3 holds
        // the lock, so that when it starts the hook of unlock 2 has had its chance to run.
        let locker = "echo $$ >> locks.pids; if [ $(wc -l < locks.pids) -lt 3 ]; then \(Script.grabbingLocker(unlock: ".")); else exec sleep 60; fi"
        try await Sandbox.with { s in
            let agent = try s.startAgent(["--lock-after", "1s", "--locker", locker, "--verbose",
                                          "--on-unlock", "echo \"$XIDLELOCK_EVENT $XIDLELOCK_LOCKED_MS\" >> unlock.log",
                                          "--on-unlock-interval", interval])
            _ = try await s.waitForLines("unlock.log", count: 1)
            _ = try await s.waitForLines("locks.pids", count: 3)
            let runs = try await s.waitForLines("unlock.log", count: expectedRuns)
            #expect(runs.count == expectedRuns, "\(runs)\n\(agent.log)")
            for run in runs {
                let fields = run.split(separator: " ")
                #expect(fields.first == "unlock" && fields.count == 2 && Int(fields[1]) != nil,
                        "XIDLELOCK_EVENT and XIDLELOCK_LOCKED_MS: '\(run)'")
            }
            if expectedRuns == 1 {
                #expect(agent.log.contains("on-unlock hook skipped"), "\(agent.log)")
            }
        }
    }

    @Test("a locker command that starts with a shell builtin (cd, export) is accepted",
          arguments: ["cd . && ", "export LOCKED_BY=xidlelock; "])
    func lockerStartingWithABuiltin(prefix: String) async throws {
        try await Sandbox.with { s in
            try await s.x("xdotool", "key", "shift")
            let agent = try s.startAgent(["--lock-after", "1s", "--locker", prefix + Script.locker])
            try await s.waitUntil("the lock or the agent's exit") { s.exists("lock.idle") || !agent.process.isRunning }
            try #require(agent.process.isRunning, "\(agent.log)")
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: 1000)
        }
    }

    @Test("a lost X connection ends the agent with a clear message and leaves the locker running",
          arguments: [false, true])
    func lostConnection(locked: Bool) async throws {
        try await Sandbox.with { s in
            let agent = try s.startAgent(["--lock-after", locked ? "1s" : "1h", "--locker", Script.locker])
            let locker = locked ? Int32(try await s.waitForNumber(in: "locker.pid")) : nil
            try await agent.waitForLog(containing: "started")
            try await s.server!.crash()
            let exit = try await agent.waitForExit()
            #expect(exit != .exited(0), "\(agent.log)")
            if case .killed = exit { Issue.record("the agent crashed: \(exit)\n\(agent.log)") }
            #expect(agent.log.contains("lost the connection to the X server"), "\(agent.log)")
            if let locker { #expect(isAlive(locker), "the locker died with the agent") }
        }
    }
}
