import Foundation

/// The tests' MPRIS player (Harness/mpris.py), found beside this file.
let mprisScript: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appending(path: "mpris.py").path

/// An MPRIS player (Harness/mpris.py) on a test's session bus: it owns
/// org.mpris.MediaPlayer2.NAME and says its PlaybackStatus, as VLC or mpv with its
/// MPRIS plugin do.
final class MprisPlayer {
    let name: String
    /// Its unique name on the bus.
    private(set) var uniqueName = ""
    private let script: ToldScript

    var process: Process { script.process }
    var pid: Int32 { process.processIdentifier }
    var busName: String { "org.mpris.MediaPlayer2.\(name)" }

    /// Starts it and returns once it owns its names (`also`: a second one).
    /// `environment`: variables set (or unset, nil) besides the sandbox's (the session it plays in).
    init(_ name: String, in sandbox: Sandbox, status: String = "Playing", identity: String = "Test Player",
         also: String? = nil, environment: [String: String?] = [:]) async throws {
        self.name = name
        script = try ToldScript(mprisScript, name, ["--status", status, "--identity", identity] + (also.map { ["--also", $0] } ?? []),
                                files: "mpris-\(name)", in: sandbox, environment: environment)
        let ready = try await script.waitFor("ready ")
        uniqueName = String(ready.split(separator: " ")[1])
    }

    /// `play`, `pause`, `stop`, `invalidate STATUS`, `release`: returns once the player
    /// has sent its PropertiesChanged (or let its names go).
    func send(_ command: String) async throws {
        try await script.tell(command, answer: ["pause": "Paused", "play": "Playing", "stop": "Stopped", "release": "released"][command]
            ?? String(command.split(separator: " ").last ?? ""))
    }

    /// Killed, as a crash would end it: its connection closes, its names go.
    func kill() async throws {
        Foundation.kill(pid, SIGKILL)
        _ = try await process.waitForExit("the killed player \(name)")
    }
}
