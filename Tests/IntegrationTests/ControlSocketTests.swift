import Foundation
import Glibc
import Testing

/// A raw client of the control socket, for what the `xidlelock` commands never do:
/// send garbage, stall, crowd.
final class RawSocketClient {
    let fd: Int32

    init(_ path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.enumerated() { raw[i] = byte }
        }
        let ok = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard ok == 0 else {
            close(fd)
            throw CocoaError(.fileReadUnknown, userInfo: ["reason": "connect \(path): \(String(cString: strerror(errno)))"])
        }
    }

    deinit { close(fd) }

    /// Sends bytes; false once the agent has closed the connection.
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return false }
            sent += n
        }
        return true
    }

    /// Everything the agent sends until it closes the connection or `timeout` passes.
    func readAll(timeout: Duration) -> String {
        var data: [UInt8] = []
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 50) > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = recv(fd, &chunk, chunk.count, 0)
            if n <= 0 { break }
            data += chunk[..<n]
        }
        return String(decoding: data, as: UTF8.self)
    }
}

extension Sandbox {
    /// The agent's socket, in the test's own directory.
    var socket: String { path("agent.sock") }

    /// Runs `xidlelock COMMAND … --socket <this test's socket>`.
    func client(_ arguments: String..., environment: [String: String?] = [:]) async throws -> CommandResult {
        try await run(agentBinary, arguments + ["--socket", socket], environment: environment)
    }

    /// `xidlelock status --json`, parsed.
    func status() async throws -> [String: Any] {
        let result = try await client("status", "--json")
        guard result.exit == .exited(0),
              let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        else { throw CommandFailed(command: ["status", "--json"], result: result) }
        return object
    }

    func waitForStatus(_ what: String, _ condition: @escaping ([String: Any]) -> Bool) async throws {
        try await waitUntil(what) { condition(try await self.status()) }
    }

    /// Starts an agent with a short lock time held off by `disable`, so that a test can set
    /// up its own hold before the lock is due however loaded the machine is.
    func startDisabledAgent(lockAfter: String) async throws -> AgentProcess {
        try await x("xdotool", "key", "shift")
        let agent = try await startControlledAgent(["--lock-after", lockAfter, "--locker", holdingLocker])
        #expect(try await client("disable").exit == .exited(0))
        guard !exists("lockers.pids") else {
            throw WaitTimedOut(what: "the agent to answer before its lock time (the machine is too loaded)", timeout: .zero, context: agent.log)
        }
        return agent
    }

    /// Starts an agent on this test's socket and waits until it answers.
    func startControlledAgent(_ arguments: [String], shell: String? = nil) async throws -> AgentProcess {
        let agent = try startAgent(arguments + ["--socket", socket], shell: shell)
        // Waits on this agent alone: an earlier one of the test may have exited on purpose.
        try await IntegrationTests.waitUntil("the agent's socket to answer", context: { agent.log }) {
            guard agent.process.isRunning else { throw AgentExited(waitingFor: "its socket", exit: Exit(agent.process), log: agent.log) }
            return (try? await self.client("status").exit) == .exited(0)
        }
        return agent
    }
}

/// Holds the screen (a keyboard grab) until the file `unlock` appears; its pid goes to lockers.pids.
let holdingLocker = Script.grabbingLocker()

@Suite struct ControlSocketTests {
    @Test("status tells the state, idle time and next stage; JSON and plain agree")
    func statusReportsState() async throws {
        try await Sandbox.with { s in
            try await s.x("xdotool", "key", "shift")
            _ = try await s.startControlledAgent(["--lock-after", "1h", "--locker", "true",
                                                  "--stage", "dim=30m:true"])
            let status = try await s.status()
            #expect(status["state"] as? String == "active")
            #expect(status["next_stage"] as? String == "dim")
            let idle = try #require(status["idle_ms"] as? Int)
            #expect(idle >= 0 && idle < 10_000)
            let dueIn = try #require(status["next_stage_in_ms"] as? Int)
            #expect(abs(dueIn - (1_800_000 - idle)) < 2000)
            #expect(status["locker_pid"] is NSNull)
            let plain = try await s.client("status")
            #expect(plain.stdout.contains("state: active") && plain.stdout.contains("next: dim in 29m"))
        }
    }

