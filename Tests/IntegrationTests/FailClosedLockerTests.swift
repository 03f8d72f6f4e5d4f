import Foundation
import Testing

/// Issue #10, "fail closed": every way a locker can end or misbehave is seen for what it
/// is, with the keyboard-grabbing test locker on a real server (i3lock itself:
/// FailClosedI3lockTests). Only an exit 0 after the locker held the screen is an unlock.
/// One test at a time, as in FailClosedI3lockTests.
@Suite(.serialized) struct FailClosedLockerTests {
    /// Fails the first `failures` starts (exit 1 at once), then is the grabbing test locker.
    /// Each start appends the shell's pid (the locker's, after exec) to starts.pids.
    static func lockerFailingAtFirst(_ failures: Int) -> String {
        "echo $$ >> starts.pids; if [ $(wc -l < starts.pids) -le \(failures) ]; then exit 1; fi; " + Script.grabbingLocker()
    }

    // Case 5.
    @Test("a locker that runs but never grabs: an error and locker-not-covering after 3 s, not replaced; its later exit 0 is an unlock")
    func lockerThatNeverGrabs() async throws {
        try await Sandbox.with { s in
            let agent = try await s.startAnsweringAgent(["--lock-after", "1h", "--locker", "exec \(testLockerBinary) --no-grab",
                                                         "--on-unlock", "touch unlocked"])
            #expect(try await s.client("lock").exit == .exited(0))
            let locker = Int32(try await s.waitForNumber(in: "lockers.pids"))
            try await agent.waitForLog(containing: "without grabbing the keyboard")
            #expect(agent.log.contains("error: the locker has run for 3s without grabbing the keyboard: the screen may NOT be covered"), "\(agent.log)")
            let status = try await s.status()
            #expect(status["state"] as? String == "locker-not-covering", "\(status)")
            let lockerStatus = try #require(status["locker"] as? [String: Any])
            #expect(lockerStatus["covers_screen"] as? Bool == false, "\(lockerStatus)")
            #expect(status["locker_pid"] as? Int == Int(locker))
            #expect(s.lines("lockers.pids").count == 1, "the locker was replaced")
            #expect(isAlive(locker))
            s.touch("unlock")
            try await agent.waitForLog(containing: "unlocked after")
            #expect(agent.log.contains("(the locker never grabbed the keyboard)"), "\(agent.log)")
            try await s.waitUntil("the on-unlock hook") { s.exists("unlocked") }
            #expect(try await s.status()["state"] as? String == "active")
            #expect(!agent.log.contains("may NOT be locked"), "\(agent.log)")
        }
    }

    // Issue #28, row 6: the grab is probed again while locked.
    @Test("a locker that holds the keyboard, then lets go and keeps running: within the re-probe period and the let-go grace (5 s + 1.5 s) it is locker-not-covering (an error, LockedHint false, events, audit), not replaced; its later exit 0 is an unlock")
    func lockerThatLetsGo() async throws {
        try await Sandbox.with(buses: true) { s in
            let agent = try await s.startControlledAgent(["--lock-after", "1h", "--locker",
                                                          "exec \(testLockerBinary) --let-go-after 3000 --let-go-file let-go",
                                                          "--on-unlock", "touch unlocked"])
            _ = try await s.startEvents()
            #expect(try await s.client("lock").exit == .exited(0))
            let locker = try await s.waitForCoveringLocker()
            try await s.waitUntil("LockedHint true") { try await s.lockedHintCalls().last == true }
            // Status every 100 ms from the let-go until it says not covering.
            let letGoAt = try await s.waitForNumber(in: "let-go", timeout: .seconds(10))
            var stillLocked = 0
            var noticedAt: Int?
            while noticedAt == nil, monotonicMilliseconds() - letGoAt < 15_000 {
                let state = try await s.status()["state"] as? String
                if state == "locker-not-covering" { noticedAt = monotonicMilliseconds() } else if state == "locked" { stillLocked += 1 }
                try await Task.sleep(for: .milliseconds(100))
            }
            let noticedAfter = noticedAt.map { $0 - letGoAt }
            let status = try await s.status()
            let lockerStatus = status["locker"] as? [String: Any]
            let hints = try await s.lockedHintCalls()
            print("figure: a locker that let go of the keyboard 3 s after its grab: status said locker-not-covering \(noticedAfter.map { "\($0) ms" } ?? "never (15 s)") after the let-go (re-probe period 5 s, grace 1.5 s), \(stillLocked) samples (100 ms apart) said locked meanwhile; LockedHint calls \(hints)")
            let after = try #require(noticedAfter, "the agent never noticed the let-go\n\(agent.log)")
            // The re-probe period, then the grace in which an exit 0 would have been the unlock.
            #expect(after <= 8000, "noticed \(after) ms after the let-go")
            #expect(lockerStatus?["covers_screen"] as? Bool == false, "\(status)")
            #expect(lockerStatus?["let_go"] as? Bool == true, "\(status)")
            #expect(hints.last == false, "\(hints)")
            #expect(agent.log.contains("error: the locker let go of the keyboard"), "\(agent.log)")
            let text = try await s.client("status").stdout
            #expect(text.contains("NOT covering the screen (it let go of the keyboard"), "\(text)")
            let notCovering = s.events("locker-not-covering")
            #expect(notCovering.count == 1 && notCovering.first?["let_go"] as? Bool == true, "\(s.contents("events"))")
            try await s.waitUntil("the audit trail's grab-lost entry") {
                try await s.auditMessages(agent, event: "locker-failure").contains { $0.contains("let go of the keyboard") }
            }
            #expect(s.lines("lockers.pids").count == 1, "the locker was replaced")
            #expect(isAlive(locker))
            // Its exit 0 ends the lock, as one that never grabbed.
            s.touch("unlock")
            try await agent.waitForLog(containing: "unlocked after")
            try await s.waitUntil("the on-unlock hook") { s.exists("unlocked") }
        }
    }

