import Foundation
import Testing

/// `--not-when-playing` with a private session bus per test and a real MPRIS player on
/// it (Harness/mpris.py, dbus-python): its PlaybackStatus switched as a player's
/// buttons switch it, its PropertiesChanged as players send them.
@Suite struct PlayerWatchTests {
    static let locker = "echo $$ >> lockers.pids; exec sleep 60"

    @Test("a playing player holds the lock off and status names it; paused, the lock due long since comes at once; the held agent never wakes")
    func playingHolds() async throws {
        try await Sandbox.with(buses: true) { s in
            let player = try await MprisPlayer("testplayer", in: s, identity: "Test Player")
            try await s.x("xdotool", "key", "shift")
            let agent = try s.startAgent(["--lock-after", "3s", "--locker", Self.locker, "--not-when-playing", "--socket", s.socket])
            let who = "Test Player (pid \(player.pid), org.mpris.MediaPlayer2.testplayer)"
            try await agent.waitForLog(containing: "inhibited by \(who) while it plays: playing")
            guard !s.exists("lockers.pids") else {
                throw WaitTimedOut(what: "the hold before the lock time (the machine is too loaded)", timeout: .zero, context: agent.log)
            }
            // Held past the lock time (its deadline, the X saver's timeout passed), the
            // agent sleeps: nothing is polled.
            try await s.waitUntil("the server idle to pass 3.5 s", every: .milliseconds(200)) { try await s.serverIdle() >= 3500 }
            let before = try await s.settledWakeUps(of: agent)
            let idleBefore = try await s.serverIdle()
            try await s.waitUntil("two more seconds of idleness", every: .milliseconds(200)) { try await s.serverIdle() >= idleBefore + 2000 }
            let after = try #require(wakeUps(of: agent.pid))
            #expect(after - before == 0, "the agent woke \(after - before) times while a player played\n\(agent.log)")
            #expect(!s.exists("lockers.pids"), "locked while a player played\n\(agent.log)")
            let held = try await s.inhibitors().filter { $0["source"] as? String == "playing" }
            #expect(held.map { $0["who"] as? String } == [who], "\(held)")
            #expect(held.map { $0["why"] as? String } == ["playing"], "\(held)")
            let plain = try await s.client("status")
            #expect(plain.stdout.contains("inhibited by \(who) [playing]"), "\(plain.stdout)")
            // From the moment it is told (its own control poll, 50 ms at most, included).
            let paused = ContinuousClock.now
            try await player.send("pause")
            _ = try await s.waitForLines("lockers.pids")
            let late = (ContinuousClock.now - paused).milliseconds
            print("PlayerWatchTests: locked \(late) ms after Paused")
            #expect(late <= latestLock, "lock \(late) ms after the player paused\n\(agent.log)")
            #expect(agent.log.contains("inhibitor of \(who) ended"), "\(agent.log)")
        }
    }

    @Test("a player that is killed, or that leaves the bus while its process stays, ends its hold: the lock comes within the lock time",
          arguments: ["kill", "release"])
    func playerGoes(how: String) async throws {
        try await Sandbox.with(buses: true) { s in
            let player = try await MprisPlayer("testplayer", in: s)
            try await s.x("xdotool", "key", "shift")
            let agent = try s.startAgent(["--lock-after", "2s", "--locker", Self.locker, "--not-when-playing", "--socket", s.socket])
            let who = "Test Player (pid \(player.pid), org.mpris.MediaPlayer2.testplayer)"
            try await agent.waitForLog(containing: "inhibited by \(who)")
            try await s.waitUntil("the server idle to pass 3 s", every: .milliseconds(200)) { try await s.serverIdle() >= 3000 }
            #expect(!s.exists("lockers.pids"), "locked while a player played\n\(agent.log)")
            let gone = ContinuousClock.now
            if how == "kill" { try await player.kill() } else { try await player.send("release") }
            _ = try await s.waitForLines("lockers.pids")
            let late = (ContinuousClock.now - gone).milliseconds
            print("PlayerWatchTests: locked \(late) ms after the player's \(how)")
            #expect(late <= latestLock, "lock \(late) ms after the player's \(how)\n\(agent.log)")
            #expect(agent.log.contains("inhibitor of \(who) ended"), "\(agent.log)")
        }
    }

