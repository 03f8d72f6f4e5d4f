import Foundation

/// Debian's python3, which has the `dbus` module (and python3-dbusmock).
let systemPython = "/usr/bin/python3"

/// The tests' D-Bus helper (Harness/bus.py), found beside this file.
let busScript: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appending(path: "bus.py").path

/// The logind session the tests' mock holds for this user.
let testSessionID = "c1"

/// One private `dbus-daemon`, listening on a socket in the sandbox. Its address comes
/// from `--print-address=1` into a file (files, not pipes: see startProcess).
final class DBusDaemon {
    /// Which rules the daemon enforces.
    enum Policy {
        /// The session configuration: only the daemon's own user may connect; everything
        /// is allowed between its clients.
        case session
        /// Debian's system bus configuration (/usr/share/dbus-1/system.conf and the
        /// services' system.d files), run as root: every local user may connect and send
        /// signals, also to one connection's unique name; only root may own
        /// org.freedesktop.login1. See `debianSystemConfig`.
        case debianSystem
    }

    let name: String
    let socketPath: String
    let policy: Policy
    private(set) var process: Process
    /// What the daemon printed (with its guid).
    private(set) var printedAddress = ""
    private let directory: URL

    /// The address clients are given: the socket alone, as systemd's user bus
    /// (unix:path=/run/user/UID/bus), so that a restarted daemon (a new guid) is the same bus.
    var address: String { "unix:path=\(socketPath)" }

    init(_ name: String, in directory: URL, policy: Policy = .session) async throws {
        self.name = name
        self.directory = directory
        self.policy = policy
        socketPath = directory.appending(path: "\(name).bus").path
        process = try DBusDaemon.launch(name, socketPath, policy, in: directory)
        printedAddress = try await readAddress()
    }

    private static func launch(_ name: String, _ socketPath: String, _ policy: Policy, in directory: URL) throws -> Process {
        let arguments: [String]
        switch policy {
        case .session:
            // The session configuration: a "system" bus of this kind only stands in for the
            // system bus (everything runs as the test's user).
            arguments = ["--session", "--address=unix:path=\(socketPath)"]
        case .debianSystem:
            let config = directory.appending(path: "\(name)-bus.conf")
            try debianSystemConfig(listen: socketPath).write(to: config, atomically: true, encoding: .utf8)
            arguments = ["--config-file=\(config.path)"]
        }
        return try startProcess("dbus-daemon", arguments + ["--nofork", "--print-address=1"],
                                environment: ProcessInfo.processInfo.environment, in: directory,
                                stdout: directory.appending(path: "\(name)-bus.address"),
                                stderr: directory.appending(path: "\(name)-bus.log"))
    }

    /// Debian's /usr/share/dbus-1/system.conf for a private daemon: it listens on
    /// `listen` (the daemon makes the socket mode 0777, as /run/dbus/system_bus_socket),
    /// stays the user who starts it (no <user>), in the foreground (no <fork/>), without
    /// a pid file or syslog, and starts no system service (no service directories, no
    /// setuid launch helper: a call to a name nobody owns fails, nothing real is
    /// activated). The <policy> blocks are Debian's, untouched, and so are the services'
    /// rules (the system.d directories, now named by absolute path: a relative one is
    /// relative to the configuration file).
    static func debianSystemConfig(listen: String) throws -> String {
        var text = try String(contentsOfFile: "/usr/share/dbus-1/system.conf", encoding: .utf8)
        func drop(_ pattern: String) {
            while let range = text.range(of: pattern, options: .regularExpression) { text.removeSubrange(range) }
        }
        drop("<user>[^<]*</user>")
        drop("<fork/>")
        drop("<pidfile>[^<]*</pidfile>")
        drop("<syslog/>")
        drop("<standard_system_servicedirs/>")
        drop("<servicehelper>[^<]*</servicehelper>")
        func replace(_ pattern: String, with replacement: String) throws {
            guard let range = text.range(of: pattern, options: .regularExpression) else {
                throw CocoaError(.fileReadCorruptFile, userInfo: ["reason": "/usr/share/dbus-1/system.conf has no \(pattern)"])
            }
            text.replaceSubrange(range, with: replacement)
        }
        try replace("<listen>[^<]*</listen>", with: "<listen>unix:path=\(listen)</listen>")
        try replace("<includedir>system.d</includedir>", with: "<includedir>/usr/share/dbus-1/system.d</includedir>")
        return text
    }