    @Test("every client command says clearly that no agent runs, and exits 69")
    func noAgent() async throws {
        try await Sandbox.with { s in
            for command in ["status", "lock", "reset", "enable", "toggle", "quit", "events"] {
                let result = try await s.client(command)
                #expect(result.exit == .exited(69), "\(command)")
                #expect(result.stderr.contains("no xidlelock agent is running"), "\(command): \(result.stderr)")
            }
            let inhibit = try await s.client("inhibit", "--for", "1m")
            #expect(inhibit.exit == .exited(69))
        }
    }

    @Test("lock starts the locker now, once; a second lock starts no second locker")
    func lockNow() async throws {
        try await Sandbox.with { s in
            _ = try await s.startControlledAgent(["--lock-after", "1h", "--locker", holdingLocker])
            let started = ContinuousClock.now
            #expect(try await s.client("lock").exit == .exited(0))
            _ = try await s.waitForLines("lockers.pids")
            let lockToLocker = ContinuousClock.now - started
            print("figure: `xidlelock lock` to locker start: \(lockToLocker.milliseconds) ms (client start included)")
            #expect(try await s.client("lock").exit == .exited(0))
            try await s.waitForStatus("locked") { $0["state"] as? String == "locked" }
            let status = try await s.status()
            #expect(status["locker_pid"] as? Int == Int(s.lines("lockers.pids")[0]))
            #expect(s.lines("lockers.pids").count == 1, "a second locker started")
            s.touch("unlock")
            try await s.waitForStatus("unlocked") { $0["state"] as? String == "active" }
        }
    }

    @Test("reset counts as activity: the agent's idle time restarts")
    func reset() async throws {
        try await Sandbox.with { s in
            _ = try await s.startControlledAgent(["--lock-after", "1h", "--locker", "true"])
            try await s.waitUntil("the idle time to pass 1.5 s") { (try await s.status()["idle_ms"] as? Int ?? 0) > 1500 }
            #expect(try await s.client("reset").exit == .exited(0))
            let idle = try #require(try await s.status()["idle_ms"] as? Int)
            #expect(idle < 1000, "idle after reset: \(idle)")
        }
    }

    @Test("inhibit --for holds the lock off; when it ends the overdue lock comes at once")
    func inhibitForADuration() async throws {
        try await Sandbox.with { s in
            let agent = try await s.startDisabledAgent(lockAfter: "4s")
            #expect(try await s.client("inhibit", "--why", "slides", "--for", "6s").exit == .exited(0))
            #expect(try await s.client("enable").exit == .exited(0))
            let status = try await s.status()
            #expect(status["state"] as? String == "inhibited")
            let inhibitors = try #require(status["inhibitors"] as? [[String: Any]])
            #expect(inhibitors.first?["why"] as? String == "slides")
            // The hold ends by itself after idle passed the lock time; the lock comes then, not
            // before. Judged by the order of the agent's own lines, not by a look at the clock
            // between 4 s and 6 s, which a loaded machine can miss.
            _ = try await s.waitForLines("lockers.pids")
            try await agent.waitForLog(containing: "inhibitor of")
            let log = agent.log
            let ended = try #require(log.range(of: "inhibitor of pid"), "\(log)")
            let locking = try #require(log.range(of: "locking after"), "\(log)")
            #expect(ended.lowerBound < locking.lowerBound, "locked while inhibited\n\(log)")
            #expect(log.contains("stage 'lock' is due now"), "\(log)")
            s.touch("unlock")
        }
    }

    @Test("inhibit -- CMD holds the lock off while CMD runs, then exits with its status")
    func inhibitWhileACommandRuns() async throws {
        try await Sandbox.with { s in
            let agent = try await s.startDisabledAgent(lockAfter: "4s")
            let command = "touch started; while [ ! -e done ]; do sleep 0.02; done; exit 7"
            let process = try startProcess(agentBinary, ["inhibit", "--socket", s.socket, "--", "sh", "-c", command],
                                           environment: s.environment, in: s.directory,
                                           stdout: s.directory.appending(path: "inhibit.out"),
                                           stderr: s.directory.appending(path: "inhibit.err"))
            try await s.waitUntil("the command to start") { s.exists("started") }
            try await s.waitForStatus("the inhibitor") { ($0["inhibitors"] as? [Any])?.isEmpty == false }
            #expect(try await s.client("enable").exit == .exited(0))
            let status = try await s.status()
            let inhibitors = try #require(status["inhibitors"] as? [[String: Any]])
            #expect(inhibitors.first?["why"] as? String == "while running: sh -c \(command)")
            #expect(inhibitors.first?["remaining_ms"] is NSNull)
            try await s.waitUntil("the server idle to pass the lock time well") { try await s.serverIdle() > 5000 }
            #expect(!s.exists("lockers.pids"), "locked while inhibited\n\(agent.log)")
            s.touch("done")
            #expect(try await process.waitForExit("inhibit") == .exited(7))
            _ = try await s.waitForLines("lockers.pids")
            s.touch("unlock")
        }
    }

