import Foundation
import Testing

/// Everything one test needs: a temporary directory (the working directory of the agent
/// and of its commands, so scripts write relative file names), its own Xvfb, its own
/// D-Bus session and system buses when asked for, the agents it started, and a clean-up
/// that leaves no process behind.
final class Sandbox {
    let directory: URL
    private(set) var server: XvfbServer?
    private(set) var buses: Buses?
    private var serverArguments: [String] = []
    private var agents: [AgentProcess] = []
    private var background: [(process: Process, what: String)] = []
    private var commands = 0

    /// Runs `body` with a fresh sandbox (with an X server started with `serverArguments`,
    /// unless `display` is false; with `buses`, a private session bus and a system bus
    /// served by logind's mock) and cleans up afterwards, whether the body passed or threw.
    /// `systemBus: .debianSystem` (with `buses`) runs the system bus with Debian's own
    /// rules (see `Buses`), and opens the sandbox to other users (mode 0755), so that a
    /// process of another local user can reach its socket and the files it is given.
    static func with<R>(display: Bool = true, serverArguments: [String] = [], buses: Bool = false,
                        systemBus: DBusDaemon.Policy = .session,
                        _ body: (Sandbox) async throws -> R) async throws -> R {
        let sandbox = try Sandbox()
        do {
            sandbox.serverArguments = serverArguments
            if display { sandbox.server = try await XvfbServer(in: sandbox.directory, extraArguments: serverArguments) }
            if systemBus == .debianSystem { chmod(sandbox.directory.path, 0o755) }
            if buses { sandbox.buses = try await Buses(in: sandbox.directory, systemPolicy: systemBus) }
            let result = try await body(sandbox)
            await sandbox.tearDown()
            return result
        } catch {
            await sandbox.tearDown()
            throw error
        }
    }

    /// Stops this test's X server and starts a new one on the same display number, as
    /// after a logout and a new login: clients of the old server lose their connection.
    /// The display number should be one no other test's server takes in between (start
    /// the first server on a high number of its own with `serverArguments: [":N"]`).
    func restartServer() async throws {
        guard let old = server else { return }
        await old.stop()
        server = nil
        server = try await XvfbServer(in: directory, extraArguments: serverArguments.filter { !$0.hasPrefix(":") } + [old.display])
    }

