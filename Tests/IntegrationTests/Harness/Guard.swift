import Foundation
import Glibc
import Synchronization
import Testing

/// The second local user whose session the guard tests guard: `nobody`, as DESIGN.md's
/// "Who can reach the agent" measured it.
let guardUserID: UInt32 = 65534
let guardUserName = "nobody"

/// A uid with no account, for a registration from another user than the session's.
let strangerUserID: UInt32 = 12345

/// The logind session of that user the guard tests add (an active x11 session of class
/// user on the test's display). The mock's `c1` stays the test runner's own, of Type
/// "test", which the guard leaves alone.
let guardSessionID = "g1"

/// The guard tests' agent-grace, and the most the guard may take beyond it to act
/// (the issue's "within agent-grace + 2 s").
let guardGrace: Duration = .seconds(2)
let guardActWindow: Duration = .seconds(2)

/// The built binary installed as a package installs it: a copy owned by root, mode
/// `mode` (0711: every user may run it, none may read it, so the kernel starts it
/// non-dumpable, `would_dump` in fs/exec.c), in a directory every user can traverse
/// (`/var/tmp/xidlelock-test-bin/PID-MODE/`, dirs 0755 root). One copy per mode for the
/// whole test run (the runner's pid names it); copies a finished run left are removed.
enum InstalledBinary {
    static let root = "/var/tmp/xidlelock-test-bin"
    private static let made = Mutex<[mode_t: String]>([:])

    static func copy(mode: mode_t) throws -> String {
        try made.withLock { made in
            if let path = made[mode] { return path }
            try makeDirectory(root)
            if made.isEmpty { removeStaleCopies() }
            let directory = root + "/\(getpid())-\(String(mode, radix: 8))"
            try makeDirectory(directory)
            // The guard's daemon beside it, as installed (`xidlelock guard` execs it).
            let daemon = agentBinary.dropLast("xidlelock".count) + "xidlelock-guard"
            for (from, name, mode) in [(String(daemon), "xidlelock-guard", mode_t(0o755)), (agentBinary, "xidlelock", mode)] {
                let path = directory + "/" + name
                let staging = path + ".new"
                try? FileManager.default.removeItem(atPath: staging)
                try FileManager.default.copyItem(atPath: from, toPath: staging)
                guard chown(staging, 0, 0) == 0, chmod(staging, mode) == 0, rename(staging, path) == 0 else {
                    throw POSIXError(.init(rawValue: errno) ?? .EIO)
                }
            }
            let path = directory + "/xidlelock"
            made[mode] = path
            return path
        }
    }

    private static func makeDirectory(_ path: String) throws {
        guard mkdir(path, 0o755) == 0 || errno == EEXIST else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == 0 else {
            throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: path])
        }
        chmod(path, 0o755)
    }

    /// The copies of runs that ended (their runner's pid is gone).
    private static func removeStaleCopies() {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [] {
            guard let pid = Int32(name.prefix { $0.isNumber }), pid != getpid(), kill(pid, 0) != 0, errno == ESRCH else { continue }
            try? FileManager.default.removeItem(atPath: root + "/" + name)
        }
    }

    /// The mode `make install` gives the binary: `install -m MODE $(RELEASE_BIN)` in the
    /// Makefile (nil when the rule cannot be found).
    static var makeInstallMode: mode_t? {
        var dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while dir.path != "/", !FileManager.default.fileExists(atPath: dir.appending(path: "Makefile").path) { dir.deleteLastPathComponent() }
        guard let text = try? String(contentsOfFile: dir.appending(path: "Makefile").path, encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.contains("$(RELEASE_BIN)") && line.contains("install ") {
            let words = line.split(separator: " ")
            if let m = words.firstIndex(of: "-m"), m + 1 < words.count, let mode = mode_t(words[m + 1], radix: 8) { return mode }
        }
        return nil
    }
}

/// Which executable a `GuardSession`'s guard and agents run.
enum GuardBinary: Equatable {
    /// `.build/debug/xidlelock` as built (root's, mode 0755, in the worktree).
    case built
    /// A root-owned copy of it with this mode (`InstalledBinary`).
    case installed(mode: mode_t)

