import Foundation
import Testing

/// The audit trail, end to end: read back from the systemd journal where journald
/// runs (`make test` starts one where it can: .ci/start-journald), else from the stderr lines the agent
/// writes where there is no journal.
@Suite struct AuditTests {
    /// Whether a journald takes entries on this machine.
    static let journalRuns: Bool = {
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/systemd-cat")
        probe.arguments = ["true"]
        probe.standardError = FileHandle.nullDevice
        guard (try? probe.run()) != nil else { return false }
        probe.waitUntilExit()
        return probe.terminationStatus == 0
    }()

    /// The journal's entries of this agent for one event, each as its fields.
    func journalEntries(_ s: Sandbox, pid: Int32, event: String) async throws -> [[String: Any]] {
        // Only since this process started: the journal outlives test runs, and an
        // earlier run's process may have had the same pid.
        let age = ProcInfo.age(pid).map { Double($0.milliseconds) / 1000 } ?? 3600
        let since = Int(Date().timeIntervalSince1970 - age) - 2
        let out = try await s.x("journalctl", "--no-pager", "-o", "json", "-t", "xidlelock", "--since", "@\(since)",
                                "_PID=\(pid)", "XIDLELOCK_EVENT=\(event)")
        return out.split(separator: "\n").compactMap { jsonObject(String($0)) }
    }

    /// Waits until the journal holds an entry of each of `events` (journald writes a
    /// moment after it receives), then returns the first entry of each.
    func waitForJournal(_ s: Sandbox, pid: Int32, _ events: String...) async throws -> [String: [String: Any]] {
        var found: [String: [String: Any]] = [:]
        try await s.waitUntil("the journal to hold \(events.joined(separator: ", "))") {
            for event in events where found[event] == nil {
                found[event] = try await journalEntries(s, pid: pid, event: event).first
            }
            return found.count == events.count
        }
        return found
    }

    @Test("a lock, its unlock, a disable and an enable are each an entry with their fields")
    func lockUnlockDisable() async throws {
        try await Sandbox.with { s in
            try await s.x("xdotool", "key", "shift")
            let agent = try await s.startControlledAgent(["--lock-after", "2s", "--locker", Script.grabbingLocker()])
            _ = try await s.waitForLines("lockers.pids")
            s.touch("unlock")
            try await agent.waitForLog(containing: "unlocked after")
            #expect(try await s.client("disable", "--for", "1h").exit == .exited(0))
            #expect(try await s.client("enable").exit == .exited(0))
            let pid = agent.process.processIdentifier
            if Self.journalRuns {
                let entries = try await waitForJournal(s, pid: pid, "lock", "unlock", "disable", "enable")
                let lock = entries["lock"], unlock = entries["unlock"], disable = entries["disable"], enable = entries["enable"]
                #expect(lock?["MESSAGE_ID"] as? String == "33f4aa3521f84341af05baeccf12149c")
                #expect(lock?["PRIORITY"] as? String == "5")
                #expect(Int(lock?["XIDLELOCK_IDLE_MS"] as? String ?? "") ?? 0 >= 2000, "\(String(describing: lock))")
                #expect(Int(unlock?["XIDLELOCK_LOCKED_MS"] as? String ?? "") ?? 0 >= 1100, "\(String(describing: unlock))")
                #expect(disable?["XIDLELOCK_FOR_MS"] as? String == "3600000", "\(String(describing: disable))")
                #expect((disable?["XIDLELOCK_BY"] as? String)?.contains("(xidlelock)") == true, "\(String(describing: disable))")
                #expect((enable?["XIDLELOCK_BY"] as? String)?.contains("(xidlelock)") == true, "\(String(describing: enable))")
            } else {
                try await agent.waitForAuditLine(of: "enable")
                #expect(agent.log.contains("audit lock: screen locked: the locker holds the keyboard (after "), "\(agent.log)")
                #expect(agent.log.contains("audit unlock: screen unlocked after"), "\(agent.log)")
                #expect(agent.log.contains("XIDLELOCK_FOR_MS=\"3600000\""), "\(agent.log)")
            }
        }
    }

    @Test("the policy's clamp is an entry of its own, and so is an inhibitor's start and end")
    func policyAndInhibitor() async throws {
        try await Sandbox.with { s in
            try s.writePolicy("max-lock-after 1h\n")
            let agent = try await s.startControlledAgent(["--lock-after", "2h", "--locker", Script.locker, "--quiet"])
            #expect(try await s.client("inhibit", "--why", "slides", "--for", "100ms").exit == .exited(0))
            let pid = agent.process.processIdentifier
            if Self.journalRuns {
                let entries = try await waitForJournal(s, pid: pid, "policy", "inhibit", "uninhibit")
                let policy = entries["policy"], inhibit = entries["inhibit"]
                #expect((policy?["MESSAGE"] as? String)?.contains("locking at 1h") == true, "\(String(describing: policy))")
                #expect(policy?["XIDLELOCK_POLICY_FILE"] as? String == s.path("etc/policy"))
                #expect(inhibit?["XIDLELOCK_WHY"] as? String == "slides", "\(String(describing: inhibit))")
                #expect(inhibit?["XIDLELOCK_SOURCE"] as? String == "socket", "\(String(describing: inhibit))")
            } else {
                // --quiet drops info lines, never the audit trail.
                try await agent.waitForAuditLine(of: "uninhibit")
                #expect(agent.log.contains("audit policy: policy \(s.path("etc/policy")): lock-after 2h"), "\(agent.log)")
                #expect(agent.log.contains("XIDLELOCK_WHY=\"slides\""), "\(agent.log)")
            }
        }
    }

