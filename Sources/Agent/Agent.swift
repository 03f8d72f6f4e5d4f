import CBus
import CLinux
import Glibc
import IdleCore
import Platform

/// The running agent: the state machine and the sources that feed it. Every
/// source turns what it sees into an `Event`; the machine's actions are carried
/// out here. The loop's sources are made here (`makeSources`, and the locker's,
/// the guard link's and an adopted locker's watches as they come), and by the
/// watchers a setting starts, through `addSource`: BusLink (each bus connection,
/// and a watch on the bus socket's directory while it waits), PlayerWatch,
/// AudioWatch and CardWatch. A new input is a new source type added by one of
/// these; the loop itself does not change. (The guard, GuardService, runs a loop
/// of its own with its own sources.)
public final class Agent {
    var machine: IdleMachine
    let loop: EventLoop
    let x: XServer
    let control: ControlListener
    let children: ChildProcesses
    /// The desktop's buses (logind, org.freedesktop.ScreenSaver), when reachable.
    var desktop: DesktopServices?
    /// The locker knows logind's sleep delay protocol (XSS_SLEEP_LOCK_FD).
    var transferSleepLock = false
    /// The X server's keep-awake signals, followed at every wake-up; nil when only
    /// real input counts (--ignore-screensaver-reset).
    var keepAwake: XKeepAwake?
    /// The server's saver timeout before the agent changed it, restored at exit.
    var saverTimeoutToRestore: Millis?
    /// The clients that suspended the saver at the last look (inner nil: X-Resource
    /// cannot tell); nil before the first look.
    private var lastSuspenders: [XSaverSuspender]??
    private let adopted: (pid: pid_t, pidfd: Int32)?
    /// Under the policy's locker: the whole environment it runs with (nil: the agent's).
    let lockerEnvironment: [String]?
    /// `--corners`: the corners' size, and the monitors whose corners count (nil: the
    /// root window's).
    var cornerSize: Int32 = 10
    var monitors: Monitors?
    /// `--not-when-fullscreen`.
    var fullscreenWatch: FullscreenWatch?
    /// `--screen-off-after-lock`: the monitor's power (DPMS).
    var screenPower: ScreenPower?
    /// `--lock-on-card-removal`: pcscd's readers, watched from a thread of their own.
    var cardWatch: CardWatch?
    /// Under the admin's policy: the registration with the guard (root).
    var guardLink: GuardLink?
    /// The guard's locker this agent adopted, and a pidfd to it.
    var guardLocker: (pid: pid_t, pidfd: Int32)?
    /// SIGTERM's exit status: 75 under a policy, so that the user unit restarts the agent
    /// (RestartForceExitStatus=75); a stop by the user is the guard's to answer.
    var exitStatusOnStop: Int32 = 0

