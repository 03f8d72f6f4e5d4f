/// One MPRIS player on the session bus (`--not-when-playing`), as the bus and the
/// player tell it: one connection that owns one or more `org.mpris.MediaPlayer2.*` names.
public struct MediaPlayer: Equatable, Sendable {
    /// Its unique name (":1.42"), which the bus vouches for: the hold's key.
    public var owner: String
    /// The shortest of its `org.mpris.MediaPlayer2.*` names.
    public var name: String
    /// Its Identity property ("VLC media player"), its own words; "" when it tells none.
    public var identity: String
    /// Its process, as the bus tells it; nil when unknown.
    public var pid: UInt32?
    /// Its PlaybackStatus is "Playing".
    public var playing: Bool

    public init(owner: String, name: String, identity: String = "", pid: UInt32? = nil, playing: Bool) {
        self.owner = owner
        self.name = name
        self.identity = identity
        self.pid = pid
        self.playing = playing
    }

    /// In the user's words, for the log and status: `VLC media player (pid 1234,
    /// org.mpris.MediaPlayer2.vlc)`, its name alone where it tells no identity.
    public var description: String {
        let name = ClientText.sanitized(self.name, maxBytes: 96)
        let identity = ClientText.sanitized(String(self.identity.trimmingSpaces), maxBytes: 64)
        let vouched = [pid.map { "pid \($0)" }, identity.isEmpty ? nil : name].compactMap { $0 }
        let said = identity.isEmpty ? name : identity
        return vouched.isEmpty ? said : "\(said) (\(vouched.joined(separator: ", ")))"
    }
}

public enum MediaPlayers {
    /// One hold per player that says it plays, keyed by its connection: a player that
    /// owns several names holds once, and one started again holds anew.
    public static func holds(_ players: [MediaPlayer]) -> [HoldClaim] {
        players.filter(\.playing).map { HoldClaim(key: $0.owner, who: $0.description, why: "playing") }
    }

    /// For the debug log: `2 players: mpv (pid 7, …) playing, …`.
    public static func summary(_ players: [MediaPlayer]) -> String {
        let each = players.map { "\($0.description) \($0.playing ? "playing" : "not playing")" }
        return "\(players.count) player\(players.count == 1 ? "" : "s")" + (each.isEmpty ? "" : ": " + each.joined(separator: ", "))
    }
}
