import CBus
import Glibc
import IdleCore
import Platform

/// logind and UPower, followed on the system bus that `DesktopServices` joins: lock
/// before sleep (a delay inhibitor), the session's Lock signal, Active and hints,
/// logind's idle inhibitors, and UPower's OnBattery. Nothing here waits for an
/// answer; only what the current owner of logind's (or UPower's) name sends counts.
final class LogindLink {
    private weak var agent: DesktopAgent?
    private let settings: DesktopServices.Settings
    private var callbacks: UnsafeMutablePointer<xil_desktop_callbacks>
    /// The system bus, while joined.
    private var bus: OpaquePointer? {
        didSet { questions.bus = bus }
    }
    /// A caller's session asked of logind without waiting (`askSession`).
    private let questions = LogindQuestions()
    /// Our session's object path on logind.
    private(set) var sessionPath: String?
    /// The sleep delay inhibitor's descriptor, while held.
    private(set) var sleepDelay: Int32 = -1
    /// Asked for, not answered yet.
    private var sleepDelayAsked = false
    private(set) var sleepPending = false
    private var delayLimit = Millis.seconds(5)
    /// logind's idle inhibitors as the answer to ListInhibitors tells them, while it
    /// comes, each with its holder's pid.
    private var listedIdleInhibitors: [(claim: HoldClaim, pid: UInt32)] = []
    /// The listing whose holders' sessions are asked of logind: an answer of an
    /// earlier one (replaced, or reported already) reports nothing.
    private var listing = 0
    /// Signals that claimed to be logind's from another sender: dropped, counted, and
    /// logged at most once a minute.
    private(set) var forgedSignals = 0
    private var forgedLoggedAt: MonotonicInstant?
    private var forgedSinceLogged = 0
    /// logind said our session is not the one in front (what the machine was told last).
    private var sessionInactive = false
    private var said = SaidOnce()

    init(agent: DesktopAgent, settings: DesktopServices.Settings) {
        self.agent = agent
        self.settings = settings
        callbacks = .allocate(capacity: 1)
        callbacks.initialize(to: xil_desktop_callbacks())
        callbacks.pointee.context = Unmanaged.passUnretained(self).toOpaque()
        installCallbacks()
    }

