import CBus
import Glibc
import IdleCore
import Platform

/// `--not-when-playing`: while an MPRIS player on the session bus says it is playing
/// (its PlaybackStatus), the stages are held off, one inhibitor per player. Muted
/// video and players that inhibit nothing are covered too. The watch has a session
/// bus connection of its own (the desktop services' is theirs), joined without
/// waiting; the players are followed through the bus's NameOwnerChanged and their
/// own PropertiesChanged, never polled: a steady film costs no wake-up. A player that
/// leaves the bus ends its hold; a lost bus ends them all (fail closed), said once,
/// and is joined again when it is back. It is in the loop as a source that waits on
/// nothing of its own (its connection, timer and socket watch are sources beside it):
/// the loop keeps it.
final class PlayerWatch: EventSource {
    private weak var agent: DesktopAgent?
    private var callbacks: UnsafeMutablePointer<xil_mpris_callbacks>
    private var link: BusLink?
    /// The players were followed before (a rejoin says "again").
    private var everConnected = false
    /// Why the bus cannot be joined, said once until it is.
    private var saidFailure = false
    /// What the machine was told last: a player's other changes tell it nothing.
    private var reported: [HoldClaim]?
    /// The players as the bus told them last (judged again once logind places one).
    private var lastPlayers: [MediaPlayer] = []

    /// Starts following the players, or says once why it cannot (no libsystemd).
    static func start(for agent: DesktopAgent) {
        var error = [CChar](repeating: 0, count: 256)
        guard xil_bus_load(&error, error.count) == 0 else {
            Log.write(.warning, "--not-when-playing cannot work: D-Bus is not available (\(String(nulTerminated: error))); locking goes on without it")
            agent.perform(.sourceReady(.playing))
            return
        }
        let watch = PlayerWatch(agent: agent)
        agent.addSource(watch)
        let link = BusLink(userBus: true, name: "session bus (players)", agent: agent)
        link.onReady = { [unowned watch] in watch.ready() }
        link.onDown = { [unowned watch] why, _, lost in watch.down(why, lost: lost) }
        watch.link = link
        link.connect()
    }

    private init(agent: DesktopAgent) {
        self.agent = agent
        callbacks = .allocate(capacity: 1)
        callbacks.initialize(to: xil_mpris_callbacks())
        callbacks.pointee.context = Unmanaged.passUnretained(self).toOpaque()
        installCallbacks()
    }

    func dispatch(_ events: PollEvents) {}

    // MARK: The connection (its own BusLink: joined again when it is back)

    private func ready() {
        guard let bus = link?.bus else { return }
        saidFailure = false
        let r = xil_mpris_watch(bus, callbacks)
        guard r >= 0 else {
            Log.write(.warning, "--not-when-playing cannot follow the players: \(String(cString: strerror(-r))); locking goes on without it")
            agent?.perform(.sourceReady(.playing))
            return
        }
        Log.write(.info, "following the media players on the session bus\(everConnected ? " again" : ""): a player that says it is playing holds the stages off")
        everConnected = true
    }

    /// The bus could not be joined, or was lost (`lost`: its holds end, said once).
    private func down(_ why: String, lost: Bool) {
        xil_mpris_forget()
        if lost {
            Log.write(.warning, "lost the session bus (\(why)): media players no longer hold the stages off until it is back; locking goes on")
            // Nothing can be seen to stop now: what the players held ends (fail closed).
            reported = nil
            agent?.request(.sourceLost(.playing))
        } else if !saidFailure {
            Log.write(.info, "no session bus (\(why)): --not-when-playing waits for one; locking goes on")
            agent?.perform(.sourceReady(.playing))
        }
        saidFailure = true
    }

    // MARK: The players

    /// One hold per playing player, reported whole (the machine admits the new before
    /// it ends the old). The end of a film is no activity, as the end of any other
    /// inhibitor is not: the stages already due fire when it stops.
    private func playersChanged(_ players: [MediaPlayer]) {
        Log.debug("media players: \(MediaPlayers.summary(players))")
        lastPlayers = players
        // The players of every session of this user share the bus: only this session's
        // hold it (logind's word on each player's process; one not placed yet holds
        // nothing until it is, a few milliseconds).
        let ours = agent?.holdRouting?.inOwnSession(players, pid: \.pid, watcher: "players") { [weak self] in
            guard let self else { return }
            playersChanged(lastPlayers)
        } ?? players
        let claims = MediaPlayers.holds(ours)
        guard claims != reported else { return }
        reported = claims
        agent?.request(.holdsNow(HoldReport(HoldOwner(.playing), claims)))
    }

    private func forged(_ sender: String) {
        Log.limited("dropped PropertiesChanged signals", "dropped a player's PropertiesChanged from \(ClientText.sanitized(sender, maxBytes: 64)), which owns no followed org.mpris.MediaPlayer2 name")
    }

    private func installCallbacks() {
        callbacks.pointee.players = { context, list, count in
            let players = (0..<Int(count)).map { k in
                let p = list![k]
                return MediaPlayer(owner: String(cString: p.owner), name: String(cString: p.name),
                                   identity: String(cString: p.identity), pid: p.pid == 0 ? nil : p.pid, playing: p.playing != 0)
            }
            Unmanaged<PlayerWatch>.fromOpaque(context!).takeUnretainedValue().playersChanged(players)
        }
        callbacks.pointee.forged = { context, sender in
            Unmanaged<PlayerWatch>.fromOpaque(context!).takeUnretainedValue().forged(String(cString: sender!))
        }
        callbacks.pointee.log = { _, level, message in Log.fromLibrary(level, message) }
    }
}