    // Case 6.
    @Test("while the locker fails, status says locker-failing with the reason and the next try, and events say locked only once a locker holds")
    func failingStateInStatusAndEvents() async throws {
        try await Sandbox.with { s in
            let agent = try await s.startAnsweringAgent(["--lock-after", "1h", "--locker", Self.lockerFailingAtFirst(3)])
            let events = LineReader(try RawSocketClient(s.socket))
            events.client.send(Array("{\"v\":1,\"cmd\":\"events\"}\n".utf8))
            #expect(events.next()?.contains("\"ok\":true") == true)
            #expect(try await s.client("lock").exit == .exited(0))
            // The third failure waits 2 s: status shows it.
            var failing: [String: Any] = [:]
            try await s.waitUntil("status to show the locker failing with a delay") {
                let status = try await s.status()
                let locker = status["locker"] as? [String: Any]
                guard status["state"] as? String == "locker-failing", (locker?["next_try_in_ms"] as? Int ?? 0) > 200 else { return false }
                failing = status
                return true
            }
            let failure = try #require(failing["last_locker_failure"] as? [String: Any], "\(failing)")
            #expect(failure["kind"] as? String == "exited")
            #expect((failure["reason"] as? String)?.contains("exited with status 1") == true, "\(failure)")
            let lockerStatus = try #require(failing["locker"] as? [String: Any])
            #expect(lockerStatus["state"] as? String == "failing")
            #expect(failing["locker_pid"] is NSNull)
            _ = try await s.waitForCoveringLocker()
            var kinds: [String] = []
            while kinds.last != "locked", let line = events.next() {
                let event = try #require(jsonObject(line), "\(line)")
                let kind = try #require(event["event"] as? String)
                kinds.append(kind)
                if kind == "locker-failed" {
                    #expect(event["kind"] as? String == "exited", "\(line)")
                    #expect((event["reason"] as? String)?.isEmpty == false, "\(line)")
                }
            }
            #expect(kinds == ["locking", "locker-failed", "locking", "locker-failed", "locking", "locker-failed", "locking", "locked"],
                    "\(kinds)\n\(agent.log)")
            s.touch("unlock")
            try await s.waitForStatus("the unlock") { $0["state"] as? String == "active" }
        }
    }

    // Case 7.
    @Test("xidlelock lock during the backoff starts the locker again at once")
    func lockDuringTheBackoff() async throws {
        try await Sandbox.with { s in
            let agent = try await s.startAnsweringAgent(["--lock-after", "1h", "--locker", Self.lockerFailingAtFirst(5)])
            #expect(try await s.client("lock").exit == .exited(0))
            // After the fifth failure the next try is 8 s away.
            var nextTry = 0
            try await s.waitUntil("five failures and a long delay") {
                let locker = try await s.status()["locker"] as? [String: Any]
                guard locker?["attempt"] as? Int == 6, let next = locker?["next_try_in_ms"] as? Int else { return false }
                nextTry = next
                return true
            }
            #expect(nextTry > 4000, "the next try in \(nextTry) ms\n\(agent.log)")
            let asked = ContinuousClock.now
            #expect(try await s.client("lock").exit == .exited(0))
            _ = try await s.waitForLines("starts.pids", count: 6)
            let waited = ContinuousClock.now - asked
            #expect(waited < .milliseconds(nextTry - 2000), "the locker started \(waited) after the request, the backoff had \(nextTry) ms left\n\(agent.log)")
            #expect(agent.log.contains("lock requested while the locker is failing: trying again now"), "\(agent.log)")
            _ = try await s.waitForCoveringLocker()
            s.touch("unlock")
        }
    }

    // Case 8.
    @Test("an adopted locker that is killed: the new agent logs a failure whose end cannot be known, and locks again")
    func adoptedLockerKilled() async throws {
        try await Sandbox.with { s in
            let first = try await s.startAnsweringAgent(["--lock-after", "1s", "--locker", holdingLocker])
            let locker = try await s.waitForCoveringLocker()
            first.send(SIGKILL)
            _ = try await first.waitForExit()
            #expect(isAlive(locker), "the locker died with its agent")
            let second = try await s.startAnsweringAgent(["--lock-after", "1s", "--locker", holdingLocker,
                                                          "--on-unlock", "touch unlocked"])
            #expect(second.log.contains("found the locker of an earlier agent running (pid \(locker))"), "\(second.log)")
            let adopted = try await s.status()["locker"] as? [String: Any]
            #expect(adopted?["adopted"] as? Bool == true, "\(adopted ?? [:])")
            kill(locker, SIGKILL)
            let relocked = try await s.waitForCoveringLocker(other: locker)
            #expect(s.lines("lockers.pids").map { Int32($0) } == [locker, relocked])
            #expect(second.log.contains("its exit status cannot be known, so this is not taken as an unlock"), "\(second.log)")
            #expect(second.log.contains("the screen may NOT be locked"), "\(second.log)")
            #expect(!second.log.contains("unlocked after"), "\(second.log)")
            #expect(!s.exists("unlocked"), "the on-unlock hook ran")
            s.touch("unlock")
        }
    }

    // Case 9.
    @Test("a locker record from an earlier X server on the same display is not adopted; the new agent locks on time")
    func recordFromAnEarlierServer() async throws {
        try await Sandbox.with(serverArguments: [":\(unusedDisplayNumber())"]) { s in
            let first = try s.startAgent(["--socket", s.socket, "--lock-after", "1s", "--locker", "echo $$ > old-locker.pid; exec sleep 600"])
            let oldLocker = Int32(try await s.waitForNumber(in: "old-locker.pid"))
            try await s.waitUntil("the locker record") {
                s.contents("agent.sock.locker").split(separator: " ").first == "\(oldLocker)"
            }
            first.send(SIGKILL)
            _ = try await first.waitForExit()
            // A new session on the same display number; the old locker, which needs no X, still runs.
            try await s.restartServer()
            #expect(isAlive(oldLocker))
            let second = try s.startAgent(["--socket", s.socket, "--lock-after", "2s", "--locker", "xprintidle > lock.idle; echo $$ > locker.pid; exec sleep 60"])
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: 2000)
            #expect(second.log.contains("(pid \(oldLocker)) locked an earlier X server on this display: not adopted"), "\(second.log)")
            #expect(!second.log.contains("found the locker of an earlier agent"), "\(second.log)")
            #expect(isAlive(oldLocker), "the new agent touched the old locker")
        }
    }

    // Case 9, a record naming some other process of the user.
    @Test("a locker record naming another live process of the user, with its real start time but another server's token, is not adopted")
    func recordNamingAnotherProcess() async throws {
        try await Sandbox.with { s in
            _ = try startProcess("/bin/sh", ["-c", "echo $$ > other.pid; exec sleep 600"], environment: s.environment,
                                 in: s.directory, stdout: s.directory.appending(path: "other.out"),
                                 stderr: s.directory.appending(path: "other.err"))
            let other = Int32(try await s.waitForNumber(in: "other.pid"))
            let start = try #require(ProcInfo.startTime(other))
            try "\(other) \(start) 0123456789abcdef0123456789abcdef\n".write(toFile: s.lockerRecord, atomically: false, encoding: .utf8)
            chmod(s.lockerRecord, 0o600)
            let agent = try s.startAgent(["--socket", s.socket, "--lock-after", "1s", "--locker", Script.locker])
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: 1000)
            #expect(agent.log.contains("(pid \(other)) locked an earlier X server on this display: not adopted"), "\(agent.log)")
            #expect(!agent.log.contains("found the locker of an earlier agent"), "\(agent.log)")
            #expect(isAlive(other))
        }
    }
}