    /// What GuardSession uses unless a test says otherwise.
    static let standard: GuardBinary = .installed(mode: 0o711)

    func path() throws -> String {
        switch self {
        case .built: agentBinary
        case .installed(let mode): try InstalledBinary.copy(mode: mode)
        }
    }
}

/// tmpfiles-like: where one local user's session keeps its things inside the sandbox.
struct UserDirectories {
    let uid: UInt32
    /// Owned by the user, mode 0755: files the user's processes write and the test reads.
    let base: String
    var home: String { base + "/home" }
    var runtime: String { base + "/runtime" }
    var config: String { base + "/config" }

    /// Creates them: `base` 0755, the others 0700, all owned by `uid`.
    init(_ base: String, uid: UInt32) throws {
        self.base = base
        self.uid = uid
        for (path, mode) in [(base, 0o755), (base + "/home", 0o700), (base + "/runtime", 0o700), (base + "/config", 0o700)] {
            guard mkdir(path, mode_t(mode)) == 0 || errno == EEXIST else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
            chmod(path, mode_t(mode))
            guard chown(path, uid, uid) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EPERM) }
        }
    }
}

/// `xidlelock guard` run as root for one test, with a logind session of a second local
/// user (`nobody`) on the test's Xvfb, the user's own session bus, and agents started as
/// that user in the session: what a clinic's workstation runs, inside the sandbox.
///
/// The policy (in `etc/policy`, XIDLELOCK_TEST_ETC) is `secure`, `max-lock-after 10m`
/// (no idle lock of the agent's own during a test), the test locker (which writes its pid
/// to `user/lockers.pids` once it holds the keyboard and exits 0 when `user/unlock`
/// appears, not sooner than 1.1 s after its start: no one types a password faster; both
/// paths the user can write), `agent-grace 2s`, the test's `on-agent-lost`, and
/// `metrics-directory` `metrics/` in the sandbox (made by a test that reads the metrics:
/// no guard under test writes into the machine's node_exporter directory). The guard's runtime directory is `run/` (XIDLELOCK_TEST_RUN).
///
/// The mock's GetSessionByPID finds a process's session by the `MOCK_LOGIND_SESSION`
/// variable of the process or an ancestor (bus.py guard-setup): every process of the
/// user's session here carries it, as a real session's processes sit in its cgroup.
final class GuardSession {
    let s: Sandbox
    let display: String
    let user: UserDirectories
    let onAgentLost: String
    /// The executable the guard and the agents run (see `GuardBinary`).
    let binary: String
    private(set) var guardProcess: Process?
    /// When the guard's socket appeared (the guard is up and listening).
    private(set) var guardReadyAt: ContinuousClock.Instant?
    private(set) var guardLogs: [String] = []
    private var servers: [XvfbServer] = []
    private var userBus: Process?

    var etc: String { s.path("etc") }
    /// The policy's `metrics-directory` (not made unless a test makes it).
    var metricsDirectory: String { s.path("metrics") }
    var runDirectory: String { s.path("run") }
    var guardSocket: String { runDirectory + "/guard.sock" }
    var lockersFile: String { user.base + "/lockers.pids" }
    var unlockFile: String { user.base + "/unlock" }
    var userBusSocket: String { user.runtime + "/bus" }
    var policyText: String

    /// The agent's default control socket for the session's display.
    var agentSocket: String { agentSocket(for: user, display: display) }

    func agentSocket(for dirs: UserDirectories, display: String) -> String {
        "\(dirs.runtime)/xidlelock/\(display.dropFirst()).sock"
    }