    public static func run(_ options: AgentOptions) throws(AgentError) -> Never {
        var options = options
        // Before the first line is logged. A hook or the locker inherits default
        // dispositions (the spawn resets them); the agent itself must not die writing
        // to a closed client, nor be stopped by a terminal with `stty tostop` when it logs.
        signal(SIGPIPE, SIG_IGN)
        signal(SIGTTOU, SIG_IGN)
        Log.threshold = options.verbosity.threshold
        // The policy's card watch reads the system's pcscd, never a daemon of the
        // user's that libpcsclite would find through the environment.
        if case .policy? = options.origins["--lock-on-card-removal"], let socket = SocketPath.environment("PCSCLITE_CSOCK_NAME") {
            unsetenv("PCSCLITE_CSOCK_NAME")
            options.policy?.changes.append("PCSCLITE_CSOCK_NAME=\(socket) ignored: the policy's lock-on-card-removal reads the system's pcscd")
        }
        Log.makeNonBlocking()
        // Under a policy the session, its display and its type are logind's; the
        // environment is the user's to set. Out of a policy logind only names the
        // session. Either way it is known before the first lock can fire (one due at
        // start too), so that its hints and audit entry name it.
        let session = options.policy != nil ? ownSession() : options.logind ? observedSession() : nil
        AuditTrail.session = session.map { [("XIDLELOCK_SESSION", $0.id), ("XIDLELOCK_DISPLAY", $0.display)].filter { !$0.1.isEmpty } } ?? []
        let refusal = (options.policy == nil ? nil : session)?.refusal(environment: SocketPath.environment)
            ?? WaylandSession.refusal(sessionType: SocketPath.environment("XDG_SESSION_TYPE"),
                                      waylandDisplay: SocketPath.environment("WAYLAND_DISPLAY"))
        if let refusal { throw .unavailable(refusal) }
        if !options.configFiles.isEmpty {
            Log.write(.info, "settings read from \(options.configFiles.joined(separator: ", ")) and the flags")
        }
        for problem in options.configProblems {
            Log.write(.error, problem.description)
            AuditTrail.record(.config(problem))
        }
        if options.policy == nil {
            for refused in options.weakeningsRefused { Log.write(.warning, refused) }
        }
        if let policy = options.policy {
            for error in policy.errors { Log.write(.error, "policy \(error)") }
            for change in policy.changes { Log.write(.warning, "policy \(policy.path): \(change)") }
            for entry in AuditRecord.policy(policy) { AuditTrail.record(entry) }
        }
        try XServer.installErrorHandlers()
        let x = try XServer()
        if case .failure(let unavailable) = x.clientOwners {
            Log.write(.warning, "\(unavailable.reason): the grab probe cannot tell the locker's keyboard grab from another client's (a grab held before the locker started still never counts as the lock)")
        }
        // The policy's locker is the admin's: found in the system's directories, run with
        // the session's environment, and only a process running it adopted.
        var policyLocker: LockerChoice.PolicyLocker?
        if case .policy? = options.origins["--locker"], let given = options.locker {
            policyLocker = try LockerChoice.policyLocker(given, display: SocketPath.environment("DISPLAY"),
                                                         sessionID: SocketPath.environment("XDG_SESSION_ID"))
        }
        let locker: String
        if let policyLocker { locker = policyLocker.command } else { locker = try LockerChoice.choose(given: options.locker, vncServer: x.hasExtension("VNC-EXTENSION")) }
        // The agent sees only the shell's end: a locker followed by more would have its
        // kill read as whatever the rest does (doctor says the same).
        if let hazard = ShellCommand.lockerEndHazard(locker) {
            Log.write(.warning, "the locker command `\(locker)` \(hazard.summary): \(hazard.detail); \(hazard.fix)")
        }
        // Locking never depends on the socket or the record: each that cannot be made
        // is said, and the agent runs without it. Only a second agent is refused.
        let control = try ControlListener.open(given: options.socket)
        // Opened before anything else can use up descriptors: the record of a
        // running locker must never fail to be written.
        let record = LockerRecord.open(beside: control, serverToken: x.serverToken())
        var config = options.config(locker: locker)
        config.userID = getuid()
        config.session = session
        if inheritedPendingLock() {
            Log.write(.warning, "reload: the earlier image's locker was failing and waiting for its next try: locking again at start")
            config.lockAtStart = true
        }
        // The sources the first stage waits for, each until it has said what it holds
        // (an agent restarted during a film must hear the film's hold first).
        let awaiting = options.startAwaits.filter { config.refusal(for: $0) == nil }
        let agent = try Agent(config: config, x: x, control: control, record: record, awaiting: awaiting, policyLocker: policyLocker)
        // Followed under --secure too (the gate refuses its holds): `xset s activate` locks.
        if !options.ignoreScreensaverReset { agent.followKeepAwakeSignals(lockAfter: options.lockAfter) }
        // Early, before any browser starts: Firefox picks its inhibit backend once.
        let desktop = DesktopServices(agent: agent, settings: DesktopServices.Settings(
            served: Set(DesktopServices.sessionServices.map { $0.source }.filter(options.follows)), useLogind: options.logind,
            lockBeforeSleep: options.lockBeforeSleep,
            followPower: options.followsPowerSource, sessionID: session.flatMap { $0.fromLogind ? $0.id : nil }))
        agent.desktop = desktop
        for refused in options.refusedBySecure {
            Log.write(.warning, "\(refused): not followed, the agent runs with --secure (nothing may hold the lock off)")
        }
        if let corners = agent.machine.config.corners { agent.setUpCorners(corners, size: options.cornerSize) }
        if awaiting.contains(.fullscreen) { agent.followFullscreen() }
        if config.screenOffAfterLock != nil || config.screenOffAfterLockOnBattery != nil {
            let power = ScreenPower(display: x.display)
            if let unavailable = power.unavailable {
                Log.write(.warning, "--screen-off-after-lock: \(unavailable): the monitor stays on while locked (the locker still covers it)")
            }
            agent.screenPower = power
        }
        agent.transferSleepLock = options.transferSleepLock
            || ShellCommand.firstWord(of: locker).map { $0.hasSuffix("xsecurelock") } == true
        desktop.start(awaiting: awaiting)
        if awaiting.contains(.audio) { AudioWatch.start(for: agent) }
        if awaiting.contains(.playing) { PlayerWatch.start(for: agent) }
        // libpcsclite is loaded only here: never by `xidlelock idle`, nor without the setting.
        if options.lockOnCardRemoval { agent.cardWatch = CardWatch.start(for: agent) }
        if options.policy != nil { agent.registerWithGuard() }
        // Under systemd (Type=notify): ready once the X connection, the socket and every
        // source are up, so that units ordered after this one find the agent answering.
        let lockAfter = options.lockAfter
        let notified = xil_notify_ready("watching \(getenv("DISPLAY").map { String(cString: $0) } ?? "?"), lock after \(lockAfter)")
        if notified < 0 { Log.write(.warning, "cannot tell systemd the agent is ready: \(String(cString: strerror(-notified)))") }
        // The deadlines are timers of a few per hour: they fire when due, not up to the
        // kernel's default 50 us later (its slack groups wake-ups of busy programs).
        _ = xil_set_timer_slack(1)
        agent.loop.run()
    }

