import CBus
import Glibc
import IdleCore

/// What the desktop services need from the agent.
protocol DesktopAgent: AnyObject {
    @discardableResult func perform(_ event: Event) -> Answer?
    /// A report or a client's request, with the idle time brought up to date first.
    @discardableResult func request(_ event: Event) -> Answer?
    /// The locker holds the screen (org.freedesktop.ScreenSaver's "active").
    var screenCovered: Bool { get }
    var lockedFor: Millis? { get }
    var idleTime: Millis { get }
    /// What logind was last told (LockedHint, IdleHint): told again to a new connection.
    var hints: (locked: Bool, idle: Bool) { get }
    /// Whether a hold of this source is in place now.
    func holds(from source: InhibitorSource) -> Bool
    func addSource(_ source: EventSource)
}

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
    }

    private weak var agent: DesktopAgent?
    private let settings: Settings
    private var callbacks: UnsafeMutablePointer<xil_desktop_callbacks>
    private var session: BusConnection?
    private var system: BusConnection?
    /// Our session's object path on logind.
    private(set) var sessionPath: String?
    /// The sleep delay inhibitor's descriptor, while held.
    private(set) var sleepDelay: Int32 = -1
    /// Asked for, not answered yet.
    private var sleepDelayAsked = false
    private(set) var sleepPending = false
    private var delayLimit = Millis.seconds(5)
    /// logind's idle inhibitors as the answer to ListInhibitors tells them, while it comes.
    private var listedIdleInhibitors: [HoldClaim] = []
    /// Signals that claimed to be logind's from another sender: dropped, counted, and
    /// logged at most once a minute.
    private(set) var forgedSignals = 0
    private var forgedLoggedAt: MonotonicInstant?
    private var forgedSinceLogged = 0
    /// The services of holds served whenever the session bus is there.
    private let services: [SessionService]
    /// What the bus answered for each of their names ("served", "owned by …"), for status and doctor.
    private var nameStates: [String: String] = [:]
    /// The desktop portal that relays GTK's inhibitors to org.freedesktop.ScreenSaver, if one is installed.
    private let inhibitPortal = DesktopServices.findInhibitPortal()
    /// logind said our session is not the one in front (what the machine was told last).
    private var sessionInactive = false
    private var said: Set<String> = []
    private var retryDelay: [String: Millis] = [:]
    private var retryTimer: [String: RetryTimer] = [:]
    /// A bus's socket, watched for while the bus is not joined.
    private var socketWatch: [String: SocketWatch] = [:]
    /// The buses this agent has been connected to.
    private var everConnected: Set<String> = []
    /// Each bus's state in the user's words ("connected", "connecting", "not
    /// connected: why; what happens next"), for status and doctor.
    private var busState: [String: String] = [:]

    init(agent: DesktopAgent, settings: Settings) {
        self.agent = agent
        self.settings = settings
        services = Self.sessionServices.filter { settings.served.contains($0.source) }.map { $0.init(agent: agent) }
        callbacks = .allocate(capacity: 1)
        callbacks.initialize(to: xil_desktop_callbacks())
        callbacks.pointee.context = Unmanaged.passUnretained(self).toOpaque()
        installCallbacks()
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

    /// Starts connecting to one bus, waiting for nothing: `onReady` runs once the bus
    /// answers, `onLost` when it goes away or does not answer in time (the
    /// connection's `isReady` tells which). Nil (said once, tried again, see `failed`)
    /// when no connection can even start.
    private func open(_ which: String, onReady: @escaping () -> Void, onLost: @escaping (Int32) -> Void) -> BusConnection? {
        var err: Int32 = 0
        guard let bus = xil_bus_connect(which == "session" ? 1 : 0, &err) else {
            failed(which, abs(err))
            return nil
        }
        busState[which] = "connecting"
        let connection = BusConnection(connecting: bus, name: "\(which) bus", onReady: { [unowned self] in
            retryDelay[which] = nil
            retryTimer.removeValue(forKey: which)?.cancel()
            socketWatch.removeValue(forKey: which)?.cancel()
            everConnected.insert(which)
            busState[which] = "connected"
            onReady()
        }, onLost: onLost)
        agent?.addSource(connection)
        return connection
    }

    private func connectSession() {
        guard session == nil else { return }
        session = open("session", onReady: { [unowned self] in sessionReady() }, onLost: { [unowned self] code in
            let wasReady = session?.isReady == true
            session = nil
            guard wasReady else {
                for source in servedSources { agent?.perform(.sourceReady(source)) }
                return failed("session", code)
            }
            sayOnce("lost-session", .warning, "lost the session bus (\(String(cString: strerror(code)))): \(servedNames) \(services.count == 1 ? "is" : "are") not served until it is back; locking goes on")
            // Their callers can no longer end their inhibitors: they end now (fail closed).
            nameStates = [:]
            for service in services {
                for object in [service.bus] + service.also { object.forget() }
                agent?.request(.sourceLost(type(of: service).source))
            }
            failed("session", code, lost: true)
        })
        if session == nil { for source in servedSources { agent?.perform(.sourceReady(source)) } }
    }

    private var servedSources: [InhibitorSource] { services.map { type(of: $0).source } }
    private var servedNames: String { services.isEmpty ? "no service" : services.map(\.bus.name).joined(separator: ", ") }

    private func sessionReady() {
        guard let session else { return }
        for service in services {
            for object in service.also where object.serve(on: session.bus) < 0 {
                Log.write(.warning, "cannot serve \(object.interface) of \(service.bus.name)")
            }
            let r = service.bus.serve(on: session.bus)
            if r < 0 { served(service, service.bus.name, r, owner: 0) }
        }
    }

    private func installServed(_ service: SessionService) {
        service.bus.onServed = { [unowned self, unowned service] name, result, owner in served(service, name, result, owner: owner) }
    }

    /// The bus's answer to our asking for a service's name.
    private func served(_ service: SessionService, _ name: String, _ r: Int32, owner: UInt32) {
        let source = type(of: service).source
        if r == 1 {
            nameStates[name] = "served"
            Log.write(.info, "serving \(name) on the session bus (\(source.row.what) can hold the lock off)")
            // Clients take their inhibitors again once they see the name appear: the
            // first stage gives them a moment (within the start's wait).
            agent?.perform(.sourceReady(source, settle: .seconds(1)))
            return
        }
        // Never fought over: the desktop's own service (light-locker, xfce4-power-manager) keeps it.
        nameStates[name] = r == 0
            ? "owned by another program (pid \(owner), \(processName(pid_t(owner)))): its inhibitors are not seen by xidlelock"
            : "cannot be served: \(String(cString: strerror(-r)))"
        Log.write(.warning, "\(name) is \(nameStates[name] ?? "")")
        agent?.perform(.sourceReady(source))
    }

    private func connectSystem() {
        guard system == nil else { return }
        system = open("system", onReady: { [unowned self] in systemReady() }, onLost: { [unowned self] code in
            let wasReady = system?.isReady == true
            system = nil
            sleepDelayAsked = false
            guard wasReady else {
                agent?.perform(.sourceReady(.logind))
                return failed("system", code)
            }
            sessionPath = nil
            releaseSleepDelay()
            sleepPending = false
            sayOnce("lost-system", .warning, "lost the system bus (\(String(cString: strerror(code)))): no lock before sleep until it is back; locking goes on")
            // What logind held off can no longer be seen to end: it ends now (fail closed).
            agent?.request(.sourceLost(.logind))
            // No UPower: the times on AC.
            if settings.followPower { agent?.perform(.powerSource(onBattery: false)) }
            if sessionInactive {
                Log.write(.info, "without logind the session counts as active")
                sessionActive(true)
            }
            failed("system", code, lost: true)
        })
        if system == nil { agent?.perform(.sourceReady(.logind)) }
    }

    /// Everything is asked without waiting; the answers come as the bus's messages.
    private func systemReady() {
        guard let system else { return }
        let bus = system.bus
        if settings.followPower {
            let r = xil_upower_watch(bus, callbacks)
            if r < 0 { Log.write(.warning, "cannot follow UPower: \(String(cString: strerror(-r))): the times on AC are in force") }
        }
        guard settings.useLogind else { return }
        // The rest once the bus says who owns logind's name (logindOwnerChanged).
        let r = xil_logind_watch(bus, callbacks)
        if r < 0 {
            Log.write(.warning, "cannot watch logind: \(String(cString: strerror(-r)))")
            agent?.perform(.sourceReady(.logind))
        }
    }

    /// logind is there (at the connection, or started later on the bus, or started
    /// again: its state is new), or gone.
    fileprivate func logindOwnerChanged(owned: Bool) {
        guard let system, system.isReady else { return }
        // What the old owner held is not the new one's: its sleep delay, its session's matches.
        releaseSleepDelay()
        sleepDelayAsked = false
        sleepPending = false
        sessionPath = nil
        guard owned else {
            // What logind held off can no longer be seen to end: it ends now (fail closed).
            agent?.request(.sourceLost(.logind))
            if sessionInactive {
                Log.write(.info, "without logind the session counts as active")
                sessionActive(true)
            }
            agent?.perform(.sourceReady(.logind))
            return
        }
        let bus = system.bus
        if xil_logind_read_delay_max(bus, callbacks) < 0 { delayLimit = .seconds(5) }
        if settings.lockBeforeSleep { takeSleepDelay() }
        let id = getenv("XDG_SESSION_ID").map { String(cString: $0) }
        let r = xil_logind_find_session(bus, callbacks, id)
        if r < 0 { sessionFound(nil, whyNot: String(cString: strerror(-r))) }
        // Its answer is logind's report for the start's wait.
        listedIdleInhibitors = []
        if xil_logind_list_idle_inhibitors(bus) < 0 { agent?.perform(.sourceReady(.logind)) }
    }

    fileprivate func sessionFound(_ path: String?, whyNot: String) {
        guard let system else { return }
        guard let path else {
            sessionPath = nil
            let id = getenv("XDG_SESSION_ID").map { "XDG_SESSION_ID=\(String(cString: $0))" }
            sayOnce("no-session", .warning, "no logind session found (\(id ?? "no XDG_SESSION_ID, no display session of this user"): \(ClientText.sanitized(whyNot, maxBytes: 160))): no lock-session, no hints")
            return
        }
        let r = xil_logind_watch_session(system.bus, path)
        if r < 0 {
            Log.write(.warning, "cannot watch the logind session \(ClientText.sanitized(path, maxBytes: 200)): \(String(cString: strerror(-r)))")
            return
        }
        sessionPath = path
    }

    /// The session's signals are matched: from now on it is followed.
    fileprivate func sessionWatched(error: Int32) {
        guard let system, let sessionPath else { return }
        if error < 0 { Log.write(.warning, "cannot watch the logind session: \(String(cString: strerror(-error)))") }
        Log.write(.info, "logind session: \(sessionPath)")
        // Both ways: a session left inactive before a reconnection may be active now.
        _ = xil_logind_read_session_active(system.bus)
        // What the machine told logind while it could not be told (a lock made at
        // start, before the session was known; a reconnection).
        if let hints = agent?.hints {
            if hints.locked { hint(XIL_LOCKED_HINT, true) }
            if hints.idle { hint(XIL_IDLE_HINT, true) }
        }
    }

    /// A bus that could not be joined (`err`: an errno; ETIMEDOUT from a handshake
    /// not done in time) or was lost (said already): said once. The bus is joined
    /// when its socket appears (inotify, no timer), and, where its socket may be there
    /// and answer later (refused, timed out, lost), tried again after 5 s, doubling
    /// to 5 min. A bus with no socket wakes the agent for nothing.
    private func failed(_ which: String, _ err: Int32, lost: Bool = false) {
        let why = err == ETIMEDOUT && !lost
            ? "it did not answer within \(BusConnection.handshakeLimit)" : String(cString: strerror(err))
        let socket = which == "session" ? BusAddress.sessionSocket(SocketPath.environment) : BusAddress.systemSocket(SocketPath.environment)
        if socketWatch[which] == nil, let socket {
            socketWatch[which] = SocketWatch(socket) { [unowned self] in
                Log.debug("\(socket) appeared: joining the \(which) bus")
                retryTimer.removeValue(forKey: which)?.cancel()
                // A socket just made may not listen yet (bind comes before listen): the
                // first retries are quick.
                retryDelay[which] = .ms(50)
                connect(which)
            }
            if let watch = socketWatch[which] { agent?.addSource(watch) }
        }
        let watching = socketWatch[which] != nil
        let noSocket = [ENOENT, ENOMEDIUM].contains(err)
        // Without a watch, a bus that was there is tried again anyway (its directory
        // may come back); one never seen and with no socket is not.
        let retrying = !noSocket || (!watching && everConnected.contains(which))
        let next = retrying ? "trying again" : watching ? "joined when \(socket ?? "its socket") appears" : "restart the agent once the bus exists"
        busState[which] = "not connected: \(why); \(next)"
        if lost {
            said.insert("no-\(which)")
        } else {
            sayOnce("no-\(which)", .warning, "no \(which) bus (\(why)): " + (which == "session"
                ? "\(servedNames) \(services.count == 1 ? "is" : "are") not served" : "no lock before sleep, no lock-session")
                + "; locking goes on, \(next)")
        }
        guard retrying, retryTimer[which] == nil else { return }
        let delay = retryDelay[which].map { Swift.min($0 + $0, .minutes(5)) } ?? .seconds(5)
        retryDelay[which] = delay
        let timer = RetryTimer(at: SystemClock.now().monotonic + delay) { [unowned self] in
            retryTimer[which] = nil
            connect(which)
        }
        retryTimer[which] = timer
        agent?.addSource(timer)
    }

    private func connect(_ which: String) {
        if which == "session" { connectSession() } else { connectSystem() }
    }

    private func sayOnce(_ key: String, _ level: LogLevel, _ message: String) {
        if said.insert(key).inserted { Log.write(level, message) }
    }

    // MARK: Sleep

    private func takeSleepDelay() {
        guard let system, system.isReady, sleepDelay < 0, !sleepDelayAsked else { return }
        let r = xil_logind_take_sleep_delay(system.bus, callbacks, "xidlelock", "lock the screen before sleep")
        if r < 0 { sleepDelayTaken(r) } else { sleepDelayAsked = true }
    }

    /// logind's answer: the delay inhibitor's descriptor, or why not.
    fileprivate func sleepDelayTaken(_ fd: Int32) {
        sleepDelayAsked = false
        guard fd >= 0 else {
            Log.write(.warning, "logind refused a sleep delay inhibitor (\(String(cString: strerror(-fd)))): the screen is locked after resume instead of before sleep")
            return
        }
        // One at a time: a second would hold the sleep off after the first is let go.
        guard sleepDelay < 0 else {
            close(fd)
            return
        }
        sleepDelay = fd
    }

    private func releaseSleepDelay() {
        if sleepDelay >= 0 { close(sleepDelay) }
        sleepDelay = -1
    }

    /// The delay descriptor for a locker that knows the protocol (XSS_SLEEP_LOCK_FD),
    /// only while the system prepares to sleep.
    var sleepDelayForLocker: Int32? { sleepPending && sleepDelay >= 0 ? sleepDelay : nil }

    // MARK: What the agent tells the desktop

    func carryOut(_ action: Action) {
        switch action {
        case .releaseSleepDelay:
            if sleepDelay >= 0 { Log.debug("releasing the sleep delay") }
            releaseSleepDelay()
        case .setLockedHint(let locked):
            hint(XIL_LOCKED_HINT, locked)
        case .setIdleHint(let idle):
            hint(XIL_IDLE_HINT, idle)
        default:
            break
        }
    }

    private func hint(_ which: xil_hint, _ value: Bool) {
        guard let system, let sessionPath else { return }
        _ = xil_logind_session_hint(system.bus, callbacks, sessionPath, which, value ? 1 : 0)
    }

    /// Announcements the session bus's services tell their clients.
    func announce(_ announcement: Announcement) {
        for service in services { service.announce(announcement) }
    }

    /// For status.
    var statusFields: [(String, JSONValue)] {
        let systemReady = system?.isReady == true
        return [
            ("session_bus", .bool(session?.isReady == true)),
            ("session_bus_state", .string(busState["session"] ?? "not used")),
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
        ] + [
            ("system_bus", .bool(systemReady)),
            ("system_bus_state", .string(busState["system"] ?? "not used")),
            ("logind_session", sessionPath.map { .string($0) } ?? .null),
            ("sleep_delay_held", .bool(sleepDelay >= 0)),
            ("logind_owner", !systemReady || !settings.useLogind ? .null : .string(String(cString: xil_logind_owner()))),
            ("upower_owner", !systemReady || !settings.followPower ? .null : .string(String(cString: xil_upower_owner()))),
            ("forged_signals", .number(Double(forgedSignals))),
        ]
    }

    // MARK: What the desktop tells the agent

    /// A signal that claimed to be logind's (or UPower's) came from someone else: any
    /// local user can send one straight to this connection. Dropped; logged at most
    /// once a minute.
    fileprivate func forged(sender: String, what: String) {
        forgedSignals += 1
        forgedSinceLogged += 1
        let now = SystemClock.now().monotonic
        if let last = forgedLoggedAt, now - last < .minutes(1) { return }
        forgedLoggedAt = now
        Log.write(.warning, "dropped \(forgedSinceLogged) signal\(forgedSinceLogged == 1 ? "" : "s") claiming to be logind's or UPower's (the last: \(ClientText.sanitized(what, maxBytes: 64)) from \(ClientText.sanitized(sender, maxBytes: 64)); logind is \(String(cString: xil_logind_owner())), UPower \(String(cString: xil_upower_owner()))): another local program may be trying to stop the lock (said at most once a minute; status counts them)")
        forgedSinceLogged = 0
    }

    fileprivate func prepareForSleep(_ starting: Bool) {
        if starting {
            sleepPending = true
            // Let go a little before logind stops waiting, so that the release is ours.
            agent?.perform(.prepareForSleep(delayLimit: Swift.max(delayLimit - .ms(500), .ms(500))))
        } else {
            sleepPending = false
            agent?.perform(.resumedFromSleep)
            if settings.lockBeforeSleep { takeSleepDelay() }
        }
    }

    fileprivate func sessionLock(_ lock: Bool) {
        if lock {
            agent?.perform(.lockRequest(from: "logind (loginctl lock-session, or the lid)"))
        } else {
            // Unlocking is the locker's job alone: a bus message never opens the screen.
            Log.write(.info, "logind asked to unlock the session: not honoured (only the locker unlocks)")
        }
    }

    fileprivate func sessionActive(_ active: Bool) {
        sessionInactive = !active
        agent?.perform(.sessionActive(active))
    }

    fileprivate func idleInhibitor(who: String, why: String, uid: UInt32, pid: UInt32) {
        // Bounded: a listing is logind's, but its entries are anybody's words.
        guard listedIdleInhibitors.count < HoldLimits.total else { return }
        listedIdleInhibitors.append(HoldClaim(key: "\(who)|\(why)|\(uid)|\(pid)",
                                              who: ClientText.sanitized("\(who) (pid \(pid), uid \(uid), logind)"),
                                              why: ClientText.sanitized(why), uid: uid))
    }

    /// Whose inhibitors count (`--logind-inhibitors`) is the machine's to decide.
    fileprivate func idleInhibitorsListed(error: Int32) {
        defer { listedIdleInhibitors = [] }
        if error < 0 {
            Log.debug("cannot list logind's inhibitors: \(String(cString: strerror(-error)))")
            agent?.perform(.sourceReady(.logind))
            return
        }
        agent?.request(.holdsNow(HoldReport(HoldOwner(.logind), listedIdleInhibitors)))
    }

    private func installCallbacks() {
        callbacks.pointee.prepare_for_sleep = { context, starting in
            Unmanaged<DesktopServices>.fromOpaque(context!).takeUnretainedValue().prepareForSleep(starting != 0)
        }
        callbacks.pointee.session_lock = { context, lock in
            Unmanaged<DesktopServices>.fromOpaque(context!).takeUnretainedValue().sessionLock(lock != 0)
        }
        callbacks.pointee.session_active = { context, active in
            Unmanaged<DesktopServices>.fromOpaque(context!).takeUnretainedValue().sessionActive(active != 0)
        }
        callbacks.pointee.idle_inhibitor = { context, who, why, uid, pid in
            Unmanaged<DesktopServices>.fromOpaque(context!).takeUnretainedValue()
                .idleInhibitor(who: String(cString: who!), why: String(cString: why!), uid: uid, pid: pid)
        }
        callbacks.pointee.idle_inhibitors_listed = { context, error in
            Unmanaged<DesktopServices>.fromOpaque(context!).takeUnretainedValue().idleInhibitorsListed(error: error)
        }
        callbacks.pointee.forged = { context, sender, what in
            Unmanaged<DesktopServices>.fromOpaque(context!).takeUnretainedValue().forged(sender: String(cString: sender!), what: String(cString: what!))
        }
        callbacks.pointee.on_battery = { context, onBattery in
            Unmanaged<DesktopServices>.fromOpaque(context!).takeUnretainedValue().agent?.perform(.powerSource(onBattery: onBattery != 0))
        }
        callbacks.pointee.session_found = { context, path, whyNot in
            Unmanaged<DesktopServices>.fromOpaque(context!).takeUnretainedValue()
                .sessionFound(path.map { String(cString: $0) }, whyNot: whyNot.map { String(cString: $0) } ?? "")
        }
        callbacks.pointee.session_watched = { context, error in
            Unmanaged<DesktopServices>.fromOpaque(context!).takeUnretainedValue().sessionWatched(error: error)
        }
        callbacks.pointee.sleep_delay_taken = { context, fd in
            Unmanaged<DesktopServices>.fromOpaque(context!).takeUnretainedValue().sleepDelayTaken(fd)
        }
        callbacks.pointee.delay_limit = { context, usec in
            Unmanaged<DesktopServices>.fromOpaque(context!).takeUnretainedValue().delayLimit = Millis(Int64(clamping: usec / 1000))
        }
        callbacks.pointee.logind_owner = { context, owned in
            Unmanaged<DesktopServices>.fromOpaque(context!).takeUnretainedValue().logindOwnerChanged(owned: owned != 0)
        }
        callbacks.pointee.log = { _, level, message in Log.fromLibrary(level, message) }
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

extension String {
    /// The text of a NUL-terminated buffer a C function filled in.
    init(nulTerminated buffer: [CChar]) {
        self.init(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
