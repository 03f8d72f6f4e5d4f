import CBus
import CLinux
import Glibc
import IdleCore
import Platform

/// `xidlelock guard`: the root service that keeps the admin's lock binding on the
/// session's own user. It has no X connection; it follows logind's sessions, verifies
/// each session's agent itself (`PeerCheck`), follows it with a pidfd and ptrace, and
/// carries out `GuardMachine`'s actions: the policy's locker in the session as the
/// user, or logind's TerminateSession.
public final class GuardService {
    var machine: GuardMachine
    let loop = EventLoop()
    let policyFile: String?
    let locker: String?
    let verbose: Bool
    let socketPath: String
    /// The installed xidlelock: every agent must run it; the display checks run it.
    let agent: InstalledAgent
    private var listener: Int32 = -1
    private var bus: OpaquePointer? {
        didSet { logind.bus = bus }
    }
    /// Every question to logind goes through here: none waited for, a bounded number at once.
    private let logind = LogindQuestions()
    private var callbacks: UnsafeMutablePointer<xil_desktop_callbacks>
    /// Registrations by session.
    private var agents: [String: FollowedAgent] = [:]
    private var connections: [GuardConnection] = []
    /// The guard's lockers (its children) by pid: their session.
    private var lockers: [pid_t: String] = [:]
    /// What each verified agent reported at its registration, for root's evidence.
    private var statuses: [String: JSONValue] = [:]
    private var sessionsStale = true
    /// A whole reading of logind's sessions is under way (`readSessions`).
    private var listing = false
    /// Each guarded session's logind object path (for its SetLockedHint).
    private var sessionPaths: [String: String] = [:]
    /// Sessions (logind object paths) one of whose properties the guard reads changed:
    /// each read again alone, so that a change costs the work of its own session only.
    private var changedSessions: Set<String> = []
    /// Every followed agent's cgroup tree, watched for a freeze: one inotify instance for all.
    private lazy var cgroupTrees: CgroupTrees = {
        let trees = CgroupTrees()
        loop.add(trees)
        return trees
    }()
    private var logindReachable = true
    /// logind's bus, joined again every 2 s while it is lost.
    private var logindBackoff = Backoff.every(.seconds(2))
    /// The X server checks running (`checkDisplay`), by pid: their session.
    private var displayChecks: [pid_t: String] = [:]
    /// Root's questions waiting for the agents' answers (`proofWanted`).
    private var questions: [GuardConnection] = []
    private var metricsFile: MetricsFile?

    static let runDirectory: String = {
        #if DEBUG
        if let directory = getenv("XIDLELOCK_TEST_RUN") { return String(cString: directory) }
        #endif
        return "/run/xidlelock"
    }()

    /// Unverified connections one uid may hold at once. There is no cap in all: every
    /// session's agent must be heard; the bound is the descriptors (see `accept`).
    static let pendingPerUser = 4
    /// The listening socket is left unpolled while no descriptor is left for a new
    /// connection: polled, it would stay readable and spin the loop. A connection's
    /// end polls it again.
    private var acceptPaused = false

    public static func run(_ options: GuardOptions) throws(AgentError) -> Int32 {
        guard getuid() == 0 else { throw .permission("xidlelock guard must run as root (it is the system's xidlelock-guard.service)") }
        Log.makeNonBlocking()
        if options.verbose { Log.threshold = .debug }
        signal(SIGPIPE, SIG_IGN)
        // Each session costs the guard a connection, a pidfd and maybe a locker's: no
        // fixed cap on sessions, so as many descriptors as the system allows it.
        if xil_raise_descriptor_limit() < 0 {
            Log.write(.warning, "cannot raise the guard's descriptor limit: \(String(cString: strerror(errno)))")
        }
        let service = try GuardService(options)
        let ready = xil_notify_ready(service.policyFile.map { "guarding the graphical sessions under \($0)" } ?? "no policy: nothing to guard")
        if ready < 0 { Log.write(.warning, "cannot tell systemd the guard is ready: \(String(cString: strerror(-ready)))") }
        while true {
            do { try service.loop.runOnce() } catch { Log.write(.error, "the guard's loop: \(error)") }
        }
    }

