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
                .init("GetActive", returns: "b") { [weak agent] _ in .flag(agent?.screenCovered == true) },
                .init("GetActiveTime", returns: "u") { [weak agent] _ in
                    .number(UInt32(clamping: (agent?.lockedFor ?? .zero).value / 1000))
                },
                .init("GetSessionIdleTime", returns: "u") { [weak agent] _ in
                    .number(UInt32(clamping: (agent?.idleTime ?? .zero).value / 1000))
                },
            ],
            signals: [("ActiveChanged", "b")])
        bus.onCallerGone = holds.callerGone
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