    @Test("inhibit -- CMD passes signals on and ends the inhibition when it dies")
    func inhibitForwardsSignals() async throws {
        try await Sandbox.with { s in
            _ = try await s.startControlledAgent(["--lock-after", "1h", "--locker", "true"])
            let process = try startProcess(agentBinary, ["inhibit", "--socket", s.socket, "--", "sh", "-c",
                                                         "trap 'echo got-term > term; exit 3' TERM; touch started; while :; do sleep 0.02; done"],
                                           environment: s.environment, in: s.directory,
                                           stdout: s.directory.appending(path: "inhibit.out"),
                                           stderr: s.directory.appending(path: "inhibit.err"))
            try await s.waitUntil("the command to start") { s.exists("started") }
            try await s.waitForStatus("inhibited") { $0["state"] as? String == "inhibited" }
            kill(process.processIdentifier, SIGTERM)
            #expect(try await process.waitForExit("inhibit") == .exited(3))
            #expect(s.contents("term") == "got-term\n")
            try await s.waitForStatus("the inhibition to end") { $0["state"] as? String == "active" }
        }
    }

    @Test("disable, enable and toggle; disable --for ends by itself")
    func disableEnableToggle() async throws {
        try await Sandbox.with { s in
            _ = try await s.startControlledAgent(["--lock-after", "1h", "--locker", "true"])
            #expect(try await s.client("disable").exit == .exited(0))
            #expect(try await s.status()["state"] as? String == "disabled")
            #expect(try await s.client("enable").exit == .exited(0))
            #expect(try await s.status()["state"] as? String == "active")
            #expect(try await s.client("toggle").stdout == "disabled\n")
            #expect(try await s.client("toggle").stdout == "enabled\n")
            #expect(try await s.client("disable", "--for", "1s").exit == .exited(0))
            let remaining = try #require(try await s.status()["disabled_remaining_ms"] as? Int)
            #expect(remaining > 0 && remaining <= 1000)
            try await s.waitForStatus("the disable to end") { $0["state"] as? String == "active" }
        }
    }

    @Test("stages fire in order of idle time and their resume commands run when input returns")
    func stagesAndResumeCommands() async throws {
        try await Sandbox.with { s in
            try await s.x("xdotool", "key", "shift")
            let agent = try await s.startControlledAgent([
                "--stage", "off=2s:echo off >> order", "--resume", "echo on >> order",
                "--lock-after", "1500ms", "--locker", "echo lock >> order; " + holdingLocker,
                "--stage", "dim=1s:echo dim >> order", "--resume", "echo undim >> order",
            ])
            _ = try await s.waitForLines("order", count: 3)
            #expect(s.lines("order") == ["dim", "lock", "off"], "\(agent.log)")
            let input = ContinuousClock.now
            try await s.x("xdotool", "mousemove_relative", "5", "5")
            _ = try await s.waitForLines("order", count: 5)
            print("figure: input to resume command: \((ContinuousClock.now - input).milliseconds) ms (xdotool start included)")
            #expect(Set(s.lines("order")[3...]) == ["undim", "on"], "\(agent.log)")
            #expect(s.lines("lockers.pids").count == 1)
            s.touch("unlock")
        }
    }