    init(_ options: GuardOptions) throws(AgentError) {
        verbose = options.verbose
        guard let agentPath = InstalledAgent.path(options.agent) else {
            throw .failed("no xidlelock beside the guard (its directory, ../bin): name the installed agent with --agent PATH")
        }
        agent = try InstalledAgent(path: agentPath)
        let sources = ConfigSources.thisMachine
        let (file, policy, errors, policySHA256) = Policy.forGuard(from: sources)
        // Fails closed, as the agents do (they run secure): the guard guards with the lines
        // it could read and its defaults for the rest (lock, after the default grace).
        for error in errors {
            Log.write(.error, "policy \(error): the guard guards with what it could read and its defaults for the rest (on-agent-lost lock, agent-grace \(GuardSettings.defaultAgentGrace))")
        }
        policyFile = file
        locker = policy.locker
        machine = GuardMachine(settings: policy.guardSettings)
        socketPath = GuardService.runDirectory + "/guard.sock"
        callbacks = .allocate(capacity: 1)
        callbacks.initialize(to: xil_desktop_callbacks())
        callbacks.pointee.context = Unmanaged.passUnretained(self).toOpaque()
        installCallbacks()
        try listen()
        do {
            loop.add(try SignalSource([SIGCHLD, SIGTERM, SIGINT]) { [unowned self] signal in received(signal) })
            loop.add(AuditTrail.shared)
            loop.add(LogCounts())
            loop.add(try GuardDeadline(next: { [unowned self] in
                sessionsStale || !changedSessions.isEmpty ? MonotonicInstant(.zero) : machine.nextDeadline
            }) { [unowned self] in
                if sessionsStale { readSessions() } else { readChangedSessions() }
                carryOut(machine.handle(.tick, at: SystemClock.now().monotonic))
                answerQuestions()
            })
            if let directory = machine.settings.metricsDirectory {
                let started = Int64(time(nil))
                metricsFile = MetricsFile(directory: directory) { [unowned self] in
                    GuardMetrics(machine, policyFile: policyFile, policySHA256: policySHA256, policyErrors: errors.count,
                                 statuses: statuses, logindReachable: logindReachable, startTime: started)
                }
                loop.add(metricsFile!)
            }
        } catch {
            throw .failed("cannot set up the guard's event sources: \(error)")
        }
        guard let policyFile else {
            Log.write(.info, "no policy (\(sources.policy)): nothing to guard; registrations are answered, sessions are not watched")
            sessionsStale = false
            return
        }
        Log.write(.info, "guarding the graphical sessions under \(policyFile): on-agent-lost \(machine.settings.onAgentLost.rawValue), agent-grace \(machine.settings.agentGrace)")
        if agent.mode & 0o004 != 0 {
            Log.write(.error, "\(agent.path) is readable by every user (mode \(String(agent.mode, radix: 8))): every agent will be refused and every session locked by the guard; install it mode 0711 (`chmod 711`)")
        }
        connectBus()
    }

    // MARK: The socket