    private init() throws {
        let name = (Test.current?.name ?? "test").filter { $0.isLetter || $0.isNumber }.prefix(40)
        // Resolved, so that it compares equal to what /proc/<pid>/cwd shows.
        let base = URL(fileURLWithPath: NSTemporaryDirectory()).resolvingSymlinksInPath()
        directory = base.appending(path: "xidlelock-it-\(name)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    var display: String? { server?.display }

    /// The test's environment for every process it starts: DISPLAY is this test's server
    /// (or unset), JOURNAL_STREAM is dropped so the agent logs its plain format, and so
    /// are the variables the agent gives its hooks; config files and the policy are read
    /// from `config/xidlelock/config` and `etc/` in the sandbox. With buses, the bus addresses and the
    /// session are this test's.
    var environment: [String: String] {
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("XIDLELOCK_") || $0.key == "XIDLELOCK_BIN" }
        env["DISPLAY"] = display
        env["JOURNAL_STREAM"] = nil
        // Config files and the policy are the test's own: nothing of this machine's
        // ~/.config or /etc reaches an agent under test.
        env["XDG_CONFIG_HOME"] = path("config")
        env["XIDLELOCK_TEST_ETC"] = path("etc")
        if let buses { env.merge(buses.environment) { $1 } }
        return env
    }

    // MARK: Processes

    /// Starts the agent with `arguments`; `changes` sets (or with nil removes) variables;
    /// `shell` starts it through a shell script (see `AgentProcess`).
    func startAgent(_ arguments: [String], environment changes: [String: String?] = [:],
                    shell: String? = nil) throws -> AgentProcess {
        var env = environment
        for (name, value) in changes { env[name] = value }
        let log = directory.appending(path: agents.isEmpty ? "agent.log" : "agent-\(agents.count + 1).log")
        let agent = try AgentProcess(arguments, environment: env, in: directory, logFile: log, shell: shell)
        agents.append(agent)
        return agent
    }

    /// Runs a command to its end and returns its exit and output.
    func run(_ program: String, _ arguments: [String], environment changes: [String: String?] = [:],
             timeout: Duration = generousTimeout) async throws -> CommandResult {
        var env = environment
        for (name, value) in changes { env[name] = value }
        commands += 1
        let out = directory.appending(path: "command-\(commands).out")
        let err = directory.appending(path: "command-\(commands).err")
        let process = try startProcess(program, arguments, environment: env, in: directory, stdout: out, stderr: err)
        let exit = try await process.waitForExit(([program] + arguments).joined(separator: " "), timeout: timeout)
        return CommandResult(exit: exit,
                             stdout: (try? String(contentsOf: out, encoding: .utf8)) ?? "",
                             stderr: (try? String(contentsOf: err, encoding: .utf8)) ?? "")
    }

    /// Starts a command that runs on in the background (a client that holds something),
    /// its stdout and stderr into `output` in the sandbox; ended at clean-up.
    func startBackground(_ program: String, _ arguments: [String], output: String,
                         environment changes: [String: String?] = [:]) throws -> Process {
        var env = environment
        for (name, value) in changes { env[name] = value }
        let file = directory.appending(path: output)
        let process = try startProcess(program, arguments, environment: env, in: directory, stdout: file, stderr: file)
        background.append((process, ([program] + arguments).joined(separator: " ")))
        return process
    }

    /// Runs an X tool (xdotool, xset, xprintidle) against this test's display; it must
    /// succeed. Returns its output, trimmed.
    @discardableResult
    func x(_ tool: String, _ arguments: String...) async throws -> String {
        try await x(tool, arguments)
    }

    @discardableResult
    func x(_ tool: String, _ arguments: [String]) async throws -> String {
        let result = try await run(tool, arguments)
        guard result.exit == .exited(0) else { throw CommandFailed(command: [tool] + arguments, result: result) }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The X server's idle counter in ms, as xprintidle prints it.
    func serverIdle() async throws -> Int {
        let text = try await x("xprintidle")
        guard let ms = Int(text) else { throw CommandFailed(command: ["xprintidle"], result: CommandResult(exit: .exited(0), stdout: text, stderr: "not a number")) }
        return ms
    }

    // MARK: Files the scripts write

    func path(_ name: String) -> String { directory.appending(path: name).path }

    func exists(_ name: String) -> Bool { FileManager.default.fileExists(atPath: path(name)) }

    func contents(_ name: String) -> String { (try? String(contentsOfFile: path(name), encoding: .utf8)) ?? "" }

    /// The complete lines of a file (a line still being written is left out).
    func lines(_ name: String) -> [String] {
        let text = contents(name)
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        lines.removeLast()  // after the last newline: empty, or a line not finished yet
        return lines
    }

    func touch(_ name: String) { _ = FileManager.default.createFile(atPath: path(name), contents: nil) }

    /// Waits until `name` holds at least `count` complete lines and returns them.
    func waitForLines(_ name: String, count: Int = 1, timeout: Duration = generousTimeout) async throws -> [String] {
        try await waitUntil("\(count) line(s) in \(name)", timeout: timeout) {
            self.lines(name).count >= count
        }
        return lines(name)
    }

    /// Waits for a file whose first line is a number (a pid, an idle time) and returns it.
    func waitForNumber(in name: String, timeout: Duration = generousTimeout) async throws -> Int {
        let line = try await waitForLines(name, timeout: timeout)[0]
        guard let n = Int(line.trimmingCharacters(in: .whitespaces)) else {
            throw WaitTimedOut(what: "a number in \(name), found '\(line)'", timeout: .zero, context: agentLogs())
        }
        return n
    }

    /// A wait whose failure message carries the agents' logs, and which fails at once if
    /// an agent has exited before the condition held (nothing more is coming), unless the
    /// test itself sent it a signal.
    func waitUntil(_ what: String, timeout: Duration = generousTimeout, every interval: Duration = .milliseconds(25),
                   _ condition: () async throws -> Bool) async throws {
        try await IntegrationTests.waitUntil(what, timeout: timeout, every: interval, context: agentLogs) {
            if try await condition() { return true }
            if let agent = agents.first(where: { !$0.process.isRunning && !$0.signalled }) {
                throw AgentExited(waitingFor: what, exit: Exit(agent.process), log: agentLogs())
            }
            return false
        }
    }

    func agentLogs() -> String {
        agents.map { "\($0.logFile.lastPathComponent):\n\($0.log)" }.joined(separator: "\n")
    }

    // MARK: Clean-up

    /// Stops the agents, kills every process whose pid a script recorded in a `*.pid` or
    /// `*.pids` file (its whole session: hooks run in their own), ends the background
    /// commands, the buses and every other process whose working directory is the
    /// sandbox, stops the X server and removes the directory (kept when
    /// XIDLELOCK_KEEP_TEMP is set).
    func tearDown() async {
        for agent in agents where agent.process.isRunning {
            agent.send(SIGKILL)
            _ = try? await agent.waitForExit(timeout: .seconds(5))
        }
        for pid in recordedPids() where ownsProcess(pid) {
            kill(-pid, SIGKILL)
            kill(pid, SIGKILL)
        }
        for (process, what) in background where process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            _ = try? await process.waitForExit(what, timeout: .seconds(5))
        }
        await buses?.stop()
        // And whatever else still works here, recorded or not: a locker that forked and
        // left (i3lock without -n), a locker of a killed agent.
        let serverPid = server?.process.processIdentifier
        for pid in ProcInfo.allPids where pid != serverPid && isAlive(pid) && ownsProcess(pid) {
            kill(pid, SIGKILL)
        }
        await server?.stop()
        if ProcessInfo.processInfo.environment["XIDLELOCK_KEEP_TEMP"] == nil {
            try? FileManager.default.removeItem(at: directory)
        } else {
            print("kept \(directory.path)")
        }
    }

    private func recordedPids() -> [Int32] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { $0.hasSuffix(".pid") || $0.hasSuffix(".pids") }
            .flatMap { lines($0) }
            .compactMap { Int32($0.trimmingCharacters(in: .whitespaces)) }
    }

    /// Whether `pid` is still one of this test's processes (its working directory is the
    /// sandbox), so that a recycled pid is never killed.
    private func ownsProcess(_ pid: Int32) -> Bool {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/cwd")) == directory.path
    }
}

struct AgentExited: Error, CustomStringConvertible {
    var waitingFor: String
    var exit: Exit
    var log: String
    var description: String { "the agent \(exit) while the test waited for \(waitingFor)\n\(log)" }
}