    /// The agent's machine: its inhibitor ids (D-Bus cookies) each drawn from the
    /// kernel's random source.
    static func machine(config: AgentConfig, now: Instant) -> IdleMachine {
        IdleMachine(config: config, now: now, cookies: .kernel)
    }

    /// logind's word on the agent's session (its own, or for a systemd user unit its
    /// user's display session), asked on a connection of its own within 2 s; where
    /// the environment disagrees it is corrected, so that the X connection, the
    /// socket, the bus services and every child follow logind.
    static func ownSession() -> AgentSession {
        let session = AgentSession.reconcile(logind: askLogindOwnSession(), unavailable: logindUnavailable, environment: SocketPath.environment)
        for problem in session.problems { Log.write(session.fromLogind ? .error : .warning, "session: \(problem)") }
        guard session.fromLogind else { return session }
        Log.write(.info, "session \(session.id) on \(session.display) (\(session.type)\(session.seat.isEmpty ? "" : ", \(session.seat)")), as logind says")
        follow(session)
        return session
    }

    /// The environment set to the session logind named, so that the X connection, the
    /// socket, the bus services and every child follow it.
    private static func follow(_ session: AgentSession) {
        if !session.display.isEmpty { setenv("DISPLAY", session.display, 1) }
        setenv("XDG_SESSION_ID", session.id, 1)
        if !session.type.isEmpty { setenv("XDG_SESSION_TYPE", session.type, 1) }
        if session.type != "wayland" { unsetenv("WAYLAND_DISPLAY") }
    }

    /// Out of a policy: logind's name for the session of the display the agent watches
    /// (asked as under a policy, within 2 s), the environment left as the user set it;
    /// an agent in no session (the user unit's) follows its user's display session.
    static func observedSession() -> AgentSession {
        let logind = askLogindOwnSession()
        let session = AgentSession.observe(logind: logind, unavailable: logindUnavailable, environment: SocketPath.environment)
        // Without logind, the desktop's buses say why once (status has it too).
        for problem in session.problems { Log.write(logind == nil ? .debug : .info, "session: \(problem)") }
        if session.fromLogind { Log.write(.info, "session \(session.id) on \(session.display), as logind says") }
        if session.fromLogind, logind?.usersDisplay == true { follow(session) }
        return session
    }

    /// Why the last `askLogindOwnSession` got no answer.
    nonisolated(unsafe) private static var logindUnavailable: String?

