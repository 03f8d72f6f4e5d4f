import CBus
import Glibc
import IdleCore
import Platform

/// The desktop's buses: the services of holds served on the session bus (each a
/// `SessionService` of its own: org.freedesktop.ScreenSaver for browsers and
/// players, …), and logind on the system bus (lock before sleep, the
/// session's Lock signal, its hints, idle inhibitors). Either bus may be missing,
/// come later, never answer or go away: the agent never waits for one (every
/// connection, handshake and call is asynchronous and bounded), goes on locking,
/// says so once, and joins the bus when it answers.
final class DesktopServices {
    /// Every service of holds the agent can serve on the session bus.
    static var sessionServices: [SessionService.Type] { [ScreenSaverService.self, PowerManagementService.self, SessionManagerService.self] }

    struct Settings {
        /// The session services to serve (those the user follows).
        var served: Set<InhibitorSource> = Set(DesktopServices.sessionServices.map { $0.source })
        var useLogind = true
        var lockBeforeSleep = true
        /// Some time differs on battery: UPower's OnBattery is followed.
        var followPower = false
        /// The session logind named at start (else XDG_SESSION_ID's, or the user's display session).
        var sessionID: String?
    }

    private weak var agent: DesktopAgent?
    private let settings: Settings
    /// logind and UPower, followed on the system bus.
    let logind: LogindLink
    /// Which session's agent holds what a caller asks of the services (several sessions
    /// of one user share the session bus); nil where logind did not name this agent's session.
    let routing: HoldRouting?
    /// The program that owns each service's name where this agent does not (another
    /// session's agent, or the desktop's own service), followed as the name passes on:
    /// only it may pass holds on. Its start time names that one process even once its
    /// pid is reused.
    private(set) var nameOwners: [InhibitorSource: (pid: UInt32, started: String)] = [:]
    private let session: BusLink
    private let system: BusLink
    /// The services of holds served whenever the session bus is there.
    private let services: [SessionService]
    /// What the bus answered for each of their names ("served", "owned by …"), for status and doctor.
    private var nameStates: [String: String] = [:]
    /// The desktop portal that relays GTK's inhibitors to org.freedesktop.ScreenSaver, if one is installed.
    /// Looked for when status first asks, not at start.
    private lazy var inhibitPortal = DesktopServices.findInhibitPortal()
    private var said = SaidOnce()

    init(agent: DesktopAgent, settings: Settings) {
        self.agent = agent
        self.settings = settings
        services = Self.sessionServices.filter { settings.served.contains($0.source) }.map { $0.init(agent: agent) }
        logind = LogindLink(agent: agent, settings: settings)
        let logind = logind
        routing = settings.sessionID.map { HoldRouting(agent: agent, logind: logind, ownSession: $0) }
        session = BusLink(userBus: true, name: "session bus", agent: agent)
        system = BusLink(userBus: false, name: "system bus", agent: agent)
    }

    /// Loads libsystemd and connects both buses. Without libsystemd the agent runs on
    /// without the buses. Each bus in `awaiting` tells the machine when it has said
    /// what it holds at start.
    func start(awaiting: Set<InhibitorSource>) {
        var error = [CChar](repeating: 0, count: 256)
        guard xil_bus_load(&error, error.count) == 0 else {
            Log.write(.warning, "D-Bus is not available (\(String(nulTerminated: error))): no lock before sleep, no \(servedNames); locking goes on")
            for source in servedSources + [.logind] where awaiting.contains(source) { agent?.perform(.sourceReady(source)) }
            return
        }
        for service in services { installServed(service) }
        if !services.isEmpty { connectSession() }
        if settings.useLogind || settings.followPower { connectSystem() }
        if !settings.useLogind && awaiting.contains(.logind) { agent?.perform(.sourceReady(.logind)) }
    }

    // MARK: Connections

    private func connectSession() {
        session.onReady = { [unowned self] in sessionReady() }
        session.onDown = { [unowned self] why, next, lost in
            guard lost else {
                for source in servedSources { agent?.perform(.sourceReady(source)) }
                return said.say("no-session", .warning, "no session bus (\(why)): \(servedNames) \(services.count == 1 ? "is" : "are") not served; locking goes on, \(next)")
            }
            said.markSaid("no-session")
            said.say("lost-session", .warning, "lost the session bus (\(why)): \(servedNames) \(services.count == 1 ? "is" : "are") not served until it is back; locking goes on")
            // Their callers can no longer end their inhibitors: they end now (fail closed).
            nameStates = [:]
            routing?.busLost()
            for service in services {
                for object in [service.bus] + service.also { object.forget() }
                agent?.request(.sourceLost(type(of: service).source))
            }
        }
        session.connect()
    }

    private var servedSources: [InhibitorSource] { services.map { type(of: $0).source } }
    private var servedNames: String { services.isEmpty ? "no service" : services.map(\.bus.name).joined(separator: ", ") }

