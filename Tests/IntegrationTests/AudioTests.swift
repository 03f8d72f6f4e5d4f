import Foundation
import Testing

/// `--not-when-audio` with a real PulseAudio per test (a null sink, on a socket in the
/// sandbox) and a real libpulse player (Harness/player.py); mixers' changes through
/// pactl, as pavucontrol makes them.
@Suite struct AudioTests {
    @Test("a playing stream holds the lock off and status names its application; when it stops the lock, due long since, comes at once")
    func playingHolds() async throws {
        try await Sandbox.with { s in
            let pulse = try PulseServer(in: s)
            try await pulse.start()
            try await s.x("xdotool", "key", "shift")
            let agent = try s.startAgent(["--lock-after", "3s", "--locker", "echo $$ >> lockers.pids; exec sleep 60",
                                          "--not-when-audio", "--socket", s.socket], environment: pulse.environment)
            try await agent.waitForLog(containing: "following the sound server")
            let player = try await Player("TestPlayer", on: pulse, in: s)
            try await agent.waitForLog(containing: "inhibited by TestPlayer (pid \(player.pid)) while it plays: playing audio")
            guard !s.exists("lockers.pids") else {
                throw WaitTimedOut(what: "the hold before the lock time (the machine is too loaded)", timeout: .zero, context: agent.log)
            }
            try await s.waitUntil("the server idle to pass 5 s", every: .milliseconds(200)) { try await s.serverIdle() >= 5000 }
            #expect(!s.exists("lockers.pids"), "locked while a stream played\n\(agent.log)")
            let audio = try await s.inhibitors().filter { $0["source"] as? String == "audio" }
            #expect(audio.map { $0["who"] as? String } == ["TestPlayer (pid \(player.pid))"], "\(audio)")
            #expect(audio.map { $0["why"] as? String } == ["playing audio"], "\(audio)")
            let plain = try await s.client("status")
            #expect(plain.stdout.contains("inhibited by TestPlayer (pid \(player.pid)) [audio]"), "\(plain.stdout)")
            try await player.send("stop")
            let stopped = ContinuousClock.now
            _ = try await s.waitForLines("lockers.pids")
            let after = (ContinuousClock.now - stopped).milliseconds
            #expect(after <= latestLock, "lock \(after) ms after the stream stopped\n\(agent.log)")
            #expect(agent.log.contains("inhibitor of TestPlayer (pid \(player.pid)) ended"), "\(agent.log)")
        }
    }

    @Test("a paused stream, a muted one, one at volume 0 and one on a muted output hold nothing")
    func silentStreams() async throws {
        try await Sandbox.with { s in
            let pulse = try PulseServer(in: s)
            try await pulse.start()
            let agent = try s.startAgent(["--lock-after", "1h", "--locker", "true", "--not-when-audio", "--verbose",
                                          "--socket", s.socket], environment: pulse.environment)
            try await agent.waitForLog(containing: "following the sound server")
            // Started paused: seen, and no hold (status answers after the agent acted on it).
            let player = try await Player("TestPlayer", on: pulse, in: s, corked: true)
            let who = "TestPlayer (pid \(player.pid))"
            try await agent.waitForLog(containing: "sound server: 1 stream: \(who) paused")
            #expect(try await s.inhibitors().isEmpty, "a paused stream held\n\(agent.log)")
            var holds = 0
            /// Plays, then `silence` must end the hold (and the agent see why), and `undo` bring it back.
            func silenced(by silence: () async throws -> Void, as seen: String, undo: () async throws -> Void) async throws {
                try await agent.waitForLog(containing: "inhibited by \(who)", count: holds + 1)
                holds += 1
                try await silence()
                try await agent.waitForLog(containing: "inhibitor of \(who) ended", count: holds)
                #expect(agent.log.contains("sound server: 1 stream: \(who) \(seen)"), "\(agent.log)")
                #expect(try await s.inhibitors().isEmpty, "\(seen): still held\n\(agent.log)")
                try await undo()
            }
            try await player.send("play")
            try await silenced(by: { try await player.send("pause") }, as: "paused", undo: { try await player.send("play") })
            try await silenced(by: { try await pulse.pactl("set-sink-input-mute", player.index, "1") }, as: "muted",
                               undo: { try await pulse.pactl("set-sink-input-mute", player.index, "0") })
            try await silenced(by: { try await pulse.pactl("set-sink-input-volume", player.index, "0") }, as: "at volume 0",
                               undo: { try await pulse.pactl("set-sink-input-volume", player.index, "100%") })
            try await silenced(by: { try await pulse.pactl("set-sink-mute", "speakers", "1") }, as: "its output muted",
                               undo: { try await pulse.pactl("set-sink-mute", "speakers", "0") })
            try await agent.waitForLog(containing: "inhibited by \(who)", count: holds + 1)
        }
    }

    @Test("no sound server at start: the agent locks on time and says it waits; one started later is followed, and its loss ends the holds")
    func serverLater() async throws {
        try await Sandbox.with { s in
            let pulse = try PulseServer(in: s)
            try await s.x("xdotool", "key", "shift")
            let agent = try s.startAgent(["--lock-after", "2s", "--locker", Script.locker, "--not-when-audio"],
                                         environment: pulse.environment)
            try await agent.waitForLog(containing: "no sound server yet")
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: 2000)
            #expect(!agent.log.contains("error"), "\(agent.log)")
            try await pulse.start()
            try await agent.waitForLog(containing: "following the sound server at unix:\(pulse.socketPath)")
            let player = try await Player("TestPlayer", on: pulse, in: s)
            try await agent.waitForLog(containing: "inhibited by TestPlayer (pid \(player.pid))")
            try await pulse.stop()
            try await agent.waitForLog(containing: "lost the sound server")
            try await agent.waitForLog(containing: "inhibitor of TestPlayer (pid \(player.pid)) ended")
            #expect(agent.count(of: "lost the sound server") == 1, "\(agent.log)")
        }
    }

    /// Hiding libpulse from the agent alone takes a mount namespace: root with
    /// CAP_SYS_ADMIN (CI and this project's machines have it; a rootless container may not).
    static let mountNamespacesWork: Bool = {
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        probe.arguments = ["-m", "true"]
        probe.standardError = FileHandle.nullDevice
        guard (try? probe.run()) != nil else { return false }
        probe.waitUntilExit()
        return probe.terminationStatus == 0
    }()

    @Test("without libpulse the agent says once that --not-when-audio cannot work, and locks on time",
          .enabled(if: mountNamespacesWork, "needs `unshare -m` to hide libpulse from the agent"))
    func withoutLibpulse() async throws {
        try await Sandbox.with { s in
            let library = "/usr/lib/x86_64-linux-gnu/libpulse.so.0"
            try #require(FileManager.default.fileExists(atPath: library), "libpulse0 is not installed where expected")
            try await s.x("xdotool", "key", "shift")
            // In a mount namespace of its own, libpulse is an empty file for the agent alone.
            let agent = try s.startAgent(["--lock-after", "2s", "--locker", Script.locker, "--not-when-audio"],
                                         shell: "exec unshare -m sh -c 'mount --bind /dev/null \(library) && exec \"$0\" \"$@\"' \"$0\" \"$@\"")
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: 2000)
            #expect(agent.count(of: "--not-when-audio cannot work: libpulse is not available") == 1, "\(agent.log)")
        }
    }
}
