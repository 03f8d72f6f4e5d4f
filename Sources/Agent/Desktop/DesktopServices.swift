import CBus
import Glibc
import IdleCore

/// What the desktop services need from the agent.
protocol DesktopAgent: AnyObject {
    func perform(_ event: Event)
    /// Adds an inhibitor from a bus; returns its id (also the ScreenSaver cookie).
    func addInhibitor(source: InhibitorSource, who: String, why: String) -> Int
    func removeInhibitor(id: Int)
    /// The locker holds the screen (org.freedesktop.ScreenSaver's "active").
    var screenCovered: Bool { get }
    var lockedFor: Millis? { get }
    var idleTime: Millis { get }
    func addSource(_ source: EventSource)
}

/// Which logind idle inhibitors hold the stages off.
public enum LogindInhibitorPolicy: String, Sendable, CaseIterable {
    /// This user's own (a shared workstation must not be kept open by a system
    /// service or another user); the others are shown, not honoured.
    case own
    case all
    case none
}

/// The desktop's buses: org.freedesktop.ScreenSaver served on the session bus (for
/// browsers and players), and logind on the system bus (lock before sleep, the
/// session's Lock signal, its hints, idle inhibitors). Either bus may be missing
/// or go away: the agent goes on locking, says so once, and reconnects.
final class DesktopServices {
    struct Settings {
        var serveScreenSaver = true
        var useLogind = true
        var lockBeforeSleep = true
        var logindInhibitors = LogindInhibitorPolicy.own
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
    private(set) var sleepPending = false
    private var delayLimit = Millis.seconds(5)
    /// ScreenSaver cookies (inhibitor ids) that are ours to end.
    private var screenSaverInhibitors: Set<Int> = []
    /// logind idle inhibitors honoured, by "who|why|uid|pid", and their inhibitor ids.
    private var logindInhibitors: [String: Int] = [:]
    /// Idle inhibitors of other users or services: shown, not honoured.
    private(set) var ignoredLogindInhibitors: [(who: String, why: String, uid: UInt32, pid: UInt32)] = []
    private var ownsScreenSaverName = false
    /// What ActiveChanged last said.
    private var screenSaverActive = false
    /// logind said our session is not the one in front (what the machine was told last).
    private var sessionInactive = false
    private var said: Set<String> = []
    private var retryDelay: [String: Millis] = [:]
    /// The buses this agent has been connected to.
    private var everConnected: Set<String> = []

    init(agent: DesktopAgent, settings: Settings) {
        self.agent = agent
        self.settings = settings
        callbacks = .allocate(capacity: 1)
        callbacks.initialize(to: xil_desktop_callbacks())
        callbacks.pointee.context = Unmanaged.passUnretained(self).toOpaque()
        installCallbacks()
    }

    /// Loads libsystemd and connects both buses. Without libsystemd the agent runs on
    /// without the buses.
    func start() {
        var error = [CChar](repeating: 0, count: 256)
        guard xil_bus_load(&error, error.count) == 0 else {
            Log.write(.warning, "D-Bus is not available (\(String(nulTerminated: error))): no lock before sleep, no org.freedesktop.ScreenSaver; locking goes on")
            return
        }
        if settings.serveScreenSaver { connectSession() }
        if settings.useLogind { connectSystem() }
    }

    // MARK: Connections

    /// Opens one bus as a source; `onLost` runs when it goes away. Nil (retried or
    /// said once, see `lost`) when it cannot be opened.
    private func open(_ which: String, onLost: @escaping (Int32) -> Void) -> BusConnection? {
        var err: Int32 = 0
        guard let bus = xil_bus_open(which == "session" ? 1 : 0, &err) else {
            lost(which, err)
            return nil
        }
        retryDelay[which] = nil
        everConnected.insert(which)
        return BusConnection(bus: bus, name: "\(which) bus", onLost: onLost)
    }

