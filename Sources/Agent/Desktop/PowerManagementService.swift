import IdleCore
import Platform

/// org.freedesktop.PowerManagement.Inhibit, under both names its clients call
/// (org.freedesktop.PowerManagement, and org.freedesktop.PowerManagement.Inhibit of
/// older ones): VLC, OBS, Parole, Firefox, Chromium and LibreOffice hold the lock
/// off through it where they do not use org.freedesktop.ScreenSaver.
final class PowerManagementService: SessionService {
    static let source = InhibitorSource.powerManagement
    static let statusKey = "power_management_service"
    let bus: BusService
    /// What HasInhibitChanged last said.
    private var held = false
    private weak var agent: DesktopAgent?

    init(agent: DesktopAgent) {
        self.agent = agent
        let holds = BusHolds(source: Self.source, agent: agent)
        bus = BusService(
            names: ["org.freedesktop.PowerManagement", "org.freedesktop.PowerManagement.Inhibit"],
            interface: "org.freedesktop.PowerManagement.Inhibit",
            paths: ["/org/freedesktop/PowerManagement/Inhibit"],
            methods: [
                .init("Inhibit", takes: "ss", returns: "u", needsCaller: true) { holds.inhibit($0, app: $0.text(0), reason: $0.text(1)) },
                .init("UnInhibit", takes: "u") { holds.release($0, cookie: $0.number(0)) },
                // The caller's session's holds, wherever the caller runs (HoldRouting).
                .init("HasInhibit", returns: "b", needsCaller: true) { [weak agent] call in
                    holds.query(call, here: { .flag(agent?.holds(from: Self.source) == true) }) { holds.holds(in: $0).map(BusReply.flag) }
                },
            ],
            signals: [("HasInhibitChanged", "b")])
        bus.onCallerGone = holds.callerGone
    }

    /// HasInhibitChanged when the first of its holds begins or the last ends.
    func announce(_ announcement: Announcement) {
        switch announcement {
        case .inhibited(let hold), .uninhibited(let hold):
            guard hold.source == Self.source, bus.ownsName, let agent else { return }
            let now = agent.holds(from: Self.source)
            guard now != held else { return }
            held = now
            bus.emit("HasInhibitChanged", now ? 1 : 0)
        default:
            return
        }
    }
}