    /// logind's word on the agent's own session, asked on a connection of its own within 2 s.
    private static func askLogindOwnSession() -> AgentSession.Logind? {
        var error = [CChar](repeating: 0, count: 256)
        logindUnavailable = nil
        if xil_bus_load(&error, error.count) != 0 {
            logindUnavailable = "libsystemd is not available: \(String(nulTerminated: error))"
            return nil
        }
        var info = xil_session_info()
        guard xil_logind_own_session(UInt32(getpid()), getuid(), 2_000_000, &info, &error, error.count) == 0 else {
            logindUnavailable = String(nulTerminated: error)
            return nil
        }
        let facts = SessionFacts(info)
        return AgentSession.Logind(id: facts.guarded.id, display: facts.guarded.display, type: facts.type, seat: facts.seat,
                                   usersDisplay: facts.usersDisplay)
    }

    init(config: AgentConfig, x: XServer, control: ControlListener, record: LockerRecord?,
         awaiting: Set<InhibitorSource>, policyLocker: LockerChoice.PolicyLocker? = nil) throws(AgentError) {
        lockerEnvironment = policyLocker?.environment
        self.x = x
        self.control = control
        loop = EventLoop()
        children = ChildProcesses()
        children.lockerRecord = record
        machine = Agent.machine(config: config, now: SystemClock.now())
        // Before anything can fire: a locker left by an earlier agent still runs, or one
        // this process started before it was executed again in place (still its child).
        let inherited = Agent.inheritedLocker()
        adopted = inherited == nil ? record?.adopt(executable: policyLocker?.executable) : nil
        do {
            try makeSources()
        } catch {
            throw .failed("cannot set up the event sources: \(error)")
        }
        if let adopted {
            children.adoptedLocker = adopted.pid
            Log.write(.info, "found the locker of an earlier agent running (pid \(adopted.pid))")
            perform(.lockerAdopted)
            perform(.lockerFact(.grabs(probeGrabs())))
        }
        if let inherited {
            children.takeInheritedLocker(inherited)
            Log.write(.info, "executed again in place: the locker (pid \(inherited)) is still this process's child, its end is seen")
            perform(.lockerAdopted)
            perform(.lockerFact(.grabs(probeGrabs())))
        }
        if !config.xtestInputCounts { x.ignoreXtest() }
        x.listen(true)
        perform(.start(serverIdle: x.idleTime() ?? .zero, awaiting: awaiting))
    }

    /// The agent's own sources, made at start; the buses and the sound server add
    /// theirs when they connect. They prepare in the order added, the deadline timer
    /// and the keep-awake check after all others (`preparesLast`).
    private func makeSources() throws(SystemError) {
        loop.add(XInputSource(x, wantsInput: { [unowned self] in machine.listensForInput },
                              onInput: { [unowned self] in perform(.input) },
                              onSaverOn: { [unowned self] in saverTurnedOn() },
                              onWindowChanges: { [unowned self] changes in fullscreenWatch?.handle(changes) }))
        // The end of an X keep-awake hold is not announced: look again now and then
        // while one holds (never otherwise). Any period below the lock time keeps the
        // lock exact: the counter tells when the hold ended.
        let lockAfter = machine.config.lockStage?.idleTime ?? .minutes(10)
        let period = Swift.min(Swift.max(Millis(lockAfter.value / 2), .ms(100)), .seconds(30))
        loop.add(PeriodicCheck(every: period, while: { [unowned self] in keepAwake?.isHolding == true }) { [unowned self] in wake() })
        var signals = [SIGTERM, SIGCHLD, SIGUSR1]
        for stop in [SIGINT, SIGHUP] where !SignalSource.isIgnored(stop) { signals.append(stop) }
        loop.add(try SignalSource(signals) { [unowned self] signal in received(signal) })
        control.handler = self
        control.onAccept = { [unowned self] connection in loop.add(connection) }
        loop.add(control)
        if let watch = ResumeWatch(onResume: { [unowned self] in wake() }) {
            loop.add(watch)
        } else {
            Log.write(.warning, "cannot watch for resumes from suspend: gaps are noticed at the next wake-up instead")
        }
        if let adopted {
            loop.add(ProcessWatch(pidfd: adopted.pidfd) { [unowned self] in
                children.adoptedLocker = nil
                children.lockerRecord?.clear()
                perform(.lockerFact(.endedUnseen))
            })
        }
        loop.add(children)
        loop.add(AuditTrail.shared)
        loop.add(LogCounts())
        loop.add(try DeadlineTimer(nextDeadline: { [unowned self] in machine.nextDeadline }) { [unowned self] in wake() })
    }

