import Foundation
import Glibc
import Testing

/// Issue #10, "fail closed": however the agent is started (descriptors closed, a log
/// nobody reads, SIGHUP ignored, few descriptors, planted files and directories), it
/// locks on time or refuses to start, clearly; it never runs on without locking.
@Suite(.serialized) struct FailClosedStartTests {
    /// `exec "$0" "$@"` with redirections or a limit: the agent keeps the pid of the process the test started.
    static func exec(_ redirections: String = "", before: String = "") -> String {
        before + "exec \"$0\" \"$@\" " + redirections
    }

    // Case 10.
    @Test("started with standard descriptors closed, the agent still locks on time, and no log line reaches its lock file or X connection",
          arguments: ["2>&-", "1>&- 2>&-", "0<&- 1>&- 2>&-"])
    func closedStandardDescriptors(closed: String) async throws {
        try await Sandbox.with { s in
            try await s.x("xdotool", "key", "shift")
            let agent = try s.startAgent(["--socket", s.socket, "--lock-after", "1500ms", "--locker", Script.locker, "--verbose"],
                                         shell: Self.exec(closed))
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: 1500)
            #expect(s.contents("agent.sock.lock") == "\(agent.pid)\n", "the lock file holds more than the pid")
            // The X connection still works: status makes the agent read the server's idle counter.
            let status = try await s.status()
            #expect((status["idle_ms"] as? Int ?? 0) >= 1500, "\(status)")
            #expect(agent.process.isRunning)
            let closedDescriptors = closed.split(separator: " ").compactMap { Int($0.prefix(1)) }
            for fd in closedDescriptors {
                let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(agent.pid)/fd/\(fd)")
                #expect(target == "/dev/null", "the agent's descriptor \(fd) is \(target ?? "closed")")
            }
        }
    }

    // Case 11.
    @Test("stderr on a pipe nobody reads: with --verbose and a flood of requests to log, the agent still answers and locks on time")
    func logPipeNobodyReads() async throws {
        try await Sandbox.with { s in
            let fifo = s.path("log.fifo")
            try #require(mkfifo(fifo, 0o600) == 0)
            // Held open for reading and never read: the agent's open does not wait, and the pipe fills.
            let reader = open(fifo, O_RDWR | O_NONBLOCK | O_CLOEXEC)
            try #require(reader >= 0)
            defer { close(reader) }
            try await s.x("xdotool", "key", "shift")
            let lockAfter = 4000
            let agent = try await s.startAnsweringAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.locker, "--verbose"],
                                                        shell: Self.exec(">log.fifo 2>&1"))
            // Each disable for a millisecond is three log lines of about 100 bytes (the request,
            // the disable, its end): a thousand are far more than the pipe holds. (Inhibitors
            // would not do: the agent takes at most one a second from a client.)
            let client = LineReader(try RawSocketClient(s.socket))
            let inhibit = "{\"v\":1,\"cmd\":\"disable\",\"for_ms\":1}\n"
            var requests = 0
            while requests < 2000 && !pipeIsFull(fifo) {
                client.client.send(Array(String(repeating: inhibit, count: 20).utf8))
                for _ in 0..<20 {
                    let reply = try #require(client.next(timeout: .seconds(10)), "the agent stopped answering after \(requests) requests")
                    #expect(reply.contains("\"ok\":true"))
                    requests += 1
                }
            }
            try #require(pipeIsFull(fifo), "the log pipe is not full after \(requests) requests")
            // As many more, with the pipe full.
            for _ in 0..<max(requests, 100) {
                client.client.send(Array(inhibit.utf8))
                _ = try #require(client.next(timeout: .seconds(10)), "the agent stopped answering once its log was full")
            }
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: lockAfter)
            #expect(agent.process.isRunning)
        }
    }

    // Case 11, a terminal with `stty tostop`.
    @Test("a background agent on a terminal with stty tostop is not stopped when it logs: it locks on time",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script")))
    func backgroundOnATerminalWithTostop() async throws {
        try await Sandbox.with { s in
            try await s.x("xdotool", "key", "shift")
            // script(1) gives a terminal; the agent is a background job of a shell with job
            // control there, so its writes to the terminal would stop it (SIGTTOU).
            let agent = [agentBinary, "--socket", s.socket, "--lock-after", "2s", "--locker", Script.locker, "--verbose"]
            let quoted = agent.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }
            let inner = "stty tostop; set -m; \(quoted.joined(separator: " ")) & echo $! > agent.pid; wait"
            let terminal = s.directory.appending(path: "terminal.log")
            var environment = s.environment
            environment["SHELL"] = "/bin/sh"
            _ = try startProcess("script", ["-qec", inner, "/dev/null"], environment: environment, in: s.directory,
                                 stdout: terminal, stderr: s.directory.appending(path: "script.err"))
            let pid = Int32(try await s.waitForNumber(in: "agent.pid"))
            let idle = try await s.waitForNumber(in: "lock.idle", timeout: .seconds(10))
            await expectLockOnTime(idleAtLock: idle, lockAfter: 2000)
            #expect(ProcInfo.statFields(pid)?.first != "T", "the agent is stopped")
            let output = (try? String(contentsOf: terminal, encoding: .utf8)) ?? ""
            #expect(output.contains("xidlelock: locking after"), "the log did not reach the terminal: \(output)")
        }
    }

    /// Whether the pipe behind a FIFO (with a reader open) takes no more bytes.
    func pipeIsFull(_ fifo: String) -> Bool {
        let fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var byte: UInt8 = 0x0A
        return write(fd, &byte, 1) < 0 && errno == EAGAIN
    }

    // Case 12; issue #20, item 2.
    @Test("a symlink planted at the lock file or the locker record: the agent says so, runs without that file, locks on time, and leaves the link's target alone",
          arguments: [".lock", ".locker"])
    func plantedSymlink(suffix: String) async throws {
        try await Sandbox.with { s in
            let precious = s.path("precious")
            try "the user's data\n".write(toFile: precious, atomically: false, encoding: .utf8)
            let link = s.socket + suffix
            try #require(symlink(precious, link) == 0)
            try await s.x("xdotool", "key", "shift")
            let agent = try s.startAgent(["--socket", s.socket, "--lock-after", "2s", "--locker", Script.locker])
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: 2000)
            #expect(agent.process.isRunning, "\(agent.log)")
            #expect(agent.log.contains("xidlelock: error: cannot open \(link): it is a symbolic link"), "\(agent.log)")
            let without = suffix == ".lock" ? "without its control socket" : "without a record of its locker"
            #expect(agent.log.contains(without), "\(agent.log)")
            #expect(s.contents("precious") == "the user's data\n", "the link's target was changed")
            // The record's problem leaves the socket working.
            if suffix == ".locker" { #expect(try await s.client("status").exit == .exited(0)) }
        }
    }

    /// A socket directory the agent cannot use, made by `make` for an agent of `uid`
    /// (the runtime directory, or nil for none), and what the agent's error says.
    struct UnusableDirectory: CustomStringConvertible, Sendable {
        var description: String
        var make: @Sendable (Sandbox, _ uid: Int) throws -> (runtime: String?, socketDirectory: String)
        var reason: String
    }

    static let unusableDirectories: [UnusableDirectory] = [
        UnusableDirectory(description: "/tmp/xidlelock-UID made first by nobody, no XDG_RUNTIME_DIR", make: { _, uid in
            let directory = "/tmp/xidlelock-\(uid)"
            rmdir(directory)
            guard mkdir(directory, 0o700) == 0, chown(directory, 65534, 65534) == 0 else { throw POSIXError(.EEXIST) }
            return (nil, directory)
        }, reason: "it belongs to nobody, not to you"),
        UnusableDirectory(description: "xidlelock/ of nobody in the runtime directory", make: { s, uid in
            let runtime = s.path("run")
            guard mkdir(runtime, 0o700) == 0, chown(runtime, uid_t(uid), gid_t(uid)) == 0,
                  mkdir(runtime + "/xidlelock", 0o700) == 0, chown(runtime + "/xidlelock", 65534, 65534) == 0
            else { throw POSIXError(.EEXIST) }
            return (runtime, runtime + "/xidlelock")
        }, reason: "it belongs to nobody, not to you"),
        UnusableDirectory(description: "a missing runtime directory", make: { s, _ in
            (s.path("gone"), s.path("gone") + "/xidlelock")
        }, reason: "No such file or directory"),
        UnusableDirectory(description: "a runtime directory of nobody", make: { s, _ in
            let runtime = s.path("run")
            guard mkdir(runtime, 0o700) == 0, chown(runtime, 65534, 65534) == 0 else { throw POSIXError(.EEXIST) }
            return (runtime, runtime + "/xidlelock")
        }, reason: "Permission denied"),
    ]

    // Case 14; issue #20, item 2.
    @Test("a socket directory the agent cannot use: it says so (log, doctor), runs without its socket and locks on time",
          .enabled(if: getuid() == 0), arguments: unusableDirectories)
    func unusableSocketDirectory(_ unusable: UnusableDirectory) async throws {
        try await Sandbox.with { s in
            // The agent runs as a user of its own, so that no real agent's directory is touched.
            let uid = 42000 + Int(getpid() % 1000)
            let (runtime, directory) = try unusable.make(s, uid)
            defer { if runtime == nil { rmdir(directory) } }
            // Its locker writes lock.idle here.
            chmod(s.directory.path, 0o777)
            let asUser = "exec setpriv --reuid=\(uid) --regid=\(uid) --clear-groups \"$0\" \"$@\""
            try await s.x("xdotool", "key", "shift")
            let agent = try s.startAgent(["--lock-after", "3s", "--locker", Script.locker], environment: ["XDG_RUNTIME_DIR": runtime],
                                         shell: asUser)
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: 3000)
            #expect(agent.process.isRunning, "\(agent.log)")
            #expect(agent.log.contains("xidlelock: error: ") && agent.log.contains(unusable.reason), "\(agent.log)")
            #expect(agent.log.contains("the agent runs without its control socket"), "\(agent.log)")
            if runtime == nil {
                #expect((try? FileManager.default.contentsOfDirectory(atPath: directory)) == [], "something was put in the other user's directory")
            }
            let doctor = try await s.run("setpriv", ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", agentBinary, "doctor"],
                                         environment: ["XDG_RUNTIME_DIR": runtime])
            let finding = doctor.stdout.split(separator: "\n").first { $0.hasPrefix("warning  socket: ") }
            #expect(finding?.contains(directory) == true && finding?.contains(unusable.reason) == true, "\(doctor.stdout)")
            #expect(doctor.stdout.contains("warning  agent: running (pid \(agent.pid)) without its control socket"), "\(doctor.stdout)")
        }
    }

    // Case 15.
    @Test("started with SIGHUP ignored (nohup), a SIGHUP does not stop the agent")
    func ignoredHangUp() async throws {
        try await Sandbox.with { s in
            try await s.x("xdotool", "key", "shift")
            let agent = try await s.startAnsweringAgent(["--lock-after", "2s", "--locker", Script.locker],
                                                        shell: Self.exec(before: "trap '' HUP; "))
            kill(agent.pid, SIGHUP)
            #expect(try await s.client("status").exit == .exited(0), "\(agent.log)")
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: 2000)
            #expect(agent.process.isRunning)
            #expect(!agent.log.contains("received signal"), "\(agent.log)")
        }
    }

    // Case 15, running out of descriptors.
    @Test("out of file descriptors: the agent does not spin, still locks on time and records its locker")
    func outOfDescriptors() async throws {
        try await Sandbox.with { s in
            try await s.x("xdotool", "key", "shift")
            let lockAfter = 5000
            let agent = try await s.startAnsweringAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.locker],
                                                        shell: Self.exec(before: "ulimit -n 40; "))
            // Silent clients until accept fails with EMFILE (the rest wait in the backlog).
            let crowd = try (0..<60).map { _ in try RawSocketClient(s.socket) }
            try await s.waitUntil("the agent to use all its 40 descriptors") { (ProcInfo.descriptorCount(agent.pid) ?? 0) >= 40 }
            let before = try #require(ProcInfo.cpuTicks(agent.pid))
            let measured = ContinuousClock.now
            try await s.waitUntil("3 s of the agent's CPU time", timeout: .seconds(10), every: .milliseconds(100)) {
                ContinuousClock.now - measured >= .seconds(3)
            }
            let used = try #require(ProcInfo.cpuTicks(agent.pid)) - before
            #expect(used < 50, "the agent used \(used * 10) ms of CPU in 3 s while out of descriptors")
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: lockAfter)
            let locker = try await s.waitForNumber(in: "locker.pid")
            #expect(s.contents("agent.sock.locker").split(separator: " ").first == "\(locker)",
                    "the locker record: '\(s.contents("agent.sock.locker"))'\n\(agent.log)")
            #expect(!agent.log.contains("could not be started"), "\(agent.log)")
            #expect(agent.log.contains("error: out of file descriptors: not accepting control clients for 1s"), "\(agent.log)")
            _ = crowd
        }
    }
}