    /// Runs `body` with a sandbox holding the session (and, unless `startGuard` is false,
    /// a running guard), and cleans up whatever the guard and the user's processes left.
    /// `maxLockAfter`: the policy's `max-lock-after` (10m: no idle lock of the agent's own
    /// during a test). `binary`: what the guard and the agents run.
    /// `locker`: the policy's locker instead of the test locker (a real one: `i3lock -n`).
    static func with<R>(onAgentLost: String = "lock", startGuard: Bool = true, maxLockAfter: String = "10m",
                        binary: GuardBinary = .standard, locker: String? = nil,
                        _ body: (GuardSession) async throws -> R) async throws -> R {
        try await Sandbox.with(buses: true, systemBus: .debianSystem) { s in
            let g = try await GuardSession(s, onAgentLost: onAgentLost, maxLockAfter: maxLockAfter, binary: binary.path(),
                                           locker: locker)
            do {
                if startGuard { try await g.startGuard() }
                let result = try await body(g)
                await g.finish()
                return result
            } catch {
                await g.finish()
                throw error
            }
        }
    }

    private init(_ s: Sandbox, onAgentLost: String, maxLockAfter: String, binary: String, locker: String?) async throws {
        self.s = s
        self.onAgentLost = onAgentLost
        self.binary = binary
        guard let display = s.display else { throw CocoaError(.featureUnsupported) }
        self.display = display
        user = try UserDirectories(s.path("user"), uid: guardUserID)
        policyText = """
            secure
            max-lock-after \(maxLockAfter)
            locker \(locker ?? "\(testLockerBinary) --hold 1100 --pids \(s.path("user/lockers.pids")) --unlock \(s.path("user/unlock"))")
            agent-grace \(guardGrace.components.seconds)s
            on-agent-lost \(onAgentLost)
            metrics-directory \(s.path("metrics"))

            """
        try s.write(policyText, to: "etc/policy")
        try s.write("max-lock-after 15m\nsecure\n", to: "met.profile")
        guard mkdir(runDirectory, 0o755) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        chmod(runDirectory, 0o755)
        // The session, and GetSessionByPID on the manager.
        let path = try await s.bus("guard-setup", guardSessionID, String(guardUserID), guardUserName, display)
        guard path == "/org/freedesktop/login1/session/\(guardSessionID)" else {
            throw CommandFailed(command: ["bus.py", "guard-setup"], result: CommandResult(exit: .exited(0), stdout: path, stderr: ""))
        }
        try await startUserBus()
    }

    /// The session bus of the user's session (the sandbox's own answers only root).
    private func startUserBus() async throws {
        let (program, arguments) = asUser(guardUserID, "dbus-daemon",
                                          ["--session", "--nofork", "--address=unix:path=\(userBusSocket)"])
        userBus = try s.startBackground(program, arguments, output: "user-bus.log", environment: userEnvironment(user))
        try await wait("the user's session bus") { FileManager.default.fileExists(atPath: self.userBusSocket) }
    }

    // MARK: The guard

    /// The guard's environment: root's, the policy and runtime directories of the test,
    /// the test's system bus; no display and no session of its own.
    var guardEnvironment: [String: String?] {
        ["XIDLELOCK_TEST_ETC": etc, "XIDLELOCK_TEST_RUN": runDirectory, "DISPLAY": nil,
         "DBUS_SESSION_BUS_ADDRESS": nil, "XDG_SESSION_ID": nil, "XDG_RUNTIME_DIR": nil]
    }

    /// Starts `xidlelock guard --verbose` as root and waits until its socket exists.
    func startGuard() async throws {
        let log = guardLogs.isEmpty ? "guard.log" : "guard-\(guardLogs.count + 1).log"
        guardLogs.append(log)
        let process = try s.startBackground(binary, ["guard", "--verbose"], output: log, environment: guardEnvironment)
        guardProcess = process
        try await wait("the guard's socket \(guardSocket)") {
            if !process.isRunning {
                throw CommandFailed(command: [self.binary, "guard", "--verbose"],
                                    result: CommandResult(exit: Exit(process), stdout: "", stderr: self.guardLog))
            }
            return FileManager.default.fileExists(atPath: self.guardSocket)
        }
        guardReadyAt = ContinuousClock.now
    }

    /// Every guard log of the test, the latest last.
    var guardLog: String { guardLogs.map { s.contents($0) }.joined(separator: "\n--- guard restarted ---\n") }

