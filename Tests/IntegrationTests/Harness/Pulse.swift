import Foundation

/// The tests' sound player (Harness/player.py), found beside this file.
let playerScript: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appending(path: "player.py").path

/// A private PulseAudio for one test: a null sink (it plays into nothing, in real
/// time) and the native protocol on a socket in the sandbox, anonymous. Its
/// runtime directory and home are the sandbox's, so that tests in parallel never
/// meet (PulseAudio keeps one daemon per runtime directory).
final class PulseServer {
    let socketPath: String
    private(set) var process: Process?
    private let sandbox: Sandbox
    private var starts = 0

    /// What a client needs to reach it: the cookie file too (libpulse writes one
    /// where told, not in the test user's home), and a client.conf that never
    /// starts a daemon (pactl would, while this one is not up yet).
    var environment: [String: String?] {
        ["PULSE_SERVER": "unix:\(socketPath)", "PULSE_COOKIE": sandbox.path("pulse.cookie"),
         "PULSE_CLIENTCONFIG": sandbox.path("pulse-client.conf")]
    }

    /// Describes the server; `start` starts it.
    init(in sandbox: Sandbox) throws {
        self.sandbox = sandbox
        socketPath = sandbox.path("pulse.sock")
        try "autospawn = no\n".write(toFile: sandbox.path("pulse-client.conf"), atomically: true, encoding: .utf8)
    }

    /// Starts the daemon and returns once it answers.
    func start() async throws {
        starts += 1
        let home = sandbox.path("pulse-home")
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        let script = sandbox.path("pulse.pa")
        try """
        load-module module-null-sink sink_name=speakers
        load-module module-native-protocol-unix socket=\(socketPath) auth-anonymous=1
        """.write(toFile: script, atomically: true, encoding: .utf8)
        // Under a shell that waits for it: PulseAudio closes every descriptor it
        // inherits, among them the one through which Foundation's Process learns of
        // a child's end; Foundation would then wait for the daemon, blocking, and see
        // no other child of the test end. It dies with the shell (the sandbox's
        // clean-up kills the shell; the daemon itself moves to / and would be missed).
        // As root too (--system=no: a per-user daemon).
        process = try sandbox.startBackground("/bin/sh", [
            "-c", "setpriv --pdeathsig KILL pulseaudio \"$@\" & echo $! > \(pidFile); wait $!", "sh",
            "-n", "--daemonize=no", "--exit-idle-time=-1", "--system=no", "--use-pid-file=no",
            "--realtime=no", "--high-priority=no", "--log-target=stderr", "-F", script,
        ], output: "pulse-\(starts).log", environment: ["HOME": home, "XDG_RUNTIME_DIR": home, "DISPLAY": nil])
        try await sandbox.waitUntil("PulseAudio to answer on \(socketPath)", every: .milliseconds(50)) { [self] in
            if let process, !process.isRunning {
                throw CommandFailed(command: ["pulseaudio"], result: CommandResult(exit: Exit(process), stdout: "", stderr: sandbox.contents("pulse-\(starts).log")))
            }
            guard FileManager.default.fileExists(atPath: socketPath) else { return false }
            return try await sandbox.run("pactl", ["info"], environment: environment).exit == .exited(0)
        }
    }

    /// Stops it, as a crash or a logout would (its clients lose their connection).
    func stop() async throws {
        guard let process, process.isRunning else { return }
        if let pid = Int32(sandbox.contents(pidFile).trimmingCharacters(in: .whitespacesAndNewlines)) { kill(pid, SIGKILL) }
        _ = try await process.waitForExit("pulseaudio")
    }

    /// The daemon's pid (a `*.pid` file: the sandbox's clean-up ends it).
    private var pidFile: String { "pulse-\(starts).pid" }

    /// Runs `pactl` against it; it must succeed.
    @discardableResult
    func pactl(_ arguments: String...) async throws -> String {
        let result = try await sandbox.run("pactl", arguments, environment: environment)
        guard result.exit == .exited(0) else { throw CommandFailed(command: ["pactl"] + arguments, result: result) }
        return result.stdout
    }
}

/// A player (Harness/player.py) with one stream on a test's PulseAudio.
final class Player {
    let name: String
    private let script: ToldScript
    /// Its sink input's index on the server.
    private(set) var index = ""

    var process: Process { script.process }
    var pid: Int32 { process.processIdentifier }

    /// Starts it and returns once its stream plays (or, `corked`, is there paused).
    /// `environment`: more of it (the logind session a test marks its processes with).
    init(_ name: String, on pulse: PulseServer, in sandbox: Sandbox, corked: Bool = false,
         environment: [String: String?] = [:]) async throws {
        self.name = name
        script = try ToldScript(playerScript, name, corked ? ["--corked"] : [], files: "player-\(name)", in: sandbox,
                                environment: pulse.environment.merging(environment) { $1 })
        let first = try await script.waitFor(corked ? "paused " : "playing ")
        index = String(first.split(separator: " ")[1])
    }

    /// Tells it to `pause`, `play` or `stop`, and waits until the server confirmed it.
    func send(_ command: String) async throws {
        try await script.tell(command, answer: ["pause": "paused", "play": "playing", "stop": "stopped"][command] ?? command)
    }
}