    private func connectSession() {
        guard let connection = open("session", onLost: { [unowned self] code in
            session = nil
            ownsScreenSaverName = false
            sayOnce("lost-session", .warning, "lost the session bus (\(String(cString: strerror(code)))): org.freedesktop.ScreenSaver is not served until it is back; locking goes on")
            // Its callers can no longer end their inhibitors: they end now (fail closed).
            endScreenSaverInhibitors()
            lost("session", 0)
        }) else { return }
        session = connection
        var owner: UInt32 = 0
        let r = xil_screensaver_serve(connection.bus, callbacks, &owner)
        if r == 1 {
            ownsScreenSaverName = true
            Log.write(.info, "serving org.freedesktop.ScreenSaver on the session bus (browsers and players can hold the lock off)")
        } else if r == 0 {
            Log.write(.warning, "org.freedesktop.ScreenSaver is owned by another program (pid \(owner), \(processName(pid_t(owner)))): its inhibitors are not seen by xidlelock")
        } else {
            Log.write(.warning, "cannot serve org.freedesktop.ScreenSaver: \(String(cString: strerror(-r)))")
        }
        agent?.addSource(connection)
    }

    private func connectSystem() {
        guard let connection = open("system", onLost: { [unowned self] code in
            system = nil
            releaseSleepDelay()
            sleepPending = false
            sayOnce("lost-system", .warning, "lost the system bus (\(String(cString: strerror(code)))): no lock before sleep until it is back; locking goes on")
            // What logind held off can no longer be seen to end: it ends now (fail closed).
            endLogindHolds()
            lost("system", 0)
        }) else { return }
        system = connection
        let bus = connection.bus
        let id = getenv("XDG_SESSION_ID").map { String(cString: $0) }
        var path = [CChar](repeating: 0, count: 256)
        let found = xil_logind_session_path(bus, id, &path, path.count)
        if found == 0 {
            sessionPath = String(nulTerminated: path)
            Log.write(.info, "logind session: \(sessionPath!)")
        } else {
            sessionPath = nil
            sayOnce("no-session", .warning, "no logind session found (\(id.map { "XDG_SESSION_ID=\($0)" } ?? "no XDG_SESSION_ID, no display session of this user")): no lock-session, no hints")
        }
        let r = xil_logind_watch(bus, callbacks, sessionPath)
        if r < 0 { Log.write(.warning, "cannot watch logind: \(String(cString: strerror(-r)))") }
        delayLimit = Millis(Int64(xil_logind_delay_max_usec(bus) / 1000))
        if settings.lockBeforeSleep { takeSleepDelay() }
        // Both ways: a session left inactive before a reconnection may be active now.
        if let sessionPath {
            let active = xil_logind_session_active(bus, sessionPath)
            if active >= 0 { sessionActive(active != 0) }
        }
        refreshIdleInhibitors()
        agent?.addSource(connection)
    }

    /// The loss of the session bus: its inhibitors end with it.
    private func endScreenSaverInhibitors() {
        for id in screenSaverInhibitors.sorted() {
            xil_screensaver_forget(UInt32(truncatingIfNeeded: id))
            Log.write(.info, "ScreenSaver inhibitor \(id) ends with the session bus")
            agent?.removeInhibitor(id: id)
        }
        screenSaverInhibitors = []
    }

    /// The loss of the system bus: logind's idle inhibitors and the inactive session
    /// no longer hold the stages off.
    private func endLogindHolds() {
        for (_, id) in logindInhibitors.sorted(by: { $0.value < $1.value }) { agent?.removeInhibitor(id: id) }
        logindInhibitors = [:]
        ignoredLogindInhibitors = []
        if sessionInactive {
            Log.write(.info, "without logind the session counts as active")
            sessionActive(true)
        }
    }

    /// Tries again later (5 s, doubling to 5 min). A failure to connect is logged once
    /// (`err` 0: the loss was logged already).
    private func lost(_ which: String, _ err: Int32) {
        // A bus that was never there and has no address (a bare startx) is not polled
        // for: that would wake the agent every few minutes for nothing. One that was
        // there, or whose socket exists, is tried again with a growing delay.
        let absent = !everConnected.contains(which) && [ENOENT, ENOMEDIUM].contains(abs(err))
        if err == 0 {
            said.insert("no-\(which)")
        } else {
            sayOnce("no-\(which)", .warning, "no \(which) bus (\(String(cString: strerror(abs(err))))): " + (which == "session"
                ? "org.freedesktop.ScreenSaver is not served" : "no lock before sleep, no lock-session")
                + (absent ? "; locking goes on (restart the agent once the bus exists)" : "; locking goes on, retrying later"))
        }
        if absent { return }
        let delay = retryDelay[which].map { Swift.min($0 + $0, .minutes(5)) } ?? .seconds(5)
        retryDelay[which] = delay
        agent?.addSource(RetryTimer(at: SystemClock.now().monotonic + delay) { [unowned self] in
            if which == "session" { connectSession() } else { connectSystem() }
        })
    }