    /// A wake-up that reads the server's idle counter (and its saver's state, for the
    /// keep-awake signals, in the same round trip). The clock is read before the
    /// query and the counter corrected by the query's own time, so that rounding
    /// never makes server activity look newer than it is (no activity without input).
    /// `lookForSuspenders`: also ask X-Resource which clients suspend the saver (a
    /// round trip per X client): at the agent's own wake-ups (deadlines, the periodic
    /// look while the X server holds) and for status; a wake-up for a client's request
    /// (any bus client can send many) goes on with the clients seen last.
    func wake(lookForSuspenders: Bool = true) {
        let before = SystemClock.now()
        let reading = x.saverReading()
        let after = SystemClock.now()
        // The keep-awake holds of the same reading go in with it: the machine sees the
        // counter's reset at a hold's end before the end (the video's end is activity:
        // the lock comes a lock time later).
        var holds: HoldReport?
        if let reading, var keepAwake {
            if lookForSuspenders || lastSuspenders == nil { lastSuspenders = .some(x.saverSuspenders()) }
            _ = keepAwake.update(reading, suspenders: lastSuspenders ?? nil)
            self.keepAwake = keepAwake
            holds = HoldReport(HoldOwner(.x), keepAwake.claims)
        }
        perform(.wake(serverIdle: reading.map { $0.idle + (after.monotonic - before.monotonic) }, holds: holds))
    }

    /// Starts following the X server's keep-awake signals. So that a client's
    /// XScreenSaverSuspend shows by the lock time, a server saver timeout longer than
    /// that is lowered to 2 s before the lock time while the agent runs (restored at exit).
    func followKeepAwakeSignals(lockAfter: Millis) {
        let settings = x.saverSettings()
        if let lowered = XKeepAwake.timeoutToSet(server: settings.timeout, lockAfter: lockAfter) {
            x.setSaverTimeout(lowered)
            saverTimeoutToRestore = settings.timeout
            Log.write(.info, "set the X screensaver timeout to \(lowered) (it was \(settings.timeout)) while the agent runs, so that a video player's XScreenSaverSuspend shows by the lock time; restored at exit")
        }
        guard let reading = x.saverReading() else {
            perform(.sourceReady(.x))
            return
        }
        keepAwake = XKeepAwake(atStart: reading)
        if keepAwake?.offAtStart == true {
            Log.write(.info, "the X screensaver is off (xset s off) since before the agent started: that is your setting, not a hold; a client's XScreenSaverSuspend cannot be seen")
        }
        x.watchSaver()
        wake()
    }

    func setUpCorners(_ corners: CornerSettings, size: Int32) {
        cornerSize = size
        switch Monitors.load(on: x) {
        case .success(let monitors):
            self.monitors = monitors
            Log.write(.info, "hot corners \(corners.corners): the corners of each monitor (\(monitors.areas(on: x).count) now, RandR), \(size) pixels, + after \(corners.delay)")
        case .failure(let unavailable):
            Log.write(.info, "hot corners \(corners.corners): the corners of the whole screen (\(unavailable.reason)), \(size) pixels, + after \(corners.delay)")
        }
    }

    /// Where the pointer rests: in a corner of a monitor, or of the whole screen when
    /// RandR tells no monitors.
    private func pointerRest() -> PointerRest {
        let monitorAreas = monitors?.areas(on: x) ?? []
        return x.pointerRest(cornerSize: cornerSize, areas: monitorAreas.isEmpty ? [x.rootArea()] : monitorAreas)
            ?? PointerRest(corner: nil, position: PointerPosition(x: -1, y: -1))
    }

