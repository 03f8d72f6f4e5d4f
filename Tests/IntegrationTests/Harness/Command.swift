import Foundation

/// How a process ended.
enum Exit: Equatable, CustomStringConvertible {
    case exited(Int32)
    case killed(signal: Int32)

    init(_ process: Process) {
        self = process.terminationReason == .uncaughtSignal
            ? .killed(signal: process.terminationStatus) : .exited(process.terminationStatus)
    }

    var description: String {
        switch self {
        case .exited(let status): "exited with status \(status)"
        case .killed(let signal): "killed by signal \(signal)"
        }
    }
}

struct CommandResult {
    var exit: Exit
    var stdout: String
    var stderr: String
}

struct CommandFailed: Error, CustomStringConvertible {
    var command: [String]
    var result: CommandResult
    var description: String {
        "`\(command.joined(separator: " "))` \(result.exit): \(result.stderr)\(result.stdout)"
    }
}

/// The absolute path of a program found in PATH (Process needs one).
func programPath(_ name: String) -> String {
    if name.contains("/") { return name }
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
    for dir in path.split(separator: ":") where FileManager.default.isExecutableFile(atPath: "\(dir)/\(name)") {
        return "\(dir)/\(name)"
    }
    return name
}

/// Starts `program` in `directory` with stdout and stderr going to files (files, not pipes:
/// a pipe end inherited by another test's long-lived child would keep a reader waiting).
///
/// Through `env --default-signal`: Foundation's Process passes on the mask of the thread
/// that calls it, and the test runner's threads block most signals, so Xvfb would ignore
/// SIGTERM and the agent would start unlike it does in a session.
func startProcess(
    _ program: String, _ arguments: [String], environment: [String: String], in directory: URL,
    stdout: URL, stderr: URL
) throws -> Process {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["--default-signal", programPath(program)] + arguments
    process.environment = environment
    process.currentDirectoryURL = directory
    let out = try FileHandle.creatingFile(at: stdout)
    let err = stderr == stdout ? out : try FileHandle.creatingFile(at: stderr)
    defer {
        try? out.close()
        if err !== out { try? err.close() }
    }
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = out
    process.standardError = err
    try process.run()
    return process
}

extension FileHandle {
    static func creatingFile(at url: URL) throws -> FileHandle {
        _ = FileManager.default.createFile(atPath: url.path, contents: nil)
        return try FileHandle(forWritingTo: url)
    }
}

extension Process {
    /// Waits for the process to end; a process that outlives `timeout` fails the test.
    func waitForExit(_ what: String, timeout: Duration = generousTimeout) async throws -> Exit {
        try await waitUntil("\(what) to exit", timeout: timeout, every: .milliseconds(5)) { !isRunning }
        return Exit(self)
    }
}

/// Whether a process exists and is not a zombie (a child its parent has not reaped
/// still has a /proc entry).
func isAlive(_ pid: Int32) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")")
    else { return false }
    let state = stat[stat.index(after: close)...].split(separator: " ").first
    return state != "Z" && state != "X"
}