    @Test("a PropertiesChanged saying Playing from a connection that owns no player name holds nothing, and is said")
    func forgedSignal() async throws {
        try await Sandbox.with(buses: true) { s in
            let player = try await MprisPlayer("testplayer", in: s, status: "Paused")
            try await s.x("xdotool", "key", "shift")
            let agent = try s.startAgent(["--lock-after", "3s", "--locker", Script.locker, "--not-when-playing", "--verbose",
                                          "--socket", s.socket])
            try await agent.waitForLog(containing: "media players: 1 player: Test Player (pid \(player.pid), org.mpris.MediaPlayer2.testplayer) not playing")
            _ = try s.startBackground(systemPython, [mprisScript, "forge"], output: "forger.out")
            let forger = try await s.waitForLines("forger.out")[0].split(separator: " ")[1]
            try await agent.waitForLog(containing: "dropped a player's PropertiesChanged from \(forger), which owns no followed org.mpris.MediaPlayer2 name")
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: 3000)
            #expect(!agent.log.contains("inhibited by"), "\(agent.log)")
        }
    }

    @Test("a player that comes later is followed; two names of one player hold once, by its shortest name; an invalidated status is asked")
    func laterPlayerTwoNames() async throws {
        try await Sandbox.with(buses: true) { s in
            let agent = try s.startAgent(["--lock-after", "1h", "--locker", "true", "--not-when-playing", "--verbose",
                                          "--socket", s.socket])
            try await agent.waitForLog(containing: "following the media players on the session bus")
            let player = try await MprisPlayer("testplayer", in: s, status: "Stopped", also: "testplayer.instance7")
            let who = "Test Player (pid \(player.pid), org.mpris.MediaPlayer2.testplayer)"
            try await agent.waitForLog(containing: "media players: 1 player: \(who) not playing")
            try await player.send("invalidate Playing")
            try await agent.waitForLog(containing: "inhibited by \(who)")
            #expect(try await s.inhibitors().filter { $0["source"] as? String == "playing" }.count == 1)
            try await player.send("stop")
            try await agent.waitForLog(containing: "inhibitor of \(who) ended")
            #expect(agent.count(of: "inhibited by") == 1, "\(agent.log)")
        }
    }

    @Test("a lost session bus ends every player's hold, said once; the bus back, its players hold again")
    func busLost() async throws {
        try await Sandbox.with(buses: true) { s in
            let buses = try #require(s.buses)
            let player = try await MprisPlayer("testplayer", in: s)
            let agent = try s.startAgent(["--lock-after", "1h", "--locker", "true", "--not-when-playing", "--socket", s.socket])
            try await agent.waitForLog(containing: "inhibited by Test Player (pid \(player.pid)")
            try await buses.session.crash()
            try await agent.waitForLog(containing: "media players no longer hold the stages off")
            try await agent.waitForLog(containing: "inhibitor of Test Player (pid \(player.pid)")
            try await player.kill()
            try await buses.session.restart()
            try await agent.waitForLog(containing: "following the media players on the session bus again")
            let again = try await MprisPlayer("testplayer", in: s)
            try await agent.waitForLog(containing: "inhibited by Test Player (pid \(again.pid)")
            #expect(agent.count(of: "media players no longer hold the stages off") == 1, "\(agent.log)")
        }
    }

    @Test("under --secure the players are not followed (said once) and the lock comes on time while one plays")
    func secure() async throws {
        try await Sandbox.with(buses: true) { s in
            _ = try await MprisPlayer("testplayer", in: s)
            try await s.x("xdotool", "key", "shift")
            let agent = try s.startAgent(["--lock-after", "2s", "--locker", Script.locker, "--not-when-playing", "--secure"])
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: 2000)
            #expect(agent.count(of: "--not-when-playing: not followed, the agent runs with --secure") == 1, "\(agent.log)")
            #expect(!agent.log.contains("following the media players"), "\(agent.log)")
        }
    }

    static let mpvMpris = "/usr/lib/mpv-mpris/mpris.so"
    static let haveMpv = FileManager.default.isExecutableFile(atPath: "/usr/bin/mpv") && FileManager.default.fileExists(atPath: mpvMpris)

    @Test("a real mpv with its MPRIS plugin (mpv-mpris) holds while it plays; paused through MPRIS, or killed, the lock comes at once",
          .enabled(if: haveMpv, "needs mpv and mpv-mpris"), arguments: ["pause", "kill"])
    func realMpv(how: String) async throws {
        try await Sandbox.with(buses: true) { s in
            // 60 s of a tone, looped, played into nothing in real time (no sound server).
            _ = try await s.run(systemPython, ["-c", """
                import math, struct, wave
                w = wave.open("tone.wav", "wb"); w.setnchannels(1); w.setsampwidth(2); w.setframerate(8000)
                w.writeframes(b"".join(struct.pack("<h", int(3000 * math.sin(i * 0.35))) for i in range(8000 * 60)))
                """])
            let mpv = try s.startBackground("/usr/bin/mpv", ["--no-config", "--script=\(Self.mpvMpris)", "--no-video", "--ao=null",
                                                             "--loop=inf", "--no-terminal", "tone.wav"], output: "mpv.out")
            try await s.x("xdotool", "key", "shift")
            let agent = try s.startAgent(["--lock-after", "2s", "--locker", Self.locker, "--not-when-playing", "--socket", s.socket])
            let who = "mpv (pid \(mpv.processIdentifier), org.mpris.MediaPlayer2.mpv)"
            try await agent.waitForLog(containing: "inhibited by \(who) while it plays: playing")
            try await s.waitUntil("the server idle to pass 3 s", every: .milliseconds(200)) { try await s.serverIdle() >= 3000 }
            #expect(!s.exists("lockers.pids"), "locked while mpv played\n\(agent.log)")
            let ended = ContinuousClock.now
            if how == "kill" {
                kill(mpv.processIdentifier, SIGKILL)
            } else {
                let paused = try await s.run("dbus-send", ["--session", "--print-reply", "--dest=org.mpris.MediaPlayer2.mpv",
                                                           "/org/mpris/MediaPlayer2", "org.mpris.MediaPlayer2.Player.Pause"])
                #expect(paused.exit == .exited(0), "\(paused.stderr)")
            }
            _ = try await s.waitForLines("lockers.pids")
            let late = (ContinuousClock.now - ended).milliseconds
            print("PlayerWatchTests: mpv: locked \(late) ms after its \(how)")
            #expect(late <= latestLock, "lock \(late) ms after mpv's \(how)\n\(agent.log)")
            #expect(agent.log.contains("inhibitor of \(who) ended"), "\(agent.log)")
        }
    }
}