    func guardLogCount(of text: String) -> Int { guardLog.components(separatedBy: text).count - 1 }

    // MARK: The user's processes

    /// `program arguments` run as `uid` (its group the same number, no other group), as
    /// AttackTests runs `nobody`.
    func asUser(_ uid: UInt32, _ program: String, _ arguments: [String]) -> (String, [String]) {
        ("setpriv", ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", programPath(program)] + arguments)
    }

    /// The environment of a process of the user's session: its display, its own
    /// runtime and config directories and home, the session marked for logind's mock,
    /// the policy and the guard's runtime directory of the test, both buses.
    func userEnvironment(_ dirs: UserDirectories, display: String? = nil, sessionBus: Bool = true) -> [String: String?] {
        let name = dirs.uid == guardUserID ? guardUserName : "u\(dirs.uid)"
        return ["DISPLAY": display ?? self.display, "HOME": dirs.home, "USER": name, "LOGNAME": name,
                "XDG_RUNTIME_DIR": dirs.runtime, "XDG_CONFIG_HOME": dirs.config,
                "MOCK_LOGIND_SESSION": guardSessionID, "XDG_SESSION_ID": guardSessionID,
                "XIDLELOCK_TEST_ETC": etc, "XIDLELOCK_TEST_RUN": runDirectory,
                "DBUS_SESSION_BUS_ADDRESS": sessionBus ? "unix:path=\(userBusSocket)" : nil]
    }

    /// Starts an agent of the session's user (`--verbose --lock-after 5m`, clamped by the
    /// policy anyway; `lockAfter` another), tracked by the sandbox as its agents are.
    /// `binary`: another executable than the session's (a copy); `uid`, `dirs`,
    /// `display`: another user, another display.
    /// `cgroup`: a cgroup v2 directory the agent starts in (root moves it there, as
    /// systemd puts a unit in its own).
    /// `environment`: variables the user set besides the session's (or unset, nil).
    func startAgent(binary: String? = nil, uid: UInt32 = guardUserID, dirs: UserDirectories? = nil,
                    display: String? = nil, sessionBus: Bool = true, cgroup: String? = nil, lockAfter: String = "5m",
                    environment: [String: String?] = [:]) throws -> AgentProcess {
        let dirs = dirs ?? user
        let exe = "'\(binary ?? self.binary)'"
        let move = cgroup.map { "echo $$ > '\($0)/cgroup.procs' && " } ?? ""
        return try s.startAgent(["--verbose", "--lock-after", lockAfter],
                                environment: userEnvironment(dirs, display: display, sessionBus: sessionBus && uid == guardUserID)
                                    .merging(environment) { $1 },
                                shell: move + "exec setpriv --reuid=\(uid) --regid=\(uid) --clear-groups \(exe) \"$@\"")
    }

    /// Starts an agent of the user and waits until root's `doctor --policy` says the
    /// session is guarded by a verified agent and met (exit 0).
    func startVerifiedAgent(cgroup: String? = nil, lockAfter: String = "5m") async throws -> AgentProcess {
        let agent = try startAgent(cgroup: cgroup, lockAfter: lockAfter)
        try await waitForVerified(agent)
        return agent
    }

    /// Waits until root's doctor exits 0 for the met profile (the guard verified the
    /// agent), failing at once if the agent exits.
    func waitForVerified(_ agent: AgentProcess) async throws {
        try await wait("the guard to verify agent \(agent.pid) (root's doctor --policy exit 0)", extra: { agent.log }) {
            if !agent.process.isRunning {
                throw AgentExited(waitingFor: "its verification", exit: Exit(agent.process), log: agent.log + "\nguard:\n" + self.guardLog)
            }
            return try await self.rootDoctor().exit == .exited(0)
        }
    }

    /// Runs a command as the session's user, with the session's environment.
    func runAsUser(_ program: String, _ arguments: [String], uid: UInt32 = guardUserID) async throws -> CommandResult {
        let (p, a) = asUser(uid, program, arguments)
        return try await s.run(p, a, environment: userEnvironment(user))
    }

    /// `xidlelock status --json` as the user, on the user's default socket; nil when no
    /// agent answers.
    func userStatus() async throws -> [String: Any]? {
        let result = try await runAsUser(agentBinary, ["status", "--json"])
        guard result.exit == .exited(0) else { return nil }
        return jsonObject(result.stdout)
    }

    // MARK: Root's evidence

    /// The profile root's doctor checks: what the policy gives.
    var metProfile: String { s.path("met.profile") }

    /// `xidlelock doctor --policy PROFILE [--json]` run by root, as a fleet check runs it.
    func rootDoctor(json: Bool = false) async throws -> CommandResult {
        try await s.run(agentBinary, ["doctor", "--policy", metProfile] + (json ? ["--json"] : []), environment: guardEnvironment)
    }

    // MARK: What the guard did

    /// The pids the test locker recorded (each once it held the keyboard).
    var lockerPids: [Int32] {
        ((try? String(contentsOfFile: lockersFile, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { Int32($0.trimmingCharacters(in: .whitespaces)) }
    }

    /// Every live test locker of this test, whoever started it (also one that never got
    /// the keyboard, so never wrote its pid): the TestLocker executable, its command line
    /// naming this test's file (not a shell around it).
    var runningLockers: [Int32] {
        let exe = URL(fileURLWithPath: testLockerBinary).resolvingSymlinksInPath().path
        return ProcInfo.allPids.filter { pid in
            isAlive(pid) && ProcInfo.commandLine(pid).contains(lockersFile)
                && (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")) == exe
        }
    }

    /// Waits for the first locker pid (the guard's, when no agent runs), `timeout` at most;
    /// returns it and how long after `since` it appeared.
    func waitForLocker(since: ContinuousClock.Instant, timeout: Duration = guardGrace + guardActWindow + .seconds(10))
        async throws -> (pid: Int32, after: Duration) {
        try await wait("a locker's pid in \(lockersFile)", timeout: timeout) { !self.lockerPids.isEmpty }
        return (lockerPids[0], ContinuousClock.now - since)
    }

    /// Waits for the guard's locker and checks it: it holds the keyboard within
    /// agent-grace + 2 s of `since` (plus `allowance`), not before agent-grace when
    /// `notBeforeGrace`, runs as the session's user and on the session's display.
    func expectGuardLocker(since: ContinuousClock.Instant, allowance: Duration = .zero,
                           notBeforeGrace: Bool = true, figure: String,
                           sourceLocation: SourceLocation = #_sourceLocation) async throws -> Int32 {
        let (pid, after) = try await waitForLocker(since: since)
        print("guard figure (\(figure)): the locker held the keyboard \(after.milliseconds) ms after, agent-grace \(guardGrace.milliseconds) ms")
        #expect(after <= guardGrace + guardActWindow + allowance,
                "the locker came \(after.milliseconds) ms after, above agent-grace + 2 s\n\(logs)", sourceLocation: sourceLocation)
        if notBeforeGrace {
            #expect(after >= guardGrace - .milliseconds(250),
                    "the locker came \(after.milliseconds) ms after, before agent-grace\n\(logs)", sourceLocation: sourceLocation)
        }
        let uids = ProcInfo.uids(pid)
        #expect(uids == [guardUserID, guardUserID, guardUserID, guardUserID],
                "the locker \(pid) runs with uids \(uids.map { "\($0)" } ?? "gone"), not the session user's", sourceLocation: sourceLocation)
        #expect(ProcInfo.environment(pid, "DISPLAY") == display,
                "the locker's DISPLAY is \(ProcInfo.environment(pid, "DISPLAY") ?? "unset"), not the session's \(display)",
                sourceLocation: sourceLocation)
        return pid
    }

    /// The TerminateSession calls logind's mock saw (session ids, oldest first).
    func terminated() async throws -> [String] {
        let text = try await s.bus("terminated")
        return (try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String]) ?? []
    }