    @Test("events streams what happens, one JSON object per line")
    func eventsStream() async throws {
        try await Sandbox.with { s in
            _ = try await s.startControlledAgent(["--lock-after", "1h", "--locker", holdingLocker])
            let events = try startProcess(agentBinary, ["events", "--json", "--socket", s.socket],
                                          environment: s.environment, in: s.directory,
                                          stdout: s.directory.appending(path: "events"),
                                          stderr: s.directory.appending(path: "events.err"))
            try await s.waitUntil("the events client to connect") {
                let clients = try await s.run("sh", ["-c", "ls /proc/\(events.processIdentifier)/fd | wc -l"])
                return Int(clients.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 >= 4
            }
            _ = try await s.client("inhibit", "--why", "x", "--for", "100ms")
            try await s.waitForStatus("the inhibitor to end") { $0["state"] as? String == "active" }
            _ = try await s.client("lock")
            _ = try await s.waitForLines("lockers.pids")
            s.touch("unlock")
            let lines = try await s.waitForLines("events", count: 5)
            let kinds = lines.compactMap { line in
                (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["event"] as? String
            }
            #expect(kinds == ["inhibited", "uninhibited", "locking", "locked", "unlocked"], "\(lines)")
            _ = try await s.client("quit")
            #expect(try await events.waitForExit("events") == .exited(0))
        }
    }

    @Test("quit stops the agent and leaves the locker running")
    func quitLeavesTheLocker() async throws {
        try await Sandbox.with { s in
            let agent = try await s.startControlledAgent(["--lock-after", "1h", "--locker", holdingLocker])
            _ = try await s.client("lock")
            let locker = Int32(try await s.waitForNumber(in: "lockers.pids"))
            #expect(try await s.client("quit").exit == .exited(0))
            #expect(try await agent.waitForExit() == .exited(0))
            #expect(isAlive(locker), "quit killed the locker")
            #expect(!s.exists("agent.sock"), "the socket file is left behind")
            s.touch("unlock")
        }
    }

    @Test("a second agent for the same display is refused, naming the first")
    func secondAgentRefused() async throws {
        try await Sandbox.with { s in
            let first = try await s.startControlledAgent(["--lock-after", "1h", "--locker", "true"])
            let second = try s.startAgent(["--lock-after", "1h", "--locker", "true", "--socket", s.socket])
            #expect(try await second.waitForExit() == .exited(73))
            #expect(second.log.contains("already runs") && second.log.contains("pid \(first.pid)"), "\(second.log)")
            #expect(try await s.client("status").exit == .exited(0), "the first agent still answers")
        }
    }

    @Test("one agent per display whatever its spelling: :N and unix:N.0 are one display, one socket",
          arguments: ["unix:%d.0", ":%d.0", "unix/:%d"])
    func oneAgentPerDisplaySpelling(spelling: String) async throws {
        try await Sandbox.with { s in
            let runtime = s.path("run")
            try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
            let display = try #require(s.display)
            let number = Int(display.dropFirst()) ?? -1
            let other = spelling.replacingOccurrences(of: "%d", with: "\(number)")
            let first = try s.startAgent(["--lock-after", "1h", "--locker", "true"], environment: ["XDG_RUNTIME_DIR": runtime])
            try await first.waitForLog(containing: "started")
            let second = try s.startAgent(["--lock-after", "1h", "--locker", "true"],
                                          environment: ["XDG_RUNTIME_DIR": runtime, "DISPLAY": other])
            #expect(try await second.waitForExit() == .exited(73), "DISPLAY=\(other) started a second agent\n\(second.log)")
            #expect(second.log.contains("pid \(first.pid)"), "\(second.log)")
        }
    }

    @Test("client text cannot forge log lines or reach a terminal's escapes, and is cut between characters")
    func hostileClientText() async throws {
        try await Sandbox.with { s in
            let agent = try await s.startControlledAgent(["--lock-after", "1h", "--locker", "true"])
            let why = "film\nxidlelock: error: forged line\u{1b}[2J" + String(repeating: "é", count: 140)
            #expect(try await s.client("inhibit", "--why", why, "--for", "1h").exit == .exited(0))
            let status = try await s.client("status")
            #expect(!status.stdout.unicodeScalars.contains { $0.value == 0x1B }, "an escape reached the terminal")
            #expect(status.stdout.contains("film\\u{a}xidlelock: error: forged line\\u{1b}[2J"), "\(status.stdout)")
            #expect(status.stdout.contains("éé"), "the text was emptied by a cut inside a character")
            try await agent.waitForLog(containing: "inhibited by")
            #expect(!agent.log.split(separator: "\n").contains { $0.hasPrefix("xidlelock: error: forged") }, "\(agent.log)")
        }
    }

    @Test("an agent that died leaves a stale socket, which the next agent replaces")
    func staleSocketReplaced() async throws {
        try await Sandbox.with { s in
            let first = try await s.startControlledAgent(["--lock-after", "1h", "--locker", "true"])
            first.send(SIGKILL)
            _ = try await first.waitForExit()
            #expect(s.exists("agent.sock"))
            _ = try await s.startControlledAgent(["--lock-after", "1h", "--locker", "true"])
            #expect(try await s.client("status").exit == .exited(0))
        }
    }

    @Test("the default socket is private to the user, per display")
    func defaultSocketIsPrivate() async throws {
        try await Sandbox.with { s in
            let runtime = s.path("run")
            try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
            let env: [String: String?] = ["XDG_RUNTIME_DIR": runtime]
            _ = try s.startAgent(["--lock-after", "1h", "--locker", "true"], environment: env)
            let display = String(try #require(s.display).dropFirst())
            let socket = "\(runtime)/xidlelock/\(display).sock"
            try await s.waitUntil("the socket to appear") { FileManager.default.fileExists(atPath: socket) }
            let mode = try FileManager.default.attributesOfItem(atPath: "\(runtime)/xidlelock")[.posixPermissions] as? Int
            #expect(mode == 0o700)
            let status = try await s.run(agentBinary, ["status"], environment: env)
            #expect(status.exit == .exited(0) && status.stdout.contains("state: active"), "\(status.stderr)")
        }
    }

    @Test("another user is refused even when the socket's mode is opened up", .enabled(if: getuid() == 0))
    func anotherUserRefused() async throws {
        try await Sandbox.with { s in
            _ = try await s.startControlledAgent(["--lock-after", "1h", "--locker", "true"])
            chmod(s.directory.path, 0o777)
            chmod(s.socket, 0o777)
            // Our client checks whose the socket is before it sends anything.
            let result = try await s.run("setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups",
                                                     agentBinary, "disable", "--socket", s.socket])
            #expect(result.exit == .exited(69), "\(result.stderr)")
            #expect(result.stderr.contains("it is served by uid 0"), "\(result.stderr)")
            // A raw client that does not check is refused by the agent.
            let raw = """
                import socket, sys
                c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1])
                try: c.sendall(b'{"v":1,"cmd":"disable"}\\n')
                except OSError: pass  # refused and closed before the request went out
                print(c.makefile().readline().strip())
                """
            let rawResult = try await s.run("setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups",
                                                        "/usr/bin/python3", "-c", raw, s.socket])
            #expect(rawResult.stdout.contains("only the agent's own user"), "\(rawResult.stdout)\(rawResult.stderr)")
            #expect(try await s.status()["state"] as? String == "active", "the other user's disable took effect")
        }
    }

    @Test("garbage, a megabyte without a newline, a silent client and 100 clients at once do not stall the agent")
    func hostileClients() async throws {
        try await Sandbox.with { s in
            let agent = try await s.startControlledAgent(["--lock-after", "1h", "--locker", "true"])
            // Malformed requests get an error reply each, on a connection that stays usable.
            let garbage = try RawSocketClient(s.socket)
            garbage.send(Array("not json\n{\"v\":1,\"cmd\":\"unlock\"}\n{\"v\":9}\n{\"v\":1,\"cmd\":\"status\"}\n".utf8))
            let replies = garbage.readAll(timeout: .seconds(1)).split(separator: "\n")
            #expect(replies.count == 4, "\(replies)")
            #expect(replies.prefix(3).allSatisfy { $0.contains("\"ok\":false") })
            #expect(replies.last?.contains("\"state\":\"active\"") == true)
            // A megabyte with no newline: refused and closed, not buffered.
            let flood = try RawSocketClient(s.socket)
            flood.send([UInt8](repeating: UInt8(ascii: "x"), count: 1 << 20))
            #expect(flood.readAll(timeout: .seconds(5)).contains("request longer than"))
            // A client that never writes, and a hundred more, while status still answers at once.
            let silent = try RawSocketClient(s.socket)
            let crowd = try (0..<100).map { _ in try RawSocketClient(s.socket) }
            let started = ContinuousClock.now
            #expect(try await s.status()["state"] as? String == "active")
            #expect(ContinuousClock.now - started < .seconds(5))
            _ = (silent, crowd)
            #expect(isAlive(agent.pid))
        }
    }

    @Test("--secure refuses disable, inhibit, toggle, reset and quit; status and lock still work")
    func secureMode() async throws {
        try await Sandbox.with { s in
            _ = try await s.startControlledAgent(["--lock-after", "1h", "--locker", holdingLocker, "--secure"])
            for command in [["disable"], ["inhibit", "--for", "1m"], ["toggle"], ["reset"], ["quit"]] {
                let result = try await s.run(agentBinary, command + ["--socket", s.socket])
                #expect(result.exit == .exited(1), "\(command)")
                #expect(result.stderr.contains("--secure"), "\(command): \(result.stderr)")
            }
            #expect(try await s.status()["state"] as? String == "active")
            #expect(try await s.client("lock").exit == .exited(0))
            _ = try await s.waitForLines("lockers.pids")
            s.touch("unlock")
        }
    }
}