    private func sayOnce(_ key: String, _ level: LogLevel, _ message: String) {
        if said.insert(key).inserted { Log.write(level, message) }
    }

    // MARK: Sleep

    private func takeSleepDelay() {
        guard let system, sleepDelay < 0 else { return }
        let fd = xil_logind_sleep_delay(system.bus, "xidlelock", "lock the screen before sleep")
        if fd >= 0 {
            sleepDelay = fd
        } else {
            Log.write(.warning, "logind refused a sleep delay inhibitor (\(String(cString: strerror(-fd)))): the screen is locked after resume instead of before sleep")
        }
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
            hint("SetLockedHint", locked)
        case .setIdleHint(let idle):
            hint("SetIdleHint", idle)
        default:
            break
        }
    }

    private func hint(_ method: String, _ value: Bool) {
        guard let system, let sessionPath else { return }
        _ = xil_logind_session_hint(system.bus, callbacks, sessionPath, method, value ? 1 : 0)
    }

    /// Announcements the session bus hears of: ActiveChanged when the screen is
    /// covered or unlocked.
    func announce(_ announcement: Announcement) {
        guard let session, ownsScreenSaverName else { return }
        let active: Bool
        switch announcement {
        case .locked: active = true
        // A covering locker that fails leaves the screen open: no longer active.
        case .unlocked, .lockerFailed: active = false
        default: return
        }
        guard active != screenSaverActive else { return }
        screenSaverActive = active
        xil_screensaver_active_changed(session.bus, active ? 1 : 0)
    }

    /// For status.
    var statusFields: [(String, JSONValue)] {
        [
            ("session_bus", .bool(session != nil)),
            ("screensaver_service", .bool(ownsScreenSaverName)),
            ("system_bus", .bool(system != nil)),
            ("logind_session", sessionPath.map { .string($0) } ?? .null),
            ("sleep_delay_held", .bool(sleepDelay >= 0)),
            ("ignored_idle_inhibitors", .array(ignoredLogindInhibitors.map { i in
                .object([("who", .string(ClientText.sanitized(i.who))), ("why", .string(ClientText.sanitized(i.why))),
                         ("uid", .number(Double(i.uid))), ("pid", .number(Double(i.pid)))])
            })),
        ]
    }

    // MARK: What the desktop tells the agent

    fileprivate func inhibit(app: String, reason: String, sender: String, pid: UInt32) -> UInt32 {
        guard let agent else { return 0 }
        let name = processName(pid_t(pid))
        let who = ClientText.sanitized("\(app) (pid \(pid) \(name), \(sender))")
        let id = agent.addInhibitor(source: .dbus, who: who, why: ClientText.sanitized(reason))
        guard id > 0 else { return 0 }
        screenSaverInhibitors.insert(id)
        return UInt32(truncatingIfNeeded: id)
    }

    fileprivate func uninhibit(cookie: UInt32) -> Bool {
        let id = Int(cookie)
        guard screenSaverInhibitors.remove(id) != nil else { return false }
        agent?.removeInhibitor(id: id)
        return true
    }