    private func listen() throws(AgentError) {
        let directory = GuardService.runDirectory
        // Root's directory: no user can plant or replace the socket.
        if mkdir(directory, 0o755) != 0 && errno != EEXIST {
            throw .failed("cannot make \(directory): \(String(cString: strerror(errno)))")
        }
        var info = stat()
        guard lstat(directory, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR, info.st_uid == 0, info.st_mode & 0o022 == 0 else {
            throw .failed("\(directory) is not a directory of root's that only root can write")
        }
        unlink(socketPath)
        listener = xil_unix_listen(socketPath, 1024)
        guard listener >= 0 else { throw .failed("cannot listen on \(socketPath): \(String(cString: strerror(errno)))") }
        // Every line is judged by its own writer (GuardConnection): without credentials
        // on each write the guard would listen to whoever holds the socket.
        guard xil_pass_credentials(listener) == 0 else {
            throw .failed("cannot ask for each writer's credentials on \(socketPath): \(String(cString: strerror(errno)))")
        }
        // Every user may connect: each peer is checked by what the kernel says of it.
        chmod(socketPath, 0o666)
        loop.add(GuardListener(fd: listener, paused: { [unowned self] in acceptPaused }) { [unowned self] in accept() })
    }

    private func accept() {
        while true {
            let fd = xil_accept(listener)
            guard fd >= 0 else {
                if errno == EMFILE || errno == ENFILE {
                    // Failing closed: the agents wait (their connect says the queue is full
                    // once it is), their sessions count as unguarded and are acted on.
                    acceptPaused = true
                    Log.limited("guard out of descriptors", "no descriptor left for a new connection (\(String(cString: strerror(errno))), \(connections.count) open): new agents are not heard and their sessions are acted on as unguarded until one closes; raise LimitNOFILE of xidlelock-guard.service")
                }
                return
            }
            var pid: pid_t = 0
            var uid: uid_t = 0
            guard xil_peer_credentials(fd, &pid, &uid) == 0 else {
                close(fd)
                continue
            }
            // A flood of one user's connections is bounded: the user's own, not the others'.
            let pending = connections.filter { $0.uid == uid && !$0.registered }.count
            if pending >= GuardService.pendingPerUser {
                Log.limited("connections of uid \(uid) refused (too many unverified)", "too many unverified connections from uid \(uid): refusing pid \(pid)")
                close(fd)
                continue
            }
            let connection = GuardConnection(fd: fd, pid: pid, uid: uid, service: self)
            connections.append(connection)
            loop.add(connection)
        }
    }

    func closed(_ connection: GuardConnection) {
        connections.removeAll { $0 === connection }
        acceptPaused = false
        guard let session = connection.session, agents[session]?.connection === connection else { return }
        let followed = agents[session]
        followed?.freeze?.finish()
        agents[session] = nil
        statuses[session] = nil
        // The pidfd tells a death, also when the socket's end is read first: a killed
        // process closes its descriptors before its pidfd says it exited, so it is given
        // a moment (once per lost agent). A running agent that let go of its
        // registration is lost all the same.
        let ended = connection.ended || followed.map { ProcessWatch.hasEnded(pidfd: $0.pidfd, wait: 200) } == true
        let loss: AgentLoss = ended ? .ended : .disconnected
        // A registration let go of by a running agent: its next one brings a watch of its own.
        followed?.processWatch?.cancel()
        Log.write(.warning, "session \(session): \(loss) (pid \(connection.pid))")
        carryOut(machine.handle(.agentLost(session: session, loss: loss), at: SystemClock.now().monotonic))
    }

    // MARK: Messages

    func received(_ message: GuardMessage, from connection: GuardConnection) {
        switch message {
        case .register(let display) where connection.session == nil && !connection.asked:
            register(connection, display: display)
        case .status(let json) where connection.registered:
            if let session = connection.session {
                statuses[session] = json
                carryOut(machine.handle(.agentAnswered(session: session), at: SystemClock.now().monotonic))
            }
        case .locked(let locked) where connection.registered:
            if let session = connection.session {
                carryOut(machine.handle(.agentReported(session: session, locked: locked), at: SystemClock.now().monotonic))
            }
        case .lockerFailed where connection.registered:
            if let session = connection.session {
                carryOut(machine.handle(.agentLockerFailed(session: session), at: SystemClock.now().monotonic))
            }
        case .lockDue(let dueIn) where connection.registered:
            if let session = connection.session {
                carryOut(machine.handle(.agentSaysLockDue(session: session, in: dueIn), at: SystemClock.now().monotonic))
            }
        case .alive(let number) where connection.registered:
            // Only the answer to the question asked last: an old one proves nothing of now.
            if let session = connection.session, let followed = agents[session], followed.question == number {
                followed.question = nil
                carryOut(machine.handle(.agentAnswered(session: session), at: SystemClock.now().monotonic))
            }
        case .sessions where connection.session == nil:
            connection.asked = true
            guard connection.uid == 0 else {
                connection.finish(with: .refused("only root may ask the guard for its sessions"))
                return
            }
            if sessionsStale { readSessions() }
            // "Guarded" only from an agent whose loop answers now: each is asked, and the
            // report waits for the answers (`answerWithin` at most; one that does not
            // answer is lost by then).
            questions.append(connection)
            carryOut(machine.handle(.proofWanted, at: SystemClock.now().monotonic))
        default:
            connection.finish(with: .refused("unexpected message"))
        }
        answerQuestions()
    }

    /// Root's questions, answered once no agent's answer is outstanding.
    private func answerQuestions() {
        questions.removeAll { $0.isFinished }
        guard !questions.isEmpty, !listing, !sessionsStale, !machine.sessions.values.contains(where: \.answerPending) else { return }
        var report = machine.report(now: SystemClock.now().monotonic, policyFile: policyFile, statuses: statuses)
        if case .object(var fields) = report {
            fields.append(("logind", .bool(logindReachable)))
            report = .object(fields)
        }
        for question in questions { question.finish(raw: report.text + "\n") }
        questions = []
    }

    private func register(_ connection: GuardConnection, display: String) {
        guard policyFile != nil else {
            connection.finish(with: .refused("no policy on this machine: nothing to guard"))
            return
        }
        // The pidfd first: it names this process, so a pid reused during the checks is seen.
        let pidfd = xil_pidfd_open(connection.pid)
        guard pidfd >= 0 else {
            refuse(connection, "its process cannot be followed (\(String(cString: strerror(errno))))", session: nil)
            return
        }
        let check = PeerCheck(agent: agent, pid: connection.pid, uid: connection.uid, display: display)
        let executable: String
        switch check.checkProcess() {
        case .failure(let refusal):
            close(pidfd)
            return refuse(connection, refusal.reason, session: refusal.session)
        case .success(let path): executable = path
        }
        guard let bus else {
            close(pidfd)
            return refuse(connection, "logind cannot be reached: its session cannot be checked", session: nil)
        }
        // logind's word on its session, without waiting: the connection's later lines
        // wait until it comes (`verifying`).
        connection.verifying = true
        logind.session(ofProcess: connection.pid, uid: connection.uid) { [weak self, weak connection] answer in
            guard let self, let connection, !connection.isFinished else {
                close(pidfd)
                return
            }
            connection.verifying = false
            switch answer {
            case .failure(let failure):
                close(pidfd)
                refuse(connection, "logind knows no session of pid \(connection.pid) (\(failure.why))", session: nil)
            case .success(let facts):
                // A session the list has not brought yet (it is read without waiting too).
                if GuardService.guards(facts), machine.sessions[facts.guarded.id] == nil {
                    sessionPaths[facts.guarded.id] = facts.path
                    carryOut(machine.handle(.sessionSeen(facts.guarded), at: SystemClock.now().monotonic))
                }
                let id = facts.guarded.id
                switch check.checkSession(machine.sessions[id]?.session, id: id, executable: executable) {
                case .failure(let refusal):
                    close(pidfd)
                    refuse(connection, refusal.reason, session: refusal.session)
                case .success(let verified):
                    follow(connection, verified, pidfd: pidfd)
                }
            }
            connection.resume()
        }
    }

    /// A peer that passed every check: traced, followed (its end, its stops, its freezes)
    /// and told the machine of.
    private func follow(_ connection: GuardConnection, _ verified: PeerCheck.Verified, pidfd: Int32) {
        var alive = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
        // ptrace after every other check: a SIGSTOP from now on reaches the guard at once.
        // An agent that executed itself again in place (a reload after an upgrade) is
        // still traced by this guard: tracing outlives exec.
        let tracedAlready = PeerCheck.tracerPid(of: connection.pid) == getpid()
        guard poll(&alive, 1, 0) == 0, tracedAlready || xil_trace_seize(connection.pid) == 0 else {
            let reason = alive.revents != 0 ? "the agent ended while it was checked"
                : errno == EPERM ? "cannot follow the agent: another process traces it (\(PeerCheck.tracer(of: connection.pid)))"
                : "cannot follow the agent: \(String(cString: strerror(errno)))"
            close(pidfd)
            refuse(connection, reason, session: verified.session)
            return
        }
        do {
            let session = verified.session
            let actions = machine.handle(.agentVerified(session: session, agent: verified.agent), at: SystemClock.now().monotonic)
            if actions.contains(where: { if case .refuse = $0 { true } else { false } }) {
                close(pidfd)
                carryOut(actions)
                connection.finish()
                return
            }
            connection.session = session
            connection.registered = true
            let followed = FollowedAgent(connection: connection, pid: connection.pid, pidfd: pidfd)
            agents[session] = followed
            connection.send(.verified)
            let watch = ProcessWatch(pidfd: pidfd) { [weak connection] in
                connection?.ended = true
                if let connection { connection.finish() }
            }
            followed.processWatch = watch
            loop.add(watch)
            followed.freeze = FreezeWatch(pid: connection.pid, uid: connection.uid, trees: cgroupTrees) { [unowned self, unowned followed] hold in
                followed.cgroupHold = hold
                agentRuns(followed, in: session, lost: hold)
            }
            if let freeze = followed.freeze {
                if verbose { Log.write(.info, "session \(session): agent pid \(connection.pid) in \(freeze.cgroup): watching \(freeze.top) and every cgroup below it for a freeze") }
            } else if verbose {
                Log.write(.info, "session \(session): agent pid \(connection.pid) has no control group of cgroup v2 to watch for a freeze")
            }
            if verbose { Log.write(.info, "session \(session): agent pid \(connection.pid) verified (\(verified.agent.executable))") }
            carryOut(actions)
            // Frozen already, or in a tree the guard cannot watch: verified, but not guarded.
            if let hold = followed.freeze?.hold {
                followed.cgroupHold = hold
                agentRuns(followed, in: session, lost: hold)
            }
        }
    }

    private func refuse(_ connection: GuardConnection, _ reason: String, session: String?) {
        Log.limited("registrations of uid \(connection.uid) refused", "refusing the registration of pid \(connection.pid) (uid \(connection.uid))\(session.map { " for session \($0)" } ?? ""): \(reason)")
        AuditTrail.record(machine.refused(pid: connection.pid, uid: connection.uid, reason: reason))
        connection.finish(with: .refused(reason))
    }

    // MARK: Actions

    func carryOut(_ actions: [GuardAction]) {
        var queue = actions
        while !queue.isEmpty {
            let action = queue.removeFirst()
            let now = SystemClock.now().monotonic
            switch action {
            case .audit(let entry):
                Log.write(entry.priority <= 3 ? .error : entry.priority == 4 ? .warning : .info, entry.message)
                AuditTrail.record(entry)
            case .startLocker(let session):
                queue += machine.handle(startLocker(in: session), at: now)
            case .terminateSession(let session):
                terminate(session)
            case .handOverLocker(let session, let pid):
                agents[session]?.connection.send(.locker(pid: pid))
            case .tellLockerEnded(let session, let pid, let exitStatus, let signal):
                agents[session]?.connection.send(.lockerEnded(pid: pid, exitStatus: exitStatus, signal: signal))
            case .clearLockedHint(let session):
                clearLockedHint(of: session)
            case .checkDisplay(let session):
                if let failed = checkDisplay(of: session) { queue += machine.handle(failed, at: now) }
            case .askAlive(let session):
                guard let followed = agents[session] else { break }
                followed.questionsAsked &+= 1
                followed.question = followed.questionsAsked
                followed.connection.send(.askAlive(followed.questionsAsked))
            case .refuse(_, _, let reason):
                Log.write(.warning, "registration refused: \(reason)")
            }
        }
    }

    /// The policy's locker in the session, as its user, with a clean environment made
    /// from logind's facts and the user's passwd entry (nothing from the user's files).
    private func startLocker(in id: String) -> GuardEvent {
        guard let session = machine.sessions[id]?.session else { return .lockerCouldNotStart(session: id, reason: "the session is gone") }
        guard let command = locker else {
            return .lockerCouldNotStart(session: id, reason: "the policy names no locker (set `locker` in \(policyFile ?? "the policy"))")
        }
        guard let user = SessionUser(uid: session.uid) else {
            return .lockerCouldNotStart(session: id, reason: "uid \(session.uid) has no passwd entry")
        }
        if let found = recordedLocker(of: id, uid: session.uid) {
            Log.write(.info, "session \(id): the policy's locker a guard before this one started still runs (pid \(found.pid)): no second")
            loop.add(ProcessWatch(pidfd: found.pidfd) { [unowned self] in
                unlink(lockerRecordPath(id))
                carryOut(machine.handle(.lockerEnded(session: id, pid: found.pid, exitStatus: nil, signal: 0), at: SystemClock.now().monotonic))
            })
            return .lockerFound(session: id, pid: found.pid)
        }
        // A simple command exec'd, as the agent's own locker: the guard's child is the
        // locker itself, whose end the guard judges (not a shell the user could kill).
        var request = SpawnRequest(program: .shell(ShellCommand.lockerForm(command)))
        request.stop = .never
        request.runAs = user.credentials
        request.baseEnvironment = user.lockerEnvironment(display: session.display, sessionID: session.id,
                                                         xauthority: PeerCheck.xauthority(of: session, home: user.home))
        do {
            let pid = try request.spawn()
            lockers[pid] = id
            // Traced by the guard: no debugger of the user's can attach to it (the kernel
            // allows one tracer) to make it exit 0, and a stop signal never reaches it.
            if xil_trace_seize(pid) != 0 {
                Log.write(.warning, "session \(id): cannot trace the guard's locker (pid \(pid)): \(String(cString: strerror(errno))); the user may stop it")
            }
            recordLocker(pid, of: id)
            Log.write(.info, "session \(id): started the policy's locker `\(command)` as \(session.userName) on \(session.display) (pid \(pid))")
            return .lockerStarted(session: id, pid: pid)
        } catch {
            return .lockerCouldNotStart(session: id, reason: "\(error)")
        }
    }

    /// The session's X server asked as the user (`xidlelock idle`, this executable, with
    /// the locker's clean environment), killed if it has not answered in a second. The
    /// guard itself has no X connection; its child speaks X, never its loop.
    private func checkDisplay(of id: String) -> GuardEvent? {
        guard let session = machine.sessions[id]?.session, let user = SessionUser(uid: session.uid) else {
            return .displayChecked(session: id, answers: false, detail: "the check could not be started")
        }
        var request = SpawnRequest(program: .argv([agent.path, "idle"]))
        request.stop = .never
        request.runAs = user.credentials
        request.baseEnvironment = user.lockerEnvironment(display: session.display, sessionID: session.id,
                                                         xauthority: PeerCheck.xauthority(of: session, home: user.home))
        let pid: pid_t
        do { pid = try request.spawn() } catch {
            return .displayChecked(session: id, answers: false, detail: "the check could not be started: \(error)")
        }
        displayChecks[pid] = id
        loop.add(RetryTimer(at: SystemClock.now().monotonic + GuardService.displayAnswerWithin) { [unowned self] in
            guard displayChecks[pid] != nil else { return }
            // Reaped with SIGCHLD, judged there as "no answer".
            kill(pid, SIGKILL)
        })
        return nil
    }

    static let displayAnswerWithin = Millis.seconds(1)
    /// logind's signals read together, at most every 50 ms (`BusConnection.readingPause`):
    /// 300 sessions' IdleHint changes a second cost 20 turns, not 300; a session's
    /// change waits 50 ms at most, against an agent-grace of seconds.
    static let busReadingPause = Millis.ms(50)

    // MARK: The guard's lockers across its restarts

    /// Each running locker of the guard's is recorded in its own directory (root's), so
    /// that the guard started again (an upgrade, Restart=always) follows it instead of
    /// starting a second: KillMode=process leaves the lockers running.
    private func lockerRecordPath(_ session: String) -> String {
        GuardService.runDirectory + "/locker-" + String(session.filter { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" })
    }

    private func recordLocker(_ pid: pid_t, of session: String) {
        guard let start = ProcessStart.time(of: pid) else { return }
        let path = lockerRecordPath(session)
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            Log.write(.warning, "session \(session): cannot record the locker in \(path): \(String(cString: strerror(errno)))")
            return
        }
        defer { close(fd) }
        _ = try? FileIO.writeAll(fd, "\(pid) \(start)\n")
    }

    /// The recorded locker of `session`, if that very process (pid and start time) still
    /// runs as the session's user: its pid and a pidfd.
    private func recordedLocker(of session: String, uid: UInt32) -> (pid: pid_t, pidfd: Int32)? {
        let path = lockerRecordPath(session)
        guard let bytes = FileIO.readSmallFile(path, flags: O_NOFOLLOW) else { return nil }
        let words = String(decoding: bytes, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" })
        var owner = stat()
        guard words.count == 2, let pid = pid_t(words[0]), pid > 0, ProcessStart.time(of: pid) == String(words[1]),
              stat("/proc/\(pid)", &owner) == 0, owner.st_uid == uid else {
            unlink(path)
            return nil
        }
        let pidfd = xil_pidfd_open(pid)
        guard pidfd >= 0 else { return nil }
        return (pid, pidfd)
    }

    private func clearLockedHint(of session: String) {
        guard bus != nil, let path = sessionPaths[session] else { return }
        let said = { (failure: LogindQuestions.Failure?) in
            if let failure { Log.write(.error, "session \(session): cannot set its LockedHint back to false: \(failure.why)") }
        }
        logind.clearLockedHint(at: path, said)
    }

    private func terminate(_ session: String) {
        guard bus != nil else {
            Log.write(.error, "session \(session): cannot log it off: the system bus is not connected")
            return
        }
        let said = { (failure: LogindQuestions.Failure?) in
            if let failure { Log.write(.error, "session \(session): logind's TerminateSession failed: \(failure.why)") }
            else { Log.write(.warning, "session \(session): logged off through logind") }
        }
        logind.terminate(session: session, said)
    }

    // MARK: Children and tracees

    private func received(_ signal: Int32) {
        guard signal == SIGCHLD else {
            // The lockers outlive the guard (never killed: that would unlock), and so do
            // the agents, detached by the kernel as the tracer goes.
            Log.write(.info, "received signal \(signal): stopping; the lockers keep running")
            metricsFile?.remove()
            exit(0)
        }
        var kind = XIL_WAIT_NONE
        var value: Int32 = 0
        while true {
            let pid = xil_guard_wait(&kind, &value)
            guard pid > 0 else { return }
            let now = SystemClock.now().monotonic
            if kind == XIL_WAIT_SIGNAL {
                // A signal on its way to a tracee. The guard's lockers never stop: a stopped
                // locker keeps its window but no longer covers anything once that window
                // is gone, and the user may send it SIGSTOP. Every other signal, and every
                // signal to an agent, goes on as if the guard were not there.
                let stops: Set<Int32> = [SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU]
                let drop = lockers[pid] != nil && stops.contains(value)
                if drop, let session = lockers[pid] {
                    Log.limited("guard locker stops dropped", "session \(session): signal \(value) to the guard's locker (pid \(pid)) dropped: a locker is never stopped")
                }
                xil_trace_continue(pid, drop ? 0 : value)
                continue
            }
            if let session = displayChecks[pid], kind == XIL_WAIT_EXITED || kind == XIL_WAIT_KILLED {
                displayChecks[pid] = nil
                let answers = kind == XIL_WAIT_EXITED && value == 0
                let detail = kind == XIL_WAIT_KILLED ? "no answer in \(GuardService.displayAnswerWithin)" : "`xidlelock idle` exited with status \(value)"
                carryOut(machine.handle(.displayChecked(session: session, answers: answers, detail: detail), at: now))
                continue
            }
            if let session = lockers[pid], kind == XIL_WAIT_EXITED || kind == XIL_WAIT_KILLED {
                lockers[pid] = nil
                unlink(lockerRecordPath(session))
                carryOut(machine.handle(.lockerEnded(session: session, pid: pid, exitStatus: kind == XIL_WAIT_EXITED ? value : nil,
                                                     signal: kind == XIL_WAIT_KILLED ? value : 0), at: now))
                continue
            }
            guard let (session, followed) = agents.first(where: { $0.value.pid == pid }) else { continue }
            switch kind {
            case XIL_WAIT_STOPPED:
                followed.stopped = true
                agentRuns(followed, in: session, lost: .stopped(signal: value))
            case XIL_WAIT_CONTINUED:
                followed.stopped = false
                agentRuns(followed, in: session, lost: nil)
            default:
                break
            }
        }
    }

    /// A stop or a freeze (`lost`) of a followed agent, or the end of one (nil): the
    /// agent runs again only when neither holds it.
    private func agentRuns(_ agent: FollowedAgent, in session: String, lost: AgentLoss?) {
        let now = SystemClock.now().monotonic
        if let lost {
            carryOut(machine.handle(.agentLost(session: session, loss: lost), at: now))
        } else if !agent.stopped && agent.cgroupHold == nil {
            carryOut(machine.handle(.agentContinued(session: session), at: now))
        }
    }

    // MARK: logind

    private func installCallbacks() {
        callbacks.pointee.sessions_changed = { context in
            Unmanaged<GuardService>.fromOpaque(context!).takeUnretainedValue().sessionsStale = true
        }
        callbacks.pointee.session_changed = { context, path in
            guard let path else { return }
            Unmanaged<GuardService>.fromOpaque(context!).takeUnretainedValue().changedSessions.insert(String(cString: path))
        }
        callbacks.pointee.forged = { context, sender, what in
            Log.limited("forged logind signals dropped", "dropped \(what.map { String(cString: $0) } ?? "a signal") claiming to be logind's from \(sender.map { String(cString: $0) } ?? "?")")
        }
        callbacks.pointee.log = { context, level, message in
            Log.fromLibrary(level, message)
        }
    }

    private func connectBus() {
        var error = [CChar](repeating: 0, count: 256)
        guard xil_bus_load(&error, error.count) == 0 else {
            return logindLost("libsystemd cannot be loaded (\(String(nulTerminated: error)))", retry: false)
        }
        var err: Int32 = 0
        guard let opened = xil_bus_open(0, &err) else {
            return logindLost("cannot connect to the system bus: \(String(cString: strerror(-err)))", retry: true)
        }
        let r = xil_guard_watch_logind(opened, callbacks)
        guard r >= 0 else {
            xil_bus_close(opened)
            return logindLost("cannot follow logind: \(String(cString: strerror(-r)))", retry: true)
        }
        bus = opened
        let connection = BusConnection(bus: opened, name: "system bus") { [unowned self] code in
            bus = nil
            logindLost("the system bus was lost: \(String(cString: strerror(code)))", retry: true)
        }
        connection.readingPause = GuardService.busReadingPause
        loop.add(connection)
        sessionsStale = true
    }

    private func logindLost(_ reason: String, retry: Bool) {
        Log.write(.error, "\(reason): the guard cannot tell which sessions are guarded; every session counts as unguarded")
        logindReachable = false
        carryOut(machine.handle(.logindLost(reason: reason), at: SystemClock.now().monotonic))
        // A reading under way will not be answered now: root's questions are answered
        // with what the guard knows (every session unguarded, logind unreachable).
        listing = false
        answerQuestions()
        guard retry else { return }
        loop.add(RetryTimer(at: SystemClock.now().monotonic + logindBackoff.next()) { [unowned self] in connectBus() })
    }

    /// Reads again each session one of whose properties changed, alone, without waiting.
    private func readChangedSessions() {
        let paths = changedSessions
        changedSessions = []
        guard bus != nil else { return }
        for path in paths.sorted() {
            // Gone (no answer): SessionRemoved says so, and the list is read again.
            logind.session(at: path) { [weak self] answer in
                guard let self, case .success(let facts) = answer else { return }
                seen(facts)
            }
        }
    }

    /// logind's word on one session: guarded (new or changed), or no more.
    private func seen(_ facts: SessionFacts) {
        let now = SystemClock.now().monotonic
        if GuardService.guards(facts) {
            sessionPaths[facts.guarded.id] = facts.path
            carryOut(machine.handle(.sessionSeen(facts.guarded), at: now))
        } else if machine.sessions[facts.guarded.id] != nil {
            forget(facts.guarded.id, at: now)
        }
    }

    /// A user's graphical X11 session: not a greeter's, not a tty, not Wayland. Remote
    /// ones too (xrdp's and TigerVNC's are Type x11; logind says Remote yes for VNC, no
    /// for xrdp): the admin's policy covers them as the seat's.
    /// One closing (its user logged out, a process of it lingering) is no more: its
    /// display may already be the next session's, where a locker would land.
    static func guards(_ session: SessionFacts) -> Bool {
        session.type == "x11" && session.sessionClass == "user" && session.state != "closing"
    }

    private func forget(_ id: String, at now: MonotonicInstant) {
        carryOut(machine.handle(.sessionGone(id: id), at: now))
        agents[id]?.freeze?.finish()
        agents[id] = nil
        statuses[id] = nil
        sessionPaths[id] = nil
    }

    /// Reads every session again (one came or went, logind's owner changed; never
    /// polled), without waiting: the list, then each session's properties; those the
    /// list no longer has are gone once every answer came. Root's questions wait for it.
    private func readSessions() {
        sessionsStale = false
        changedSessions = []
        guard bus != nil else { return }
        listing = true
        logind.sessionPaths { [weak self] answer in
            guard let self else { return }
            switch answer {
            case .failure(let failure):
                listing = false
                if logindReachable { logindLost("logind does not answer ListSessions: \(failure.why)", retry: false) }
                answerQuestions()
            case .success(let paths):
                logindReachable = true
                read(paths)
            }
        }
    }

    /// Each listed session's properties; then those not listed are gone.
    private func read(_ paths: [String]) {
        final class Reading {
            var waiting: Int
            var listed: Set<String> = []
            /// Reads logind did not answer (gone since the list, or the bus failing).
            var unanswered = 0
            init(_ count: Int) { waiting = count }
        }
        let reading = Reading(paths.count)
        let done = { [unowned self] in
            reading.waiting -= 1
            guard reading.waiting == 0 else { return }
            listing = false
            // Only a reading logind answered whole tells which sessions are gone: one it
            // could not answer (its bus failing) forgets none, since a session forgotten
            // is no longer guarded. A session truly gone goes with its SessionRemoved.
            if reading.unanswered == 0 {
                let now = SystemClock.now().monotonic
                for id in machine.sessions.keys.sorted() where !reading.listed.contains(id) { forget(id, at: now) }
            }
            answerQuestions()
        }
        reading.waiting += 1  // the list itself, so that an empty one ends too
        for path in paths {
            logind.session(at: path) { [weak self] answer in
                guard let self else { return }
                // Not listed: not a guarded session (or gone since the list: see `unanswered`).
                switch answer {
                case .success(let facts) where GuardService.guards(facts):
                    reading.listed.insert(facts.guarded.id)
                    seen(facts)
                case .success: break
                case .failure: reading.unanswered += 1
                }
                done()
            }
        }
        done()
    }
}

/// A verified agent the guard follows: its registration, and what holds it now.
final class FollowedAgent {
    let connection: GuardConnection
    let pid: pid_t
    /// The ProcessWatch's: open while the connection is (the watch closes it at the end).
    let pidfd: Int32
    var processWatch: ProcessWatch?
    var freeze: FreezeWatch?
    /// Stopped by a signal (ptrace's group-stop), frozen with its cgroup (or in a cgroup
    /// tree the guard cannot watch): either one leaves the session unguarded until both
    /// are over.
    var stopped = false
    var cgroupHold: AgentLoss?
    /// The number of the question outstanding (`alive? N`), and how many were asked.
    var question: UInt32?
    var questionsAsked: UInt32 = 0
    init(connection: GuardConnection, pid: pid_t, pidfd: Int32) {
        self.connection = connection
        self.pid = pid
        self.pidfd = pidfd
    }
}

/// The guard's listening socket as a source.
final class GuardListener: EventSource {
    let fd: Int32
    let paused: () -> Bool
    let onReady: () -> Void
    init(fd: Int32, paused: @escaping () -> Bool, onReady: @escaping () -> Void) {
        self.fd = fd
        self.paused = paused
        self.onReady = onReady
    }
    var pollInterest: (fd: Int32, events: PollEvents)? { paused() ? nil : (fd, .readable) }
    func dispatch(_ events: PollEvents) { onReady() }
}

/// The guard's machine deadline, on CLOCK_MONOTONIC (poll's own timeout): the guard
/// acts on waking time, as the agent-grace is room for a restart.
final class GuardDeadline: EventSource {
    let next: () -> MonotonicInstant?
    let onFire: () -> Void
    init(next: @escaping () -> MonotonicInstant?, onFire: @escaping () -> Void) throws(SystemError) {
        self.next = next
        self.onFire = onFire
    }
    var deadline: MonotonicInstant? { next() }
    var preparesLast: Bool { true }
    func dispatch(_ events: PollEvents) { onFire() }
}