    /// The wall-clock times (s since the epoch) at which logind's mock logged a
    /// TerminateSession of the session: its log stamps every call (`1795704370.020
    /// TerminateSession "g1"`), read without a round trip.
    var terminateTimes: [Double] {
        s.contents("logind-1.log").split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ", maxSplits: 2)
            guard parts.count == 3, parts[1] == "TerminateSession", parts[2].contains("\"\(guardSessionID)\"") else { return nil }
            return Double(parts[0])
        }
    }

    /// A second X server, for an agent on another display than the session's.
    func startOtherServer() async throws -> String {
        let dir = s.directory.appending(path: "second-x")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let server = try await XvfbServer(in: dir)
        servers.append(server)
        return server.display
    }

    /// Polls `condition`; the failure names the guard's log and the agents' logs.
    func wait(_ what: String, timeout: Duration = generousTimeout, every interval: Duration = .milliseconds(25),
              extra: @escaping () -> String = { "" }, _ condition: () async throws -> Bool) async throws {
        try await IntegrationTests.waitUntil(what, timeout: timeout, every: interval, context: {
            "guard log:\n\(self.guardLog)\n\(self.s.agentLogs())\n\(extra())"
        }, condition)
    }

    /// The guard's log and the agents', for a failure message.
    var logs: String { "guard log:\n\(guardLog)\n\(s.agentLogs())" }

    // MARK: Clean-up

    /// Ends the guard first (so that it starts no locker for what follows), then every
    /// process of the test's users: lockers (the guard's run elsewhere than the
    /// sandbox), agents, scripts, whose command line or environment names the sandbox;
    /// then the second X servers. The sandbox's own clean-up does the rest.
    func finish() async {
        if let guardProcess, guardProcess.isRunning {
            kill(guardProcess.processIdentifier, SIGKILL)
            _ = try? await guardProcess.waitForExit("the guard", timeout: .seconds(5))
        }
        let mine = s.directory.path
        for pid in ProcInfo.allPids where pid != getpid() {
            guard let uid = ProcInfo.realUID(pid), uid == guardUserID || uid == strangerUserID else { continue }
            if ProcInfo.commandLine(pid).contains(mine) || ProcInfo.environmentText(pid).contains(mine) {
                kill(pid, SIGKILL)
            }
        }
        for server in servers { await server.stop() }
    }
}

