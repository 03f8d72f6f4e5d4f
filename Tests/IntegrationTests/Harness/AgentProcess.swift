import Foundation

/// The built `xidlelock` binary: `XIDLELOCK_BIN` if set, else `.build/debug/xidlelock`
/// under the package root (the test target depends on the executable, so `swift test`
/// builds it first).
let agentBinary: String = {
    if let path = ProcessInfo.processInfo.environment["XIDLELOCK_BIN"], !path.isEmpty { return path }
    var dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    while dir.path != "/", !FileManager.default.fileExists(atPath: dir.appending(path: "Package.swift").path) {
        dir.deleteLastPathComponent()
    }
    return dir.appending(path: ".build/debug/xidlelock").path
}()

/// The test locker (Tests/TestLocker), built beside the agent: it grabs the keyboard
/// as i3lock does and exits when a file appears, so tests can unlock without a password.
let testLockerBinary: String = URL(fileURLWithPath: agentBinary).deletingLastPathComponent().appending(path: "TestLocker").path

/// A running agent whose stdout and stderr (and so its hooks' output) go to a log file.
final class AgentProcess {
    let process: Process
    let logFile: URL

    /// With `shell`, the agent is started by `/bin/sh -c SHELL xidlelock ARGUMENTS…`: the
    /// script changes what the agent starts with (closed descriptors, an ignored signal, a
    /// limit) and ends with `exec "$0" "$@"`, so that the agent keeps the process's pid.
    init(_ arguments: [String], environment: [String: String], in directory: URL, logFile: URL,
         shell: String? = nil) throws {
        self.logFile = logFile
        if let shell {
            process = try startProcess("/bin/sh", ["-c", shell, agentBinary] + arguments, environment: environment,
                                       in: directory, stdout: logFile, stderr: logFile)
        } else {
            process = try startProcess(agentBinary, arguments, environment: environment, in: directory,
                                       stdout: logFile, stderr: logFile)
        }
    }

    var pid: Int32 { process.processIdentifier }

    var log: String { (try? String(contentsOf: logFile, encoding: .utf8)) ?? "" }

    /// The log less the lines whose number depends on the machine, not on what the agent
    /// was asked: where no journald takes the audit trail (a container, a CI image) each
    /// entry is also a line on stderr (`xidlelock: audit EVENT: …`), and the agent says
    /// what the journal does (`xidlelock: warning: the systemd journal …`). The audit
    /// trail's own tests read those with `auditLines(of:)` or `log`.
    var ownLog: String {
        log.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.hasPrefix("xidlelock: audit ") && !$0.hasPrefix("xidlelock: warning: the systemd journal ") }
            .joined(separator: "\n")
    }

    /// How many times `text` is in the agent's own lines (`ownLog`): the same with or
    /// without a journald.
    func count(of text: String) -> Int { ownLog.components(separatedBy: text).count - 1 }

    /// The audit trail's entries of `event` the agent wrote to stderr (where no journal takes them).
    func auditLines(of event: String) -> [Substring] {
        log.split(separator: "\n").filter { $0.hasPrefix("xidlelock: audit \(event): ") }
    }

    /// Waits for `count` occurrences of `text` in the agent's own lines (as `count(of:)`).
    func waitForLog(containing text: String, count: Int = 1, timeout: Duration = generousTimeout) async throws {
        try await waitForLog("\(count)× '\(text)' in the agent's log", timeout: timeout) { self.count(of: text) >= count }
    }

    /// Waits for an entry of `event` of the audit trail on stderr (where no journal takes it).
    func waitForAuditLine(of event: String, timeout: Duration = generousTimeout) async throws {
        try await waitForLog("the audit trail's '\(event)' entry on stderr", timeout: timeout) { !self.auditLines(of: event).isEmpty }
    }

    private func waitForLog(_ what: String, timeout: Duration, _ done: () -> Bool) async throws {
        try await waitUntil(what, timeout: timeout, context: { "agent log:\n\(log)" }) {
            if done() { return true }
            if !process.isRunning, !done() {
                throw AgentExited(waitingFor: what, exit: Exit(process), log: log)
            }
            return false
        }
    }

    /// The test sent it a signal: its exit is on purpose, not a failure of what a test waits for.
    private(set) var signalled = false

    func send(_ signal: Int32) {
        signalled = true
        kill(pid, signal)
    }

    func terminate() { send(SIGTERM) }

    func waitForExit(timeout: Duration = generousTimeout) async throws -> Exit {
        try await process.waitForExit("the agent", timeout: timeout)
    }
}