    private func readAddress() async throws -> String {
        let file = directory.appending(path: "\(name)-bus.address")
        let log = directory.appending(path: "\(name)-bus.log")
        var line = ""
        try await waitUntil("dbus-daemon (\(name)) to print its address", context: {
            (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        }) { [process] in
            let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
            if let end = text.firstIndex(of: "\n") {
                line = String(text[..<end])
                return true
            }
            if !process.isRunning {
                throw CommandFailed(command: ["dbus-daemon", name], result: CommandResult(
                    exit: Exit(process), stdout: text, stderr: (try? String(contentsOf: log, encoding: .utf8)) ?? ""))
            }
            return false
        }
        return line
    }

    /// Kills the daemon outright, as a crash would: every client loses its connection.
    func crash() async throws {
        kill(process.processIdentifier, SIGKILL)
        _ = try await process.waitForExit("the killed dbus-daemon (\(name))")
    }

    /// A new daemon on the same socket (the address a client reconnects to).
    func restart() async throws {
        await stop()
        try? FileManager.default.removeItem(atPath: socketPath)
        process = try DBusDaemon.launch(name, socketPath, policy, in: directory)
        printedAddress = try await readAddress()
    }

    func stop() async { await stopProcess(process, "dbus-daemon (\(name))") }
}

/// Ends a process (SIGTERM, then SIGKILL if it lingers) and waits for it.
func stopProcess(_ process: Process, _ what: String) async {
    guard process.isRunning else { return }
    process.terminate()
    if (try? await process.waitForExit(what, timeout: .seconds(5))) == nil {
        kill(process.processIdentifier, SIGKILL)
        _ = try? await process.waitForExit("\(what) after SIGKILL", timeout: .seconds(5))
    }
}

/// The desktop's two buses for one test: a session bus, and a second daemon standing in
/// for the system bus with python3-dbusmock's logind template on it, holding a session
/// (`c1`) of this user. The agent finds them through DBUS_SESSION_BUS_ADDRESS,
/// DBUS_SYSTEM_BUS_ADDRESS and XDG_SESSION_ID.
///
/// With `systemPolicy: .debianSystem` the system bus enforces Debian's real rules (see
/// `DBusDaemon.debianSystemConfig`), so that a second local user (`nobody`) reaches it
/// as it would reach the machine's: the test must run as root, as logind does (only
/// root may own org.freedesktop.login1, by systemd's own rule in system.d).
final class Buses {
    let session: DBusDaemon
    let system: DBusDaemon
    private(set) var logind: Process?
    private(set) var upower: Process?
    private let directory: URL
    private var logindStarts = 0

    init(in directory: URL, systemPolicy: DBusDaemon.Policy = .session) async throws {
        self.directory = directory
        session = try await DBusDaemon("session", in: directory)
        system = try await DBusDaemon("system", in: directory, policy: systemPolicy)
        do {
            try await startLogind()
        } catch {
            await stop()
            throw error
        }
    }

    /// What the agent and every other process of the test are given.
    var environment: [String: String] {
        ["DBUS_SESSION_BUS_ADDRESS": session.address, "DBUS_SYSTEM_BUS_ADDRESS": system.address,
         "XDG_SESSION_ID": testSessionID]
    }