    func followFullscreen() {
        let watch = FullscreenWatch(x) { [unowned self] window in reportFullscreen(window) }
        fullscreenWatch = watch
        watch.start()
        // Said even when nothing is fullscreen: the first stage waits for this answer.
        reportFullscreen(watch.fullscreen)
    }

    private func reportFullscreen(_ window: FullscreenWatch.Window?) {
        request(.holdsNow(HoldReport(HoldOwner(.fullscreen), window.map {
            [HoldClaim(key: String($0.id), who: $0.who, why: "fullscreen")]
        } ?? [])))
    }

    /// The server's own saver turned on: `xset s activate` asks for a lock now.
    private func saverTurnedOn() {
        guard keepAwake != nil, let reading = x.saverReading(), XKeepAwake.isForcedActivation(reading) else { return }
        perform(.lockRequest(from: "the X server's screensaver (xset s activate)"))
    }

    private func received(_ signal: Int32) {
        if signal == SIGCHLD {
            for (role, end) in children.reap() { perform(.processEnded(role, end)) }
        } else if signal == SIGUSR1 {
            executeAgainInPlace()
        } else {
            Log.write(.info, "received signal \(signal)")
            stop()
        }
    }

    /// Set for the agent executed again in place: its running locker, its own child.
    static let inheritedLockerVariable = "XIDLELOCK_INHERITED_LOCKER"
    /// Set for the agent executed again in place while its locker failed and the next
    /// try waited: an upgrade's reload must not drop the lock.
    static let lockPendingVariable = "XIDLELOCK_LOCK_PENDING"

    /// Whether an earlier image of this process left a lock pending (taken out of the
    /// environment, so no child sees it).
    static func inheritedPendingLock() -> Bool { takeVariable(lockPendingVariable) != nil }

    /// What an earlier image of this process left in the environment, taken out of it.
    private static func takeVariable(_ name: String) -> String? {
        guard let value = getenv(name).map({ String(cString: $0) }) else { return nil }
        unsetenv(name)
        return value
    }

    /// `systemctl --user reload xidlelock` (the package does it after an upgrade),
    /// SIGUSR1: the installed binary executed in this process's place. The pid stays
    /// (systemd's main pid, the guard's agent) and so do the children: the locker
    /// stays this process's child, so its exit, the unlock, is seen. An agent started
    /// anew could only adopt it, not see how it ended, and would ask for a second unlock.
    private func executeAgainInPlace() {
        guard let exe = FileIO.ownExecutable, access(exe, X_OK) == 0 else {
            Log.write(.error, "reload: the agent's executable is gone: going on as before")
            return
        }
        Log.write(.info, "reload: executing \(exe) in place (pid \(getpid()))")
        // What a stop puts back: the new image starts from the server's own settings.
        let lowered = x.saverSettings().timeout
        if let timeout = saverTimeoutToRestore { x.setSaverTimeout(timeout) }
        screenPower?.restore()
        var environment = SpawnRequest.currentEnvironment().filter {
            !$0.hasPrefix(Agent.inheritedLockerVariable + "=") && !$0.hasPrefix(Agent.lockPendingVariable + "=")
        }
        if let locker = children.childLockerPid { environment.append("\(Agent.inheritedLockerVariable)=\(locker)") }
        // A lock whose locker failed and waits for its next try: the new image tries at once.
        if machine.supervisor.isRetrying { environment.append("\(Agent.lockPendingVariable)=1") }
        // Every descriptor is close-on-exec (X, the sockets, the buses); the signals the
        // loop blocks stay blocked, so a locker's end meanwhile waits for the new image.
        withCStrings(CommandLine.arguments) { argv in
            withCStrings(environment) { envp in
                _ = execve(exe, UnsafeRawPointer(argv).assumingMemoryBound(to: UnsafeMutablePointer<CChar>?.self),
                           UnsafeRawPointer(envp).assumingMemoryBound(to: UnsafeMutablePointer<CChar>?.self))
            }
        }
        Log.write(.error, "reload: cannot execute \(exe) (\(String(cString: strerror(errno)))): going on as before")
        if saverTimeoutToRestore != nil { x.setSaverTimeout(lowered) }
    }

