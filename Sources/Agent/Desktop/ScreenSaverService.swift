import IdleCore
import Platform

/// org.freedesktop.ScreenSaver at /org/freedesktop/ScreenSaver and /ScreenSaver:
/// browsers, players and `xdg-screensaver` hold the lock off through it; Lock,
/// GetActive and ActiveChanged tell of the locker.
final class ScreenSaverService: SessionService {
    static let source = InhibitorSource.dbus
    static let statusKey = "screensaver_service"
    let bus: BusService
    /// What ActiveChanged last said.
    private var active = false

    init(agent: DesktopAgent) {
        let holds = BusHolds(source: Self.source, agent: agent)
        bus = BusService(
            names: ["org.freedesktop.ScreenSaver"], interface: "org.freedesktop.ScreenSaver",
            paths: ["/org/freedesktop/ScreenSaver", "/ScreenSaver"],
            methods: [
                .init("Inhibit", takes: "ss", returns: "u", needsCaller: true) { holds.inhibit($0, app: $0.text(0), reason: $0.text(1)) },
                .init("UnInhibit", takes: "u") { holds.release($0, cookie: $0.number(0)) },
                .init("SimulateUserActivity", needsCaller: true) { [weak agent] call in
                    let by = "SimulateUserActivity from \(call.sender)"
                    let here: () -> BusReply = { [weak agent] in
                        if case .refused(let why)? = agent?.request(.reset(from: Self.source, by: by)) { return .refused(why) }
                        return .done
                    }
                    guard let routing = agent?.holdRouting else { return here() }
                    return routing.activity(call, owner: HoldOwner(Self.source, call.sender), here: here)
                },
                // The caller's session is locked: another session's agent is told (HoldRouting).
                .init("Lock", needsCaller: true) { [weak agent] call in
                    let pid = call.pid == 0 ? "" : " (pid \(call.pid))"
                    let from = "org.freedesktop.ScreenSaver.Lock from \(call.sender)\(pid)"
                    let here: () -> BusReply = { [weak agent] in
                        agent?.perform(.lockRequest(from: from))
                        return .done
                    }
                    guard let routing = agent?.holdRouting else { return here() }
                    return routing.lock(call, owner: HoldOwner(Self.source, call.sender), here: here)
                },
                // The caller's session's screen, wherever the caller runs (HoldRouting).
                .init("GetActive", returns: "b", needsCaller: true) { [weak agent] call in
                    holds.query(call, here: { .flag(agent?.screenCovered == true) }) { status in
                        status["locker"].map { .flag($0["covers_screen"]?.bool == true) }
                    }
                },
                .init("GetActiveTime", returns: "u", needsCaller: true) { [weak agent] call in
                    holds.query(call, here: { Self.seconds(agent?.lockedFor) }) { status in
                        status["locked_ms"].map { Self.seconds($0.integer.map(Millis.init)) }
                    }
                },
                .init("GetSessionIdleTime", returns: "u", needsCaller: true) { [weak agent] call in
                    holds.query(call, here: { Self.seconds(agent?.idleTime) }) { status in
                        status["idle_ms"]?.integer.map { Self.seconds(Millis($0)) }
                    }
                },
            ],
            signals: [("ActiveChanged", "b")])
        bus.onCallerGone = holds.callerGone
    }

    /// The protocol's times are whole seconds.
    private static func seconds(_ time: Millis?) -> BusReply {
        .number(UInt32(clamping: (time ?? .zero).value / 1000))
    }

    /// ActiveChanged when the screen is covered or unlocked.
    func announce(_ announcement: Announcement) {
        guard bus.ownsName else { return }
        let covered: Bool
        switch announcement {
        case .locked: covered = true
        // A covering locker that fails leaves the screen open: no longer active.
        case .unlocked, .lockerFailed: covered = false
        default: return
        }
        guard covered != active else { return }
        active = covered
        bus.emit("ActiveChanged", covered ? 1 : 0)
    }
}