    /// sd_journal_sendv answers 0 where the journal's socket is missing, as if the
    /// entry were written: the agent must see that and write the line itself.
    @Test("where no journald listens, each entry is a line on stderr: none is lost",
          .enabled(if: AudioTests.mountNamespacesWork, "needs `unshare -m` to hide the journal from the agent"))
    func noJournal() async throws {
        try await Sandbox.with { s in
            // The journal's socket hidden from the agent alone, under an empty tmpfs.
            let hideJournal = "exec unshare -m sh -c '[ ! -d /run/systemd/journal ] || mount -t tmpfs none /run/systemd/journal; "
                + "exec \"$0\" \"$@\"' \"$0\" \"$@\""
            let agent = try await s.startControlledAgent(["--lock-after", "1h", "--locker", Script.locker, "--quiet"],
                                                         shell: hideJournal)
            #expect(try await s.client("disable", "--for", "1h").exit == .exited(0))
            try await agent.waitForAuditLine(of: "disable")
            #expect(agent.log.contains("XIDLELOCK_FOR_MS=\"3600000\""), "\(agent.log)")
            if Self.journalRuns {
                #expect(try await journalEntries(s, pid: agent.process.processIdentifier, event: "disable").isEmpty)
            }
        }
    }
    /// Issue #20, item 3. A datagram socket at the journal's path that nobody reads
    /// (the agent's alone, in a mount namespace): its queue fills after a few entries
    /// (net.unix.max_dgram_qlen, 10), and a blocking sendmsg would wait for ever.
    @Test("a journal that does not read: the agent keeps answering and locks on time; the entries go to stderr, with a count",
          .enabled(if: AudioTests.mountNamespacesWork, "needs `unshare -m` to give the agent a journal of its own"))
    func stuckJournal() async throws {
        try await Sandbox.with { s in
            let journal = "/run/systemd/journal/socket"
            try """
                import os, socket, time
                s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                s.bind("\(journal)")
                open("journal.pid", "w").write("%d\\n" % os.getpid())
                time.sleep(3600)
                """.write(toFile: s.path("journal.py"), atomically: false, encoding: .utf8)
            let stuckJournal = "exec unshare -m sh -c 'mkdir -p /run/systemd/journal && mount -t tmpfs none /run/systemd/journal && "
                + "{ python3 journal.py & } && while [ ! -S \(journal) ]; do sleep 0.05; done; "
                + "exec \"$0\" \"$@\"' \"$0\" \"$@\""
            try await s.x("xdotool", "key", "shift")
            let lockAfter = 6000
            let agent = try await s.startAnsweringAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.locker, "--quiet"],
                                                        shell: stuckJournal)
            // Each disable for a millisecond is two entries (disable, enable): far more than the socket's queue holds.
            let client = LineReader(try RawSocketClient(s.socket))
            let disable = "{\"v\":1,\"cmd\":\"disable\",\"for_ms\":1}\n"
            for k in 0..<40 {
                client.client.send(Array(disable.utf8))
                _ = try #require(client.next(timeout: .seconds(5)), "the agent stopped answering after \(k) disables\n\(agent.log)")
            }
            // The entry in sendmsg has waited a second: the rest go to stderr.
            try await s.waitForStatus("the audit trail to go to stderr") {
                ($0["audit"] as? [String: Any])?["to"] as? String == "stderr (the journal is not reading)"
            }
            let audit = try await s.status()["audit"] as? [String: Any]
            #expect((audit?["sent_to_stderr"] as? Int ?? 0) >= 20, "\(String(describing: audit))")
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: lockAfter)
            // All but the few the socket's queue took (10, and the one in sendmsg, which is on stderr too).
            #expect(agent.auditLines(of: "disable").count >= 30, "\(agent.log)")
            let counted = agent.log.split(separator: "\n").first { $0.contains("warning: the systemd journal is not taking audit entries") }
            #expect(counted?.contains(" audit entries went to stderr, and the next ones go there until it takes one") == true,
                    "no count of the entries the journal did not take\n\(agent.log)")
            let doctor = try await s.doctor()
            #expect(doctor.stdout.contains("warning  audit: the systemd journal is not taking entries"), "\(doctor.stdout)")
        }
    }
}