    /// The locker an earlier image of this process left running as its child, named in
    /// the environment by `executeAgainInPlace` (taken out of it, so no child sees it).
    static func inheritedLocker() -> pid_t? {
        guard let text = takeVariable(inheritedLockerVariable) else { return nil }
        guard let pid = pid_t(text), pid > 0, ProcessTree.parent(of: pid) == getpid() else {
            Log.write(.warning, "\(inheritedLockerVariable)=\(text) names no child of this agent: ignored")
            return nil
        }
        return pid
    }

    /// Stops politely: resume commands run, the locker is left alone.
    func stop() -> Never {
        perform(.stop)
        cardWatch?.stop()
        if let timeout = saverTimeoutToRestore { x.setSaverTimeout(timeout) }
        screenPower?.restore()
        if let pid = children.lockerPid {
            Log.write(.info, "the locker (pid \(pid)) keeps running")
        }
        control.shutdown()
        exit(exitStatusOnStop)
    }

    // MARK: Carrying out actions

    /// Feeds one event to the machine and carries out its actions; what an action
    /// reports back (a command that cannot start, the grab probe's answer) is fed
    /// in next. Returns the machine's answer to a client's request, if any.
    @discardableResult
    func perform(_ event: Event) -> Answer? {
        var answer: Answer?
        var queue = [event]
        while !queue.isEmpty {
            let next = queue.removeFirst()
            for action in machine.handle(next, at: SystemClock.now()) {
                switch action {
                case .log(let level, let message):
                    Log.write(level, message)
                case .logRefusal(let message):
                    Log.limited("refused holds", message)
                case .run(let role, let command, let environment):
                    if let failure = children.start(role, spawnRequest(for: role, command, environment)) {
                        queue.append(.processEnded(role, failure))
                    }
                case .terminate(let role):
                    children.terminate(role)
                case .killLocker:
                    children.killLocker()
                case .announce(let announcement):
                    if let entry = AuditRecord.of(announcement) { AuditTrail.record(entry) }
                    if case .locked = announcement { guardLink?.lockChanged(locked: true) }
                    if case .unlocked = announcement { guardLink?.lockChanged(locked: false) }
                    if case .lockerFailed = announcement { guardLink?.lockerFailed() }
                    let line = announcement.json.text
                    for client in control.connections where client.subscribed { client.send(line) }
                    desktop?.announce(announcement)
                case .probeGrabs:
                    queue.append(.lockerFact(.grabs(probeGrabs())))
                case .checkPointerCorner:
                    queue.append(.pointerRests(pointerRest()))
                case .releaseSleepDelay, .setLockedHint, .setIdleHint:
                    desktop?.carryOut(action)
                case .turnScreenOff:
                    if let unavailable = screenPower?.turnOff() { Log.write(.debug, "the monitor stays on: \(unavailable)") }
                case .restoreScreenSettings:
                    screenPower?.restore()
                case .answer(let given):
                    answer = answer ?? given
                }
            }
        }
        return answer
    }

    // MARK: The guard

    /// Under the admin's policy: the user must not be able to read or change the agent
    /// (non-dumpable: no ptrace, no /proc/PID/mem of the user's), a SIGTERM restarts
    /// it (exit 75), and the guard (root) is told of it and follows it from outside.
    func registerWithGuard() {
        if xil_set_undumpable() != 0 {
            Log.write(.warning, "cannot make the agent non-dumpable: \(String(cString: strerror(errno)))")
        }
        exitStatusOnStop = 75
        let display = getenv("DISPLAY").map { String(cString: $0) } ?? ""
        let link = GuardLink(display: display, status: { [unowned self] in .object(statusFields()) },
                             lockDue: { [unowned self] in machine.lockDue }) { [unowned self] message in
            guardSaid(message)
        }
        guardLink = link
        loop.add(link)
    }

