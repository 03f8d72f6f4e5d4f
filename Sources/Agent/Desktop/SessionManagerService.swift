import Glibc
import IdleCore
import Platform

/// `--session-manager-service`: org.gnome.SessionManager's inhibitors, the first
/// thing GTK's `gtk_application_inhibit` asks for (then the portal), and
/// `gnome-session-inhibit`'s. Only the idle flag (8) holds the lock off: Chromium
/// also asks with 4 (suspend) alone, and logout and switch-user are not ours to
/// hold. It serves no more of a session manager than GTK calls: an application that
/// registers as a client gets a client object that is never told of a logout.
/// Opt-in: with the name owned, xdg-utils takes the session for GNOME.
final class SessionManagerService: SessionService {
    static let source = InhibitorSource.sessionManager
    static let statusKey = "session_manager_service"
    static let idleFlag: UInt32 = 8
    static let clientPath = "/org/gnome/SessionManager/Client0"
    let bus: BusService
    /// The client object of every registered application.
    let clients: BusService
    var also: [BusService] { [clients] }
    /// Cookies of inhibitors without the idle flag, by caller: they hold nothing,
    /// but their Uninhibit must succeed.
    private var notHolding: [String: Set<UInt32>] = [:]
    private var nextCookie: UInt32 = 0x8000_0000

    init(agent: DesktopAgent) {
        let holds = BusHolds(source: Self.source, agent: agent)
        var inhibit: (BusCall) -> BusReply = { _ in .refused("not ready") }
        var uninhibit: (BusCall) -> BusReply = { _ in .refused("not ready") }
        bus = BusService(
            names: ["org.gnome.SessionManager"], interface: "org.gnome.SessionManager", paths: ["/org/gnome/SessionManager"],
            methods: [
                // Inhibit(app_id, toplevel_xid, reason, flags)
                .init("Inhibit", takes: "susu", returns: "u", needsCaller: true) { inhibit($0) },
                .init("Uninhibit", takes: "u") { uninhibit($0) },
                // The caller's session's holds, wherever the caller runs (HoldRouting).
                .init("IsInhibited", takes: "u", returns: "b", needsCaller: true) { [weak agent] call in
                    guard call.number(0) & Self.idleFlag != 0 else { return .flag(false) }
                    return holds.query(call, here: { .flag(agent?.holds(from: Self.source) == true) }) { holds.holds(in: $0).map(BusReply.flag) }
                },
                .init("RegisterClient", takes: "ss", returns: "o") { _ in .text(Self.clientPath) },
                .init("UnregisterClient", takes: "o") { _ in .done },
            ])
        clients = BusService(names: [], interface: "org.gnome.SessionManager.ClientPrivate", paths: [Self.clientPath],
                             methods: [.init("EndSessionResponse", takes: "bs") { _ in .done }])
        inhibit = { [unowned self] call in
            let window = call.number(1)
            guard call.number(3) & Self.idleFlag != 0 else {
                let cookie = nextCookie
                nextCookie = nextCookie == UInt32.max ? 0x8000_0000 : nextCookie + 1
                // Bounded like the holds: a caller cannot grow this without end.
                guard notHolding[call.sender, default: []].count < HoldLimits.perClient else { return .refused("too many inhibitors") }
                notHolding[call.sender, default: []].insert(cookie)
                return .number(cookie)
            }
            let reason = call.text(2) + (window == 0 ? "" : " (window 0x\(String(window, radix: 16)))")
            return holds.inhibit(call, app: call.text(0), reason: reason)
        }
        uninhibit = { [unowned self] call in
            let cookie = call.number(0)
            if notHolding[call.sender]?.remove(cookie) != nil { return .done }
            return holds.release(call, cookie: cookie)
        }
        bus.onCallerGone = { [unowned self] sender in
            notHolding[sender] = nil
            holds.callerGone(sender)
        }
    }
}