    private func sessionReady() {
        guard let bus = session.bus else { return }
        for service in services {
            for object in service.also where object.serve(on: bus) < 0 {
                Log.write(.warning, "cannot serve \(object.interface) of \(service.bus.name)")
            }
            let r = service.bus.serve(on: bus)
            if r < 0 { served(service, service.bus.name, r, owner: 0) }
        }
    }

    private func installServed(_ service: SessionService) {
        service.bus.onServed = { [unowned self, unowned service] name, result, owner in served(service, name, result, owner: owner) }
    }

    /// The bus's answer to our asking for a service's name.
    private func served(_ service: SessionService, _ name: String, _ r: Int32, owner: UInt32) {
        let source = type(of: service).source
        if name == service.bus.name {
            nameOwners[source] = r == 0 && owner != 0 ? ProcessStart.time(of: pid_t(owner)).map { (owner, $0) } : nil
        }
        if r == 1 {
            nameStates[name] = "served"
            Log.write(.info, "serving \(name) on the session bus (\(source.row.what) can hold the lock off)")
            // Clients take their inhibitors again once they see the name appear: the
            // first stage gives them a moment (within the start's wait).
            agent?.perform(.sourceReady(source, settle: .seconds(1)))
            return
        }
        // Never fought over: the desktop's own service (light-locker, xfce4-power-manager)
        // keeps it, and so does the agent of another session of this user (one session
        // bus for all of them), which passes this session's holds on to this agent.
        let ownerName = processName(pid_t(owner))
        nameStates[name] = r != 0 ? "cannot be served: \(String(cString: strerror(-r)))"
            : ownerName == "xidlelock" && routing != nil
            ? "served by the xidlelock agent of another session of this user (pid \(owner)), on the session bus they share: it passes the holds of this session's programs on to this agent"
            : "owned by another program (pid \(owner), \(ownerName)): its inhibitors are not seen by xidlelock"
        Log.write(nameStates[name]?.hasPrefix("served by the xidlelock agent") == true ? .info : .warning, "\(name) is \(nameStates[name] ?? "")")
        agent?.perform(.sourceReady(source))
    }

    private func connectSystem() {
        system.onReady = { [unowned self] in
            if let bus = system.bus { logind.joined(bus) }
        }
        system.onDown = { [unowned self] why, next, lost in
            logind.left(wasJoined: lost)
            guard lost else {
                return said.say("no-system", .warning, "no system bus (\(why)): no lock before sleep, no lock-session; locking goes on, \(next)")
            }
            said.markSaid("no-system")
            said.say("lost-system", .warning, "lost the system bus (\(why)): no lock before sleep until it is back; locking goes on")
        }
        system.connect()
    }

    // MARK: What the agent tells the desktop

    /// Sleep and hints, for logind.
    func carryOut(_ action: Action) { logind.carryOut(action) }

    /// Announcements the session bus's services tell their clients.
    func announce(_ announcement: Announcement) {
        for service in services { service.announce(announcement) }
    }

    /// For status.
    var statusFields: [(String, JSONValue)] {
        let systemReady = system.isReady
        return [
            ("session_bus", .bool(session.isReady)),
            ("session_bus_state", .string(session.state)),
        ] + Self.sessionServices.map { kind in
            (kind.statusKey, .bool(services.contains { type(of: $0) == kind && $0.bus.ownsName }))
        } + [
            ("services", .array(Self.sessionServices.map { kind in
                let service = services.first { type(of: $0) == kind }
                let names = service?.bus.names ?? []
                return .object([
                    ("source", .string(kind.source.rawValue)),
                    ("names", .array(names.map { .string($0) })),
                    ("state", .string(service == nil ? "off" : names.map { "\($0): \(nameStates[$0] ?? "waiting for the session bus")" }.joined(separator: "; "))),
                    ("off_flag", kind.source.row.flag.map { .string($0.name) } ?? .null),
                ])
            })),
            ("inhibit_portal", inhibitPortal.map { .string($0) } ?? .null),
            ("hold_routing", routing.map { .object($0.statusFields) } ?? .null),
        ] + [
            ("system_bus", .bool(systemReady)),
            ("system_bus_state", .string(system.state)),
        ] + logind.statusFields(systemReady: systemReady)
    }

}

extension DesktopServices {
    /// A portal file that offers org.freedesktop.impl.portal.Inhibit (xdg-desktop-portal-gtk's):
    /// GTK applications hold the lock off through it without the session manager's service.
    static func findInhibitPortal(in directory: String = "/usr/share/xdg-desktop-portal/portals") -> String? {
        guard let dir = opendir(directory) else { return nil }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard name.hasSuffix(".portal"), let bytes = FileIO.readSmallFile("\(directory)/\(name)", limit: 4096) else { continue }
            if String(decoding: bytes, as: UTF8.self).firstRange(matching: "org.freedesktop.impl.portal.Inhibit") != nil { return "\(directory)/\(name)" }
        }
        return nil
    }
}
