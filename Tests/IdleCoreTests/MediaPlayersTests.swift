import IdleCore
import Testing

@Suite("--not-when-playing: which players hold")
struct MediaPlayersTests {
    @Test("a playing player holds once, named by its identity, its pid and its bus name, keyed by its connection")
    func playingHolds() {
        let vlc = MediaPlayer(owner: ":1.42", name: "org.mpris.MediaPlayer2.vlc", identity: "VLC media player", pid: 1234, playing: true)
        #expect(MediaPlayers.holds([vlc]) == [HoldClaim(key: ":1.42", who: "VLC media player (pid 1234, org.mpris.MediaPlayer2.vlc)", why: "playing")])
    }

    @Test("a paused or stopped player holds nothing")
    func notPlaying() {
        let mpv = MediaPlayer(owner: ":1.7", name: "org.mpris.MediaPlayer2.mpv", identity: "mpv", pid: 7, playing: false)
        #expect(MediaPlayers.holds([mpv]).isEmpty)
        #expect(MediaPlayers.summary([mpv]) == "1 player: mpv (pid 7, org.mpris.MediaPlayer2.mpv) not playing")
        #expect(MediaPlayers.summary([]) == "0 players")
    }

    @Test("without an identity or a pid the bus name stands alone; a player's own words cannot forge a line", arguments: [
        (MediaPlayer(owner: ":1.1", name: "org.mpris.MediaPlayer2.x", pid: 9, playing: true), "org.mpris.MediaPlayer2.x (pid 9)"),
        (MediaPlayer(owner: ":1.1", name: "org.mpris.MediaPlayer2.x", identity: "  ", playing: true), "org.mpris.MediaPlayer2.x"),
        (MediaPlayer(owner: ":1.1", name: "org.mpris.MediaPlayer2.x", identity: "X", playing: true), "X (org.mpris.MediaPlayer2.x)"),
        (MediaPlayer(owner: ":1.1", name: "org.mpris.MediaPlayer2.x", identity: "a\nlocked", pid: 3, playing: true),
         "a\\u{a}locked (pid 3, org.mpris.MediaPlayer2.x)"),
    ])
    func names(player: MediaPlayer, who: String) {
        #expect(player.description == who)
    }

    @Test("the source is opt-in: --not-when-playing turns it on, its word is `playing`, and --secure refuses it")
    func optIn() throws {
        guard case .agent(let plain) = try Invocation.parse([]),
              case .agent(let on) = try Invocation.parse(["--not-when-playing"]),
              case .agent(let secure) = try Invocation.parse(["--secure", "--not-when-playing"]) else {
            Issue.record("not an agent invocation")
            return
        }
        #expect(!plain.follows(.playing))
        #expect(on.follows(.playing))
        #expect(on.startAwaits.contains(.playing), "an agent restarted during a film hears the player first")
        #expect(InhibitorSource(rawValue: "playing") == .playing)
        #expect(secure.refusedBySecure == ["--not-when-playing"])
        #expect(secure.config(locker: "x").refusal(for: .playing) == "the agent runs with --secure")
        #expect(on.config(locker: "x").settings.contains(ReportedSetting(name: "not-when-playing", value: "yes", from: "flag")))
    }

    @Test("a stage can fire through it: ignore=playing")
    func ignoreWord() throws {
        guard case .agent(let options) = try Invocation.parse(["--stage", "dim=4m ignore=playing:true"]) else {
            Issue.record("not an agent invocation")
            return
        }
        #expect(options.stages[0].ignoresHolds == [.playing])
    }

    @Test("a policy's inhibit-from without `playing` turns the flag off, and one that lists it keeps it; a config file takes it")
    func policy() throws {
        let refused = try #require(try agentOptions(["--not-when-playing"], [policyFile: "inhibit-from dbus, audio\n"]))
        #expect(!refused.follows(.playing))
        #expect(refused.policy?.changes.contains("--not-when-playing is off: inhibit-from does not list playing") == true)
        let allowed = try #require(try agentOptions(["--not-when-playing"], [policyFile: "inhibit-from dbus, playing\n"]))
        #expect(allowed.follows(.playing))
        #expect(allowed.allowedInhibitors == [.dbus, .playing])
        let filed = try #require(try agentOptions([], [userConfig: "not-when-playing\n"]))
        #expect(filed.follows(.playing))
    }
}