    private func guardSaid(_ message: GuardLink.Message) {
        switch message {
        case .verified, .refused:
            break
        case .locker(let pid):
            // The guard locked the session while no agent guarded it: this agent adopts
            // that locker (never a second one); the guard, its parent, says how it ends.
            guard children.lockerPid == nil else {
                Log.write(.warning, "the guard's locker (pid \(pid)) runs beside this agent's own (pid \(children.lockerPid!)): the guard judges its end")
                return
            }
            guardLocker = (pid, xil_pidfd_open(pid))
            children.adoptedLocker = pid
            Log.write(.info, "adopting the guard's locker (pid \(pid))")
            perform(.lockerAdopted)
            perform(.lockerFact(.grabs(probeGrabs())))
        case .lockerEnded(let pid, let exitStatus, let signal):
            guard let adopted = guardLocker, adopted.pid == pid else { return }
            endGuardLocker()
            perform(.lockerFact(exitStatus.map { .exited($0) } ?? .killed(signal: signal)))
        case .lost:
            // Nothing tells this locker's exit status now: its end is not an unlock.
            guard let adopted = guardLocker, adopted.pidfd >= 0 else { return }
            loop.add(ProcessWatch(pidfd: adopted.pidfd) { [unowned self] in
                guard guardLocker?.pid == adopted.pid else { return }
                guardLocker = nil
                children.adoptedLocker = nil
                perform(.lockerFact(.endedUnseen))
            })
            guardLocker = (adopted.pid, -1)
        }
    }

    private func endGuardLocker() {
        if let adopted = guardLocker, adopted.pidfd >= 0 { close(adopted.pidfd) }
        guardLocker = nil
        children.adoptedLocker = nil
    }

    /// The grab probe, with the locker's processes (none before its start) whose
    /// windows prove a grab the locker's.
    private func probeGrabs() -> GrabReading {
        x.probeGrabs(lockerProcesses: children.lockerPid.map { ProcessTree.members(from: $0) })
    }

    /// A client's request or a source's report: the idle time is brought up to date
    /// first (listening may be paused, and the end of a hold must not fire a stage
    /// that input already put off). A new hold ends none: it needs the X round trip
    /// only when something is due, so that a flood of asks costs no round trip each.
    @discardableResult
    func request(_ event: Event) -> Answer? {
        // Nor does the departure of a client that held nothing: a flood of callers that
        // come and go costs no round trip each.
        let mayEndHolds = switch event {
        case .holdAsked: false
        case .ownerGone(let owner): machine.holdsAny(of: owner)
        default: true
        }
        // A stage due now is decided on a fresh look at who suspends the saver; otherwise
        // the clients seen last serve (a flood of requests costs no scan each).
        let due = machine.nextDeadline.map({ $0 <= SystemClock.now().boottime }) == true
        if mayEndHolds || due { wake(lookForSuspenders: due) }
        return perform(event)
    }

    /// How each role's command is started.
    private func spawnRequest(for role: ProcessRole, _ command: String, _ environment: [EnvironmentVariable]) -> SpawnRequest {
        guard role == .locker else {
            return SpawnRequest(program: .shell(command), environment: environment)
        }
        // The locker is exec'ed (the agent's own child, its real end seen) and never stopped.
        var request = SpawnRequest(program: .shell(ShellCommand.lockerForm(command)), environment: environment, stop: .never)
        request.baseEnvironment = lockerEnvironment
        // While the system waits to sleep, a locker that knows the protocol gets the
        // delay, to close once it covers the screen; no other child ever sees it.
        if transferSleepLock, let fd = desktop?.logind.sleepDelayForLocker {
            request.passedDescriptors = [(from: fd, to: 3)]
            request.environment.append(EnvironmentVariable("XSS_SLEEP_LOCK_FD", "3"))
        }
        return request
    }
}

extension Agent: DesktopAgent {
    var screenCovered: Bool { machine.supervisor.covers }

    var lockedFor: Millis? {
        guard let since = machine.supervisor.lockedSince else { return nil }
        return SystemClock.now().boottime - since
    }

    var idleTime: Millis { machine.idle(at: SystemClock.now()) }

    var hints: (locked: Bool, idle: Bool) { (machine.lockedHint, machine.idleHint) }

    func holds(from source: InhibitorSource) -> Bool { machine.inhibitors.contains { $0.source == source } }

    func addSource(_ source: EventSource) { loop.add(source) }

    var holdRouting: HoldRouting? { desktop?.routing }
}