    /// The system bus answered. Everything is asked without waiting; the answers come as the bus's messages.
    func joined(_ bus: OpaquePointer) {
        self.bus = bus
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

    /// The system bus went away (or, `wasJoined` false, never answered).
    func left(wasJoined: Bool) {
        bus = nil
        sleepDelayAsked = false
        guard wasJoined else {
            agent?.perform(.sourceReady(.logind))
            return
        }
        sessionPath = nil
        releaseSleepDelay()
        sleepPending = false
        // What logind held off can no longer be seen to end: it ends now (fail closed).
        agent?.request(.sourceLost(.logind))
        // No UPower: the times on AC.
        if settings.followPower { agent?.perform(.powerSource(onBattery: false)) }
        if sessionInactive {
            Log.write(.info, "without logind the session counts as active")
            sessionActive(true)
        }
    }

    /// logind is there (at the connection, or started later on the bus, or started
    /// again: its state is new), or gone.
    fileprivate func logindOwnerChanged(owned: Bool) {
        guard let bus else { return }
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
        if xil_logind_read_delay_max(bus, callbacks) < 0 { delayLimit = .seconds(5) }
        if settings.lockBeforeSleep { takeSleepDelay() }
        let id = settings.sessionID ?? getenv("XDG_SESSION_ID").map { String(cString: $0) }
        let r = xil_logind_find_session(bus, callbacks, id)
        if r < 0 { sessionFound(nil, whyNot: String(cString: strerror(-r))) }
        // Its answer is logind's report for the start's wait.
        listedIdleInhibitors = []
        if xil_logind_list_idle_inhibitors(bus) < 0 { agent?.perform(.sourceReady(.logind)) }
    }

    fileprivate func sessionFound(_ path: String?, whyNot: String) {
        guard let bus else { return }
        guard let path else {
            sessionPath = nil
            let id = getenv("XDG_SESSION_ID").map { "XDG_SESSION_ID=\(String(cString: $0))" }
            said.say("no-session", .warning, "no logind session found (\(id ?? "no XDG_SESSION_ID, no display session of this user"): \(ClientText.sanitized(whyNot, maxBytes: 160))): no lock-session, no hints")
            return
        }
        let r = xil_logind_watch_session(bus, path)
        if r < 0 {
            Log.write(.warning, "cannot watch the logind session \(ClientText.sanitized(path, maxBytes: 200)): \(String(cString: strerror(-r)))")
            return
        }
        sessionPath = path
    }

    /// The session's signals are matched: from now on it is followed.
    fileprivate func sessionWatched(error: Int32) {
        guard let bus, let sessionPath else { return }
        if error < 0 { Log.write(.warning, "cannot watch the logind session: \(String(cString: strerror(-error)))") }
        Log.write(.info, "logind session: \(sessionPath)")
        // Both ways: a session left inactive before a reconnection may be active now.
        _ = xil_logind_read_session_active(bus)
        // What the machine told logind while it could not be told (a lock made at
        // start, before the session was known; a reconnection).
        if let hints = agent?.hints {
            if hints.locked { hint(XIL_LOCKED_HINT, true) }
            if hints.idle { hint(XIL_IDLE_HINT, true) }
        }
    }

    // MARK: Sleep

    private func takeSleepDelay() {
        guard let bus, sleepDelay < 0, !sleepDelayAsked else { return }
        let r = xil_logind_take_sleep_delay(bus, callbacks, "xidlelock", "lock the screen before sleep")
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

    // MARK: What the agent tells logind

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
        guard let bus, let sessionPath else { return }
        _ = xil_logind_session_hint(bus, callbacks, sessionPath, which, value ? 1 : 0)
    }

    /// logind's session of a process of this user (for one in no session, a user
    /// unit's, the user's display session), asked without waiting; false when logind
    /// cannot be asked now (no system bus, no logind, `--no-logind`).
    func askSession(ofProcess pid: UInt32, _ answer: @escaping (LogindQuestions.SessionAnswer) -> Void) -> Bool {
        guard bus != nil, settings.useLogind, sessionPath != nil else { return false }
        questions.session(ofProcess: pid_t(bitPattern: pid), uid: getuid(), answer)
        return true
    }

    func statusFields(systemReady: Bool) -> [(String, JSONValue)] {
        [
            ("logind_session", sessionPath.map { .string($0) } ?? .null),
            ("sleep_delay_held", .bool(sleepDelay >= 0)),
            ("logind_owner", !systemReady || !settings.useLogind ? .null : .string(String(cString: xil_logind_owner()))),
            ("upower_owner", !systemReady || !settings.followPower ? .null : .string(String(cString: xil_upower_owner()))),
            ("forged_signals", .number(Double(forgedSignals))),
        ]
    }

    // MARK: What logind and UPower tell the agent

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
        listedIdleInhibitors.append((HoldClaim(key: "\(who)|\(why)|\(uid)|\(pid)",
                                               who: ClientText.sanitized("\(who) (pid \(pid), uid \(uid), logind)"),
                                               why: ClientText.sanitized(why), uid: uid), pid))
    }

    /// Whose inhibitors count (`--logind-inhibitors`) is the machine's to decide. With
    /// one user's sessions told apart (HoldRouting), each of the user's inhibitors is
    /// reported with its holder's session, once logind has placed them all (a few
    /// milliseconds; a newer listing replaces one still waiting).
    fileprivate func idleInhibitorsListed(error: Int32) {
        let listed = listedIdleInhibitors
        listedIdleInhibitors = []
        listing &+= 1
        if error < 0 {
            Log.debug("cannot list logind's inhibitors: \(String(cString: strerror(-error)))")
            agent?.perform(.sourceReady(.logind))
            return
        }
        let own = listed.filter { $0.claim.uid == getuid() && $0.pid != 0 }
        guard let routing = agent?.holdRouting, !own.isEmpty else { return reportIdleInhibitors(listed, listing) }
        routing.keepProcesses(Set(own.map(\.pid)), for: "logind inhibitors")
        let this = listing
        for (_, pid) in own {
            _ = routing.session(ofProcess: pid) { [weak self] in self?.reportIdleInhibitors(listed, this) }
        }
        reportIdleInhibitors(listed, this)
    }