extension ProcInfo {
    /// The process's real uid (/proc/PID/status `Uid:`), or nil once it is gone.
    static func realUID(_ pid: Int32) -> UInt32? { uids(pid)?.first }

    /// Real, effective, saved and filesystem uids (/proc/PID/status `Uid:`).
    static func uids(_ pid: Int32) -> [UInt32]? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix("Uid:") })
        else { return nil }
        return line.dropFirst(4).split(whereSeparator: { $0 == " " || $0 == "\t" }).compactMap { UInt32($0) }
    }

    /// Its command line, the arguments joined by spaces ("" once it is gone).
    static func commandLine(_ pid: Int32) -> String {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return "" }
        return data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }.joined(separator: " ")
    }

    /// Its whole environment as text ("" once it is gone).
    static func environmentText(_ pid: Int32) -> String {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/environ") else { return "" }
        return String(decoding: data.map { $0 == 0 ? 0x0A : $0 }, as: UTF8.self)
    }

    /// How long ago it started (/proc/PID/stat's start time against /proc/uptime, in
    /// clock ticks of 10 ms), or nil once it is gone.
    static func age(_ pid: Int32) -> Duration? {
        guard let start = startTime(pid).flatMap(Double.init),
              let uptime = (try? String(contentsOfFile: "/proc/uptime", encoding: .utf8))?.split(separator: " ").first.flatMap({ Double($0) })
        else { return nil }
        return .milliseconds(Int((uptime - start / 100) * 1000))
    }

    /// Its state letter (/proc/PID/stat): R, S, T (stopped), t (stopped by a tracer), Z…
    static func state(_ pid: Int32) -> String? { statFields(pid)?.first }
}