    /// Starts the logind mock, waits until org.freedesktop.login1 answers and adds the session.
    func startLogind() async throws {
        logindStarts += 1
        var env = ProcessInfo.processInfo.environment
        env.merge(environment) { $1 }
        let log = directory.appending(path: "logind-\(logindStarts).log")
        let mock = try startProcess(systemPython, ["-m", "dbusmock", "--system", "--template", "logind"],
                                    environment: env, in: directory, stdout: log, stderr: log)
        logind = mock
        // bus.py polls for the name with a deadline, then adds the session.
        let out = directory.appending(path: "logind-setup-\(logindStarts).out")
        let setup = try startProcess(systemPython, [busScript, "setup", testSessionID, String(getuid()), userName()],
                                     environment: env, in: directory, stdout: out, stderr: out)
        let exit = try await setup.waitForExit("logind's mock to answer", timeout: .seconds(30))
        guard exit == .exited(0) else {
            throw CommandFailed(command: ["bus.py", "setup"], result: CommandResult(
                exit: exit, stdout: (try? String(contentsOf: out, encoding: .utf8)) ?? "",
                stderr: "\nmock log:\n" + ((try? String(contentsOf: log, encoding: .utf8)) ?? "")))
        }
    }

    /// UPower's mock (python3-dbusmock's upower template) on the system bus, on AC.
    func startUPower() async throws {
        var env = ProcessInfo.processInfo.environment
        env.merge(environment) { $1 }
        let log = directory.appending(path: "upower.log")
        upower = try startProcess(systemPython, ["-m", "dbusmock", "--system", "--template", "upower"],
                                  environment: env, in: directory, stdout: log, stderr: log)
        let setup = try startProcess(systemPython, [busScript, "upower-setup"], environment: env, in: directory,
                                     stdout: log, stderr: log)
        guard try await setup.waitForExit("UPower's mock to answer", timeout: .seconds(30)) == .exited(0) else {
            throw CommandFailed(command: ["bus.py", "upower-setup"], result: CommandResult(
                exit: .exited(1), stdout: "", stderr: (try? String(contentsOf: log, encoding: .utf8)) ?? ""))
        }
    }

    /// UPower goes away (the agent falls back to the times on AC).
    func stopUPower() async {
        if let upower { await stopProcess(upower, "UPower's mock") }
        upower = nil
    }

    /// The system bus and logind again, after a crash of the system bus.
    func restartSystem() async throws {
        if let logind { await stopProcess(logind, "logind's mock") }
        try await system.restart()
        try await startLogind()
    }

    /// Ends the mock and both daemons; nothing of them is left running.
    func stop() async {
        if let upower { await stopProcess(upower, "UPower's mock") }
        if let logind { await stopProcess(logind, "logind's mock") }
        await session.stop()
        await system.stop()
    }

    private func userName() -> String {
        guard let entry = getpwuid(getuid()), let name = entry.pointee.pw_name else { return "user" }
        return String(cString: name)
    }
}

extension Sandbox {
    /// Runs bus.py with this test's buses; it must succeed. Returns its output, trimmed.
    @discardableResult
    func bus(_ arguments: String..., timeout: Duration = generousTimeout) async throws -> String {
        try await bus(arguments, timeout: timeout)
    }

    @discardableResult
    func bus(_ arguments: [String], timeout: Duration = generousTimeout) async throws -> String {
        let result = try await run(systemPython, [busScript] + arguments, timeout: timeout)
        guard result.exit == .exited(0) else { throw CommandFailed(command: ["bus.py"] + arguments, result: result) }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Runs bus.py and returns how it ended (for calls that are meant to fail).
    func busResult(_ arguments: String...) async throws -> CommandResult {
        try await run(systemPython, [busScript] + arguments)
    }

    /// Starts bus.py in the background (a process that holds something on a bus); its
    /// output goes to `output` in the sandbox. Ended at clean-up if still running.
    func startBusHelper(_ arguments: [String], output: String) throws -> Process {
        try startBackground(systemPython, [busScript] + arguments, output: output)
    }

    /// The sleep delay inhibitors logind's mock holds now.
    func sleepInhibitors() async throws -> [String] {
        try await bus("inhibitors").split(separator: "\n").map(String.init).filter { $0.hasPrefix("[\"sleep") }
    }
}
