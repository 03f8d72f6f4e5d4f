import Foundation

/// The tests' MPRIS player (Harness/mpris.py), found beside this file.
let mprisScript: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appending(path: "mpris.py").path

/// An MPRIS player (Harness/mpris.py) on a test's session bus: it owns
/// org.mpris.MediaPlayer2.NAME and says its PlaybackStatus, as VLC or mpv with its
/// MPRIS plugin do.
final class MprisPlayer {
    let process: Process
    let name: String
    /// Its unique name on the bus.
    private(set) var uniqueName = ""
    private let sandbox: Sandbox
    private let control: String
    private let output: String

    var pid: Int32 { process.processIdentifier }
    var busName: String { "org.mpris.MediaPlayer2.\(name)" }

    /// Starts it and returns once it owns its names (`also`: a second one).
    init(_ name: String, in sandbox: Sandbox, status: String = "Playing", identity: String = "Test Player",
         also: String? = nil) async throws {
        self.name = name
        self.sandbox = sandbox
        control = "mpris-\(name).control"
        output = "mpris-\(name).out"
        sandbox.touch(control)
        process = try sandbox.startBackground(systemPython, [mprisScript, name, sandbox.path(control), "--status", status,
                                                             "--identity", identity] + (also.map { ["--also", $0] } ?? []),
                                              output: output)
        let ready = try await waitFor("ready ")
        uniqueName = String(ready.split(separator: " ")[1])
    }

    /// `play`, `pause`, `stop`, `invalidate STATUS`, `release`: returns once the player
    /// has sent its PropertiesChanged (or let its names go).
    func send(_ command: String) async throws {
        let before = sandbox.lines(output).count
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: sandbox.path(control)))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("\(command)\n".utf8))
        try handle.close()
        let said = ["pause": "Paused", "play": "Playing", "stop": "Stopped", "release": "released"][command]
            ?? String(command.split(separator: " ").last ?? "")
        _ = try await waitFor(said, after: before)
    }

    /// Killed, as a crash would end it: its connection closes, its names go.
    func kill() async throws {
        Foundation.kill(pid, SIGKILL)
        _ = try await process.waitForExit("the killed player \(name)")
    }

    @discardableResult
    private func waitFor(_ prefix: String, after: Int = 0) async throws -> String {
        var found = ""
        try await sandbox.waitUntil("the MPRIS player \(name) to say '\(prefix)'") { [self] in
            if let line = sandbox.lines(output).dropFirst(after).first(where: { $0.hasPrefix(prefix) }) {
                found = line
                return true
            }
            if !process.isRunning {
                throw CommandFailed(command: ["mpris.py", name], result: CommandResult(exit: Exit(process), stdout: sandbox.contents(output), stderr: ""))
            }
            return false
        }
        return found
    }
}