    fileprivate func callerGone(cookie: UInt32) {
        let id = Int(cookie)
        guard screenSaverInhibitors.remove(id) != nil else { return }
        Log.write(.info, "the caller of ScreenSaver inhibitor \(id) left the bus: the inhibitor ends")
        agent?.removeInhibitor(id: id)
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

    fileprivate func blockInhibited(_ what: String) {
        refreshIdleInhibitors(hint: what)
    }

    /// Follows logind's idle inhibitors: ListInhibitors says who; the policy says whose count.
    private func refreshIdleInhibitors(hint: String? = nil) {
        guard let system, let agent else { return }
        final class Found {
            var entries: [(who: String, why: String, uid: UInt32, pid: UInt32)] = []
        }
        let found = Found()
        if hint == nil || hint!.split(separator: ":").contains("idle") {
            let r = xil_logind_idle_inhibitors(system.bus, { context, who, why, uid, pid in
                let found = Unmanaged<Found>.fromOpaque(context!).takeUnretainedValue()
                found.entries.append((String(cString: who!), String(cString: why!), uid, pid))
            }, Unmanaged.passUnretained(found).toOpaque())
            if r < 0 { Log.debug("cannot list logind's inhibitors: \(String(cString: strerror(-r)))") }
        }
        let me = getuid()
        var honoured: [String: (who: String, why: String, uid: UInt32, pid: UInt32)] = [:]
        var ignored: [(who: String, why: String, uid: UInt32, pid: UInt32)] = []
        for entry in found.entries {
            let counts = switch settings.logindInhibitors {
            case .all: true
            case .own: entry.uid == me
            case .none: false
            }
            if counts {
                honoured["\(entry.who)|\(entry.why)|\(entry.uid)|\(entry.pid)"] = entry
            } else {
                ignored.append(entry)
            }
        }
        for (key, id) in logindInhibitors where honoured[key] == nil {
            logindInhibitors[key] = nil
            agent.removeInhibitor(id: id)
        }
        for (key, entry) in honoured where logindInhibitors[key] == nil {
            let who = ClientText.sanitized("\(entry.who) (pid \(entry.pid), uid \(entry.uid), logind)")
            logindInhibitors[key] = agent.addInhibitor(source: .logind, who: who, why: ClientText.sanitized(entry.why))
        }
        for entry in ignored where !ignoredLogindInhibitors.contains(where: { $0 == entry }) {
            Log.write(.warning, "logind idle inhibitor of uid \(entry.uid) (\(ClientText.sanitized(entry.who)), pid \(entry.pid): \(ClientText.sanitized(entry.why))) is not honoured (--logind-inhibitors \(settings.logindInhibitors.rawValue))")
        }
        ignoredLogindInhibitors = ignored
    }

    private func installCallbacks() {
        callbacks.pointee.inhibit = { context, app, reason, sender, pid in
            Unmanaged<DesktopServices>.fromOpaque(context!).takeUnretainedValue()
                .inhibit(app: String(cString: app!), reason: String(cString: reason!), sender: String(cString: sender!), pid: pid)
        }
        callbacks.pointee.uninhibit = { context, cookie in
            Unmanaged<DesktopServices>.fromOpaque(context!).takeUnretainedValue().uninhibit(cookie: cookie) ? 0 : -1
        }
        callbacks.pointee.caller_gone = { context, cookie in
            Unmanaged<DesktopServices>.fromOpaque(context!).takeUnretainedValue().callerGone(cookie: cookie)
        }
        callbacks.pointee.simulate_activity = { context in
            Unmanaged<DesktopServices>.fromOpaque(context!).takeUnretainedValue().agent?.perform(.reset)
        }
        callbacks.pointee.lock = { context, who in
            Unmanaged<DesktopServices>.fromOpaque(context!).takeUnretainedValue().agent?.perform(.lockRequest(from: String(cString: who!)))
        }
        callbacks.pointee.get_active = { context in
            Unmanaged<DesktopServices>.fromOpaque(context!).takeUnretainedValue().agent?.screenCovered == true ? 1 : 0
        }
        callbacks.pointee.active_seconds = { context in
            let lockedFor = Unmanaged<DesktopServices>.fromOpaque(context!).takeUnretainedValue().agent?.lockedFor ?? .zero
            return UInt32(clamping: lockedFor.value / 1000)
        }
        callbacks.pointee.idle_seconds = { context in
            let idle = Unmanaged<DesktopServices>.fromOpaque(context!).takeUnretainedValue().agent?.idleTime ?? .zero
            return UInt32(clamping: idle.value / 1000)
        }
        callbacks.pointee.prepare_for_sleep = { context, starting in
            Unmanaged<DesktopServices>.fromOpaque(context!).takeUnretainedValue().prepareForSleep(starting != 0)
        }
        callbacks.pointee.session_lock = { context, lock in
            Unmanaged<DesktopServices>.fromOpaque(context!).takeUnretainedValue().sessionLock(lock != 0)
        }
        callbacks.pointee.session_active = { context, active in
            Unmanaged<DesktopServices>.fromOpaque(context!).takeUnretainedValue().sessionActive(active != 0)
        }
        callbacks.pointee.block_inhibited = { context, what in
            Unmanaged<DesktopServices>.fromOpaque(context!).takeUnretainedValue().blockInhibited(String(cString: what!))
        }
        callbacks.pointee.log = { _, level, message in Log.fromLibrary(level, message) }
    }
}

extension String {
    /// The text of a NUL-terminated buffer a C function filled in.
    init(nulTerminated buffer: [CChar]) {
        self.init(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