    /// Reports listing `number` once every holder of this user is placed.
    private func reportIdleInhibitors(_ listed: [(claim: HoldClaim, pid: UInt32)], _ number: Int) {
        guard number == listing else { return }
        var claims: [HoldClaim] = []
        for (claim, pid) in listed {
            guard let routing = agent?.holdRouting, claim.uid == getuid(), pid != 0 else {
                claims.append(claim)
                continue
            }
            // Each was asked above: logind's answer, or wait for it (at most one waiter
            // more per answer, so at most one per holder).
            guard let session = routing.session(ofProcess: pid, then: {}) else { return }
            var placed = claim
            placed.session = session
            // Placed elsewhere later (a pid reused): a new hold for the gate to judge.
            if let session { placed.key += "|\(session)" }
            claims.append(placed)
        }
        listing &+= 1
        agent?.request(.holdsNow(HoldReport(HoldOwner(.logind), claims)))
    }

    private func installCallbacks() {
        callbacks.pointee.prepare_for_sleep = { context, starting in
            Unmanaged<LogindLink>.fromOpaque(context!).takeUnretainedValue().prepareForSleep(starting != 0)
        }
        callbacks.pointee.session_lock = { context, lock in
            Unmanaged<LogindLink>.fromOpaque(context!).takeUnretainedValue().sessionLock(lock != 0)
        }
        callbacks.pointee.session_active = { context, active in
            Unmanaged<LogindLink>.fromOpaque(context!).takeUnretainedValue().sessionActive(active != 0)
        }
        callbacks.pointee.idle_inhibitor = { context, who, why, uid, pid in
            Unmanaged<LogindLink>.fromOpaque(context!).takeUnretainedValue()
                .idleInhibitor(who: String(cString: who!), why: String(cString: why!), uid: uid, pid: pid)
        }
        callbacks.pointee.idle_inhibitors_listed = { context, error in
            Unmanaged<LogindLink>.fromOpaque(context!).takeUnretainedValue().idleInhibitorsListed(error: error)
        }
        callbacks.pointee.forged = { context, sender, what in
            Unmanaged<LogindLink>.fromOpaque(context!).takeUnretainedValue().forged(sender: String(cString: sender!), what: String(cString: what!))
        }
        callbacks.pointee.on_battery = { context, onBattery in
            Unmanaged<LogindLink>.fromOpaque(context!).takeUnretainedValue().agent?.perform(.powerSource(onBattery: onBattery != 0))
        }
        callbacks.pointee.session_found = { context, path, whyNot in
            Unmanaged<LogindLink>.fromOpaque(context!).takeUnretainedValue()
                .sessionFound(path.map { String(cString: $0) }, whyNot: whyNot.map { String(cString: $0) } ?? "")
        }
        callbacks.pointee.session_watched = { context, error in
            Unmanaged<LogindLink>.fromOpaque(context!).takeUnretainedValue().sessionWatched(error: error)
        }
        callbacks.pointee.sleep_delay_taken = { context, fd in
            Unmanaged<LogindLink>.fromOpaque(context!).takeUnretainedValue().sleepDelayTaken(fd)
        }
        callbacks.pointee.delay_limit = { context, usec in
            Unmanaged<LogindLink>.fromOpaque(context!).takeUnretainedValue().delayLimit = Millis(Int64(clamping: usec / 1000))
        }
        callbacks.pointee.logind_owner = { context, owned in
            Unmanaged<LogindLink>.fromOpaque(context!).takeUnretainedValue().logindOwnerChanged(owned: owned != 0)
        }
        callbacks.pointee.log = { _, level, message in Log.fromLibrary(level, message) }
    }
}
