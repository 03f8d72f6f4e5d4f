import Foundation

/// A helper script of the tests (player.py, mpris.py) run in the background with
/// Debian's python3 as `SCRIPT NAME CONTROL ARGUMENTS…`: told what to do by lines
/// appended to the file CONTROL, it answers with lines of its output.
struct ToldScript {
    let process: Process
    private let name: String
    private let sandbox: Sandbox
    private let control: String
    private let output: String

    init(_ script: String, _ name: String, _ arguments: [String], files: String, in sandbox: Sandbox,
         environment: [String: String?] = [:]) throws {
        self.name = name
        self.sandbox = sandbox
        control = "\(files).control"
        output = "\(files).out"
        sandbox.touch(control)
        process = try sandbox.startBackground(systemPython, [script, name, sandbox.path(control)] + arguments,
                                              output: output, environment: environment)
    }

    /// Appends `command` to its control file and waits for its answer, a line that
    /// starts with `answer`.
    func tell(_ command: String, answer: String) async throws {
        let before = sandbox.lines(output).count
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: sandbox.path(control)))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("\(command)\n".utf8))
        try handle.close()
        _ = try await waitFor(answer, after: before)
    }

    /// Waits for an output line that starts with `prefix`, among those after the first `after`.
    @discardableResult
    func waitFor(_ prefix: String, after: Int = 0) async throws -> String {
        var found = ""
        try await sandbox.waitUntil("\(name) to say '\(prefix)'") { [self] in
            if let line = sandbox.lines(output).dropFirst(after).first(where: { $0.hasPrefix(prefix) }) {
                found = line
                return true
            }
            if !process.isRunning {
                throw CommandFailed(command: [name], result: CommandResult(exit: Exit(process), stdout: sandbox.contents(output), stderr: ""))
            }
            return false
        }
        return found
    }
}
