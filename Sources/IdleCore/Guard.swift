// The guard's decisions (`xidlelock guard`, the root service): which graphical sessions
// must have a verified agent, when a session counts as unguarded, and what is done
// then. Pure like `IdleMachine`: facts in (logind's sessions, registrations, an agent's
// death or stop, the guard's own locker), actions out, time passed in.
//
// Why a part outside the session: under the admin's policy the session's own user is
// one of the attackers, and every process of the user can be killed, stopped or
// replaced by the user. The guard runs as root; what it knows it verified itself.

/// `xidlelock guard`'s flags (and `xidlelock-guard`'s, the daemon it execs).
public struct GuardOptions: Equatable, Sendable {
    public var verbose = false
    /// The installed agent, the one executable every session's agent must run. Root's
    /// word (the unit's command line): nothing of a user's may move it.
    public var agent: String?
    public init() {}

    static let specs: [OptionSpec<GuardOptions>] = [
        OptionSpec("--verbose", nil, "Log every registration, check and session change, not only refusals, losses and actions.") { o, _ in o.verbose = true },
        OptionSpec("--agent", "PATH", "The installed xidlelock every session's agent must run (default: the xidlelock that started the guard, or bin/xidlelock beside the guard's libexec directory).") { o, v throws(UsageError) in
            guard v.hasPrefix("/") else { throw UsageError("--agent: '\(v)' is not an absolute path") }
            o.agent = v
        },
    ]

    static let command = Invocation.CommandDoc(
        name: "guard", synopsis: "xidlelock guard [--verbose] [--agent PATH]",
        abstract: "Run the root service that guards every graphical session's agent under the admin's policy (see THE GUARD in xidlelock(1)).",
        options: specs.map(\.doc))

    /// `xidlelock guard`'s arguments, and `xidlelock-guard`'s (root's daemon parses
    /// them with this alone, so that no agent option's code is in its image).
    public static func parse(_ arguments: ArraySlice<String>) throws(UsageError) -> Invocation {
        var options = GuardOptions()
        let parsed = try parseArguments(arguments, specs, into: &options, command: "xidlelock guard")
        if parsed.helpRequested { return .help(command.help) }
        try Invocation.noPositionals(parsed, command: "guard")
        return .sessionGuard(options)
    }

    /// The daemon's own command line for these options: what `xidlelock guard` execs.
    public func daemonArguments(agent: String) -> [String] {
        ["--agent", self.agent ?? agent] + (verbose ? ["--verbose"] : [])
    }
}

/// What the guard does when a session's agent is lost (policy `on-agent-lost`).
public enum AgentLostAction: String, Equatable, Sendable, CaseIterable {
    /// Start the policy's locker in the session, as the user.
    case lock
    /// logind's TerminateSession.
    case logoff
}

public struct GuardSettings: Equatable, Sendable {
    public var onAgentLost: AgentLostAction = .lock
    /// Room for the user unit's restart before the guard acts.
    public var agentGrace: Millis = GuardSettings.defaultAgentGrace
    /// This many losses within `repeatWindow` act at once: an agent killed as soon as
    /// it is back gains its user no grace.
    public var repeatedLosses = 3
    public var repeatWindow: Millis = .minutes(10)
    /// This many failed guard lockers in a row log the session off: the guard cannot
    /// lock it, and an unguarded session must not stay open.
    public var lockerFailuresBeforeLogoff = 3
    /// This many failures of the agent's own lockers within `repeatWindow` (it says
    /// each) make the agent lost, acted on at once: lockers killed as they start leave
    /// the screen open however fast the agent starts the next.
    public var agentLockerFailuresBeforeLost = 3
    /// Proof of life. The guard cannot see inside the agent: a process that runs may
    /// still never lock (its loop waits on a grabbed X server, its memory was patched,
    /// it was frozen where no watch sees). So the agent says when its lock is due, and
    /// the guard asks it to answer from its loop once that time has passed without a
    /// word (`lockDueSlack` after), and at the latest `idleProofInterval` after it last
    /// heard from it: an idle agent is woken once per 10 minutes for this, no more.
    /// One that does not answer within `answerWithin` is lost.
    public var lockDueSlack = Millis(500)
    public var idleProofInterval = Millis.minutes(10)
    public var answerWithin = Millis.seconds(1)
    /// How long a LockedHint may read true before the agent's `locked` reaches the guard.
    public var lockedHintGrace = Millis.seconds(1)
    /// Where the guard keeps its metrics for node_exporter's textfile collector (policy
    /// `metrics-directory`; nil: none). Debian's prometheus-node-exporter reads this one.
    public var metricsDirectory: String? = GuardSettings.defaultMetricsDirectory

    public static let defaultAgentGrace = Millis.seconds(10)
    public static let defaultMetricsDirectory = "/var/lib/prometheus/node-exporter"

    public init(onAgentLost: AgentLostAction = .lock, agentGrace: Millis = GuardSettings.defaultAgentGrace) {
        self.onAgentLost = onAgentLost
        self.agentGrace = agentGrace
    }
}

/// A graphical session as logind reports it.
public struct GuardedSession: Equatable, Sendable {
    public var id: String
    public var uid: UInt32
    public var userName: String
    /// logind's `Display` (`:0`).
    public var display: String
    public var active: Bool
    /// logind's `LockedHint`: set by the agent as it locks, but its user may set it at
    /// will; the guard sets it back when nothing it verified locks the screen.
    public var lockedHint: Bool
    /// logind's `Remote` (a VNC server's session; xrdp's says no): guarded all the same,
    /// and said in root's report.
    public var remote: Bool
    /// logind's `Seat` (`seat0`; empty for a remote session), for the guard's metrics.
    public var seat: String

    public init(id: String, uid: UInt32, userName: String, display: String, active: Bool, lockedHint: Bool = false,
                remote: Bool = false, seat: String = "") {
        self.id = id
        self.uid = uid
        self.userName = userName
        self.display = display
        self.active = active
        self.lockedHint = lockedHint
        self.remote = remote
        self.seat = seat
    }
}

/// A registered agent the guard verified: its process and executable.
public struct VerifiedAgent: Equatable, Sendable {
    public var pid: Int32
    public var executable: String
    public init(pid: Int32, executable: String) {
        self.pid = pid
        self.executable = executable
    }
}

/// How an agent was lost.
public enum AgentLoss: Equatable, Sendable, CustomStringConvertible {
    /// Its process ended (pidfd), by whatever means: SIGTERM, SIGKILL, a crash.
    case ended
    /// Stopped (SIGSTOP, SIGTSTP …), seen through ptrace at once.
    case stopped(signal: Int32)
    /// Its control group, or one above it, was frozen (cgroup.freeze: the user may
    /// freeze the cgroups systemd delegates to them), seen through cgroup.events.
    case frozen(cgroup: String)
    /// The guard cannot watch the cgroup tree the user may move the agent in and freeze
    /// (inotify's limits): a freeze could not be seen, so the agent vouches for nothing.
    case unwatchable(reason: String)
    /// It closed its registration while still running.
    case disconnected
    /// Its lockers failed this many times within the repeat window (it said so each time).
    case lockersFailing(Int)
    /// Its loop did not answer the guard's question in time (`GuardSettings.answerWithin`):
    /// it runs but does not act (waits on the X server, patched, frozen unseen).
    case unresponsive(Millis)

    public var description: String {
        switch self {
        case .ended: "the agent ended"
        case .stopped(let signal): "the agent was stopped (signal \(signal))"
        case .frozen(let cgroup): "the agent's control group was frozen (\(cgroup))"
        case .unwatchable(let reason): "the guard \(reason)"
        case .disconnected: "the agent closed its registration"
        case .unresponsive(let waited): "the agent's loop did not answer in \(waited)"
        case .lockersFailing(let failures): "the agent's lockers failed \(failures) times within 10m"
        }
    }

    /// The kind of loss in one word, for the guard's metrics (`how`).
    public var kind: String {
        switch self {
        case .ended: "ended"
        case .stopped: "stopped"
        case .frozen: "frozen"
        case .unwatchable: "unwatchable"
        case .disconnected: "disconnected"
        case .unresponsive: "unresponsive"
        case .lockersFailing: "lockers_failing"
        }
    }

    public static let kinds = ["ended", "stopped", "frozen", "unwatchable", "disconnected", "unresponsive", "lockers_failing"]

    /// Stopped or frozen: the same process may run again (`agentContinued`), and is
    /// still the session's agent until it ends.
    var mayContinue: Bool {
        switch self {
        case .stopped, .frozen, .unwatchable, .unresponsive, .lockersFailing: true
        case .ended, .disconnected: false
        }
    }
}

public enum GuardEvent: Equatable, Sendable {
    /// A session of a user under the policy, new or changed, as logind reports it.
    case sessionSeen(GuardedSession)
    case sessionGone(id: String)
    /// logind cannot be reached: no registration can be verified and no session is
    /// known to be guarded until it answers again (then each session is seen again).
    case logindLost(reason: String)
    /// A peer passed every check of the edge (credentials, executable, session, display).
    case agentVerified(session: String, agent: VerifiedAgent)
    case agentLost(session: String, loss: AgentLoss)
    /// A stopped agent runs again (SIGCONT), or its control group thawed.
    case agentContinued(session: String)
    /// What a verified agent says of its lock.
    case agentReported(session: String, locked: Bool)
    /// A verified agent says when its lock is due (nil: none is due, it is held or
    /// locked). Any line of a verified agent's shows that its loop runs.
    case agentSaysLockDue(session: String, in: Millis?)
    /// A verified agent answered the guard's question from its loop.
    case agentAnswered(session: String)
    /// A verified agent says one of its lockers failed (killed, exited non-zero, never
    /// covered).
    case agentLockerFailed(session: String)
    /// Root asks for the sessions: every verified agent is asked for proof now.
    case proofWanted
    /// Whether the session's X server answered a query of the user's in time
    /// (`checkDisplay`); `detail` says how it failed.
    case displayChecked(session: String, answers: Bool, detail: String)
    case lockerStarted(session: String, pid: Int32)
    case lockerCouldNotStart(session: String, reason: String)
    /// A locker a guard before this one started in the session (before an upgrade's
    /// restart) still runs: followed instead of starting a second, which could not
    /// grab, would fail, and after three tries log the session off. Not the guard's
    /// child: its end is seen, its exit status is not.
    case lockerFound(session: String, pid: Int32)
    /// The guard's locker ended: its exit status, or the signal that killed it.
    case lockerEnded(session: String, pid: Int32, exitStatus: Int32?, signal: Int32)
    /// Time passed (a deadline).
    case tick
}

public enum GuardAction: Equatable, Sendable {
    /// Start the policy's locker in this session as its user.
    case startLocker(session: String)
    case terminateSession(session: String)
    /// Tell the session's agent that the guard's locker runs (it adopts it).
    case handOverLocker(session: String, pid: Int32)
    /// Tell the session's agent how the locker it adopted ended.
    case tellLockerEnded(session: String, pid: Int32, exitStatus: Int32?, signal: Int32)
    /// Ask the session's agent to answer from its loop (`agentAnswered`).
    case askAlive(session: String)
    /// Ask the session's X server a question as the user, with a short deadline
    /// (`displayChecked`): before a locker for an agent whose loop stopped answering,
    /// which a grabbed or hung server explains, and which no locker could then cover.
    case checkDisplay(session: String)
    /// Set the session's LockedHint back to false (its user set it; nothing locks).
    case clearLockedHint(session: String)
    /// Refuse a registration (the edge closes it, says why).
    case refuse(session: String, pid: Int32, reason: String)
    case audit(AuditRecord)
}

/// The guard's view of one session, for its own evidence (root's `doctor --policy`).
public struct GuardSessionState: Equatable, Sendable {
    public enum Locker: Equatable, Sendable {
        case none
        case running(pid: Int32, since: MonotonicInstant)
        /// The last one failed; started again at `at`.
        case retrying(at: MonotonicInstant)
    }

    public var session: GuardedSession
    public var agent: VerifiedAgent?
    /// Why no verified agent guards the session, since when (nil while one does).
    public var unguarded: (reason: String, since: MonotonicInstant)?
    /// When the guard acts for it.
    public var actAt: MonotonicInstant?
    public var losses: [MonotonicInstant] = []
    public var locker: Locker = .none
    public var lockerFailuresInARow = 0
    /// The locker was handed to the agent now registered: its end is the agent's to judge.
    public var lockerHandedOver = false
    /// The running locker is one `lockerFound`: how it ends cannot be known.
    public var lockerEndUnseen = false
    public var agentSaysLocked: Bool?
    /// When the guard asks the agent for proof of life next (nil: no agent).
    public var proofBy: MonotonicInstant?
    /// The question outstanding, asked at this time.
    public var askedAt: MonotonicInstant?
    /// The lock the agent said is due, for the time the guard acts if it never came.
    public var lockDueAt: MonotonicInstant?
    /// Lost because its loop did not answer: a line from it later is its loop again.
    public var lostUnresponsive = false
    /// Lost because its lockers kept failing: its `locked` (a locker that covers) guards again.
    public var lostLockersFailing = false
    /// When the agent's lockers failed within the repeat window.
    public var agentLockerFailures: [MonotonicInstant] = []
    /// The X server is being asked (`checkDisplay`) before the guard's locker.
    public var checkingDisplay = false
    /// LockedHint true while nothing verified locks: looked at again at this time (the
    /// agent sets the hint and tells the guard of its lock in two messages, either first).
    public var lockedHintCheckAt: MonotonicInstant?
    /// The last thing the guard did for this session, in words, and when.
    public var lastAction: (what: String, at: MonotonicInstant)?

    public static func == (a: GuardSessionState, b: GuardSessionState) -> Bool {
        a.session == b.session && a.agent == b.agent && a.unguarded?.reason == b.unguarded?.reason
            && a.unguarded?.since == b.unguarded?.since && a.actAt == b.actAt && a.losses == b.losses
            && a.locker == b.locker && a.lockerFailuresInARow == b.lockerFailuresInARow
            && a.lockerHandedOver == b.lockerHandedOver && a.agentSaysLocked == b.agentSaysLocked
            && a.lastAction?.what == b.lastAction?.what && a.lastAction?.at == b.lastAction?.at
            && a.proofBy == b.proofBy && a.askedAt == b.askedAt && a.lockDueAt == b.lockDueAt
            && a.lostUnresponsive == b.lostUnresponsive && a.checkingDisplay == b.checkingDisplay
            && a.lockedHintCheckAt == b.lockedHintCheckAt && a.lostLockersFailing == b.lostLockersFailing
            && a.agentLockerFailures == b.agentLockerFailures
    }

    /// Guarded: a verified agent runs and is not stopped.
    public var guarded: Bool { agent != nil && unguarded == nil }
    /// The screen is held by the guard's own locker, or the verified agent, guarding, says
    /// it is locked. A stopped or frozen agent's last word proves nothing of now.
    public var locked: Bool {
        if case .running = locker { return true }
        return guarded && agentSaysLocked == true
    }
}

/// What the guard saw and did since it started, counted where it happens (the
/// machine), for its metrics.
public struct GuardCounts: Equatable, Sendable {
    /// Agents lost, by `AgentLoss.kind`.
    public var agentsLost: [String: Int] = [:]
    /// The guard's own lockers started.
    public var guardLocks = 0
    /// Sessions the guard logged off.
    public var logoffs = 0
    /// Registrations refused (by the edge's checks or the machine).
    public var refusedRegistrations = 0
    /// The guard's own lockers that failed (killed, non-zero, returned at once, not started).
    public var guardLockerFailures = 0
    /// Failures of their lockers the verified agents said.
    public var agentLockerFailures = 0
    public init() {}
}

public struct GuardMachine: Sendable {
    public let settings: GuardSettings
    public private(set) var sessions: [String: GuardSessionState] = [:]
    public private(set) var counts = GuardCounts()
    /// The guard's locker exits 0 as an unlock only after it ran this long: the guard
    /// has no X connection and so no grab probe; this is the agent's grab deadline,
    /// by which any locker that locks has grabbed (and no one types a password sooner).
    public let shortestGuardLock = LockerSupervisor().grabDeadline

    public init(settings: GuardSettings) {
        self.settings = settings
    }

    /// The earliest time the machine must be told `.tick`.
    public var nextDeadline: MonotonicInstant? {
        var earliest: MonotonicInstant?
        for state in sessions.values {
            for due in [state.actAt, state.retryAt, state.proofDue(settings), state.lockedHintCheckAt] {
                if let due, earliest.map({ due < $0 }) ?? true { earliest = due }
            }
        }
        return earliest
    }

    public mutating func handle(_ event: GuardEvent, at now: MonotonicInstant) -> [GuardAction] {
        var actions: [GuardAction] = []
        switch event {
        case .sessionSeen(let session):
            if var state = sessions[session.id] {
                let becameActive = session.active && !state.session.active
                state.session = session
                // Never registered: the grace counts from the session coming to the front.
                if becameActive, state.agent == nil, state.actAt == nil, state.lastAction == nil, state.locker == .none {
                    state.actAt = now + settings.agentGrace
                }
                if state.unguarded?.reason == GuardMachine.logindUnreachable, state.agent != nil {
                    state.unguarded = nil
                    state.actAt = nil
                }
                state.watchLockedHint(at: now, settings: settings)
                sessions[session.id] = state
            } else {
                var state = GuardSessionState(session: session)
                state.unguarded = ("no agent has registered", now)
                if session.active { state.actAt = now + settings.agentGrace }
                state.watchLockedHint(at: now, settings: settings)
                sessions[session.id] = state
            }
        case .sessionGone(let id):
            sessions[id] = nil
        case .logindLost(let reason):
            for id in sessions.keys.sorted() {
                guard var state = sessions[id], state.unguarded == nil else { continue }
                state.unguarded = (GuardMachine.logindUnreachable, now)
                state.actAt = now + settings.agentGrace
                sessions[id] = state
                actions.append(.audit(GuardAudit.unguarded(state.session, reason: "logind cannot be reached (\(reason))")))
            }
        case .agentVerified(let id, let agent):
            guard var state = sessions[id] else {
                counts.refusedRegistrations += 1
                return [.refuse(session: id, pid: agent.pid, reason: "session \(id) is not a graphical session the guard watches")]
            }
            if let running = state.agent, running.pid != agent.pid, state.unguarded == nil {
                counts.refusedRegistrations += 1
                return [.refuse(session: id, pid: agent.pid, reason: "pid \(running.pid) already guards session \(id)")]
            }
            state.agent = agent
            state.unguarded = nil
            state.actAt = nil
            state.agentSaysLocked = nil
            state.heard(at: now, settings: settings)
            actions.append(.audit(GuardAudit.registered(state.session, agent)))
            if case .running(let pid, _) = state.locker {
                state.lockerHandedOver = true
                actions.append(.handOverLocker(session: id, pid: pid))
            } else if case .retrying = state.locker {
                // The agent locks from here (its own supervisor, the same policy locker).
                state.locker = .none
                state.lockerFailuresInARow = 0
            }
            sessions[id] = state
        case .agentLost(let id, let loss):
            guard var state = sessions[id], let agent = state.agent else { break }
            if state.unguarded != nil {
                // Lost already (stopped): now gone for good; the grace runs on as it was.
                if !loss.mayContinue { state.agent = nil }
                sessions[id] = state
                break
            }
            state.losses = state.losses.filter { now - $0 < settings.repeatWindow } + [now]
            counts.agentsLost[loss.kind, default: 0] += 1
            state.unguarded = (loss.description, now)
            if !loss.mayContinue { state.agent = nil }
            state.lockerHandedOver = false
            state.proofBy = nil
            state.askedAt = nil
            if case .unresponsive = loss { state.lostUnresponsive = true }
            var repeated = state.losses.count >= settings.repeatedLosses
            if case .lockersFailing = loss {
                state.lostLockersFailing = true
                repeated = true
            }
            // A lock that was due and never came: the grace counts from when it was due
            // (the agent had its time), not from when the guard noticed.
            let graceFrom = { if case .unresponsive = loss, let due = state.lockDueAt, due < now { due } else { now } }()
            state.actAt = repeated ? now : Swift.max(now, graceFrom + settings.agentGrace)
            actions.append(.audit(GuardAudit.lost(state.session, agent, loss, losses: state.losses.count,
                                                  actIn: (state.actAt ?? now) - now, action: settings.onAgentLost)))
            sessions[id] = state
            if repeated { actions += act(id, at: now) }
        case .agentContinued(let id):
            guard var state = sessions[id], let agent = state.agent, state.unguarded != nil else { break }
            state.unguarded = nil
            state.actAt = nil
            state.lostUnresponsive = false
            state.lostLockersFailing = false
            state.heard(at: now, settings: settings)
            actions.append(.audit(GuardAudit.registered(state.session, agent, again: true)))
            if case .running(let pid, _) = state.locker {
                state.lockerHandedOver = true
                actions.append(.handOverLocker(session: id, pid: pid))
            }
            sessions[id] = state
        case .agentReported(let id, let locked):
            actions += answeredAgain(id, at: now)
            if locked, sessions[id]?.lostLockersFailing == true, sessions[id]?.agent != nil {
                actions += handle(.agentContinued(session: id), at: now)
            }
            guard var state = sessions[id], state.guarded else { break }
            state.agentSaysLocked = locked
            // Locked: nothing is due until the locker ends (the agent says so then).
            if locked { state.lockDueAt = nil }
            state.heard(at: now, settings: settings)
            sessions[id] = state
        case .agentSaysLockDue(let id, let dueIn):
            actions += answeredAgain(id, at: now)
            guard var state = sessions[id], state.guarded else { break }
            state.lockDueAt = dueIn.map { now + $0 }
            state.heard(at: now, settings: settings)
            sessions[id] = state
        case .agentAnswered(let id):
            actions += answeredAgain(id, at: now)
            guard var state = sessions[id], state.guarded else { break }
            state.heard(at: now, settings: settings)
            sessions[id] = state
        case .agentLockerFailed(let id):
            actions += answeredAgain(id, at: now)
            guard var state = sessions[id], state.guarded else { break }
            counts.agentLockerFailures += 1
            state.agentLockerFailures = state.agentLockerFailures.filter { now - $0 < settings.repeatWindow } + [now]
            state.heard(at: now, settings: settings)
            let failures = state.agentLockerFailures.count
            if failures >= settings.agentLockerFailuresBeforeLost { state.agentLockerFailures = [] }
            sessions[id] = state
            if failures >= settings.agentLockerFailuresBeforeLost {
                actions += handle(.agentLost(session: id, loss: .lockersFailing(failures)), at: now)
            }
        case .proofWanted:
            for id in sessions.keys.sorted() {
                guard var state = sessions[id], state.guarded, state.askedAt == nil else { continue }
                state.askedAt = now
                sessions[id] = state
                actions.append(.askAlive(session: id))
            }
        case .lockerStarted(let id, let pid):
            if sessions[id] != nil { counts.guardLocks += 1 }
            actions += lockerRuns(id, pid: pid, since: now, endUnseen: false,
                                  "started the policy's locker (pid \(pid))", at: now)
        case .lockerCouldNotStart(let id, let reason):
            actions += lockerFailed(id, "could not be started (\(reason))", at: now)
        case .lockerFound(let id, let pid):
            // Held since before this guard: it has covered the screen longer than anyone types.
            actions += lockerRuns(id, pid: pid, since: now - shortestGuardLock, endUnseen: true,
                                  "found the policy's locker running (pid \(pid)), started before the guard's restart: no second", at: now)
        case .lockerEnded(let id, let pid, let exitStatus, let signal):
            guard var state = sessions[id], case .running(let running, let since) = state.locker, running == pid else { break }
            let ran = now - since
            if state.lockerHandedOver && state.guarded {
                // The agent adopted it: the agent judges its end and relocks if it must.
                state.locker = .none
                state.lockerHandedOver = false
                state.lockerEndUnseen = false
                sessions[id] = state
                return [.tellLockerEnded(session: id, pid: pid, exitStatus: exitStatus, signal: signal)]
            }
            if state.lockerEndUnseen {
                // When in doubt, lock: at once, and not counted as a failure of the locker.
                state.locker = .none
                state.lockerEndUnseen = false
                state.lastAction = ("its locker from before its restart ended (how, it cannot tell): locking again", now)
                actions.append(.audit(GuardAudit.acted(state.session, "the locker found running ended after \(ran); its exit status is not the guard's to see: locking again", priority: 4)))
                sessions[id] = state
                if !state.guarded { actions += startLocker(id, at: now) }
                return actions
            }
            if exitStatus == 0 && ran >= shortestGuardLock {
                state.locker = .none
                state.lockerFailuresInARow = 0
                state.lastAction = ("its locker was unlocked after \(ran)", now)
                actions.append(.audit(GuardAudit.acted(state.session, "the guard's locker was unlocked after \(ran) locked", priority: 5)))
                // Still no agent: the grace runs again, and the session locks again after it.
                if !state.guarded { state.actAt = now + settings.agentGrace }
                sessions[id] = state
            } else {
                let why = signal != 0 ? "was killed by signal \(signal) after \(ran)"
                    : exitStatus == 0 ? "exited 0 after \(ran), before it could have held the screen"
                    : "exited with status \(exitStatus ?? -1) after \(ran)"
                actions += lockerFailed(id, why, at: now)
            }
        case .displayChecked(let id, let answers, let detail):
            guard var state = sessions[id], state.checkingDisplay else { break }
            state.checkingDisplay = false
            sessions[id] = state
            guard !state.guarded else { break }
            if answers { actions += startLocker(id, at: now) }
            else { actions += logoff(id, because: "its X server does not answer (\(detail)): grabbed or hung, no locker can cover it", at: now) }
        case .tick:
            for id in sessions.keys.sorted() {
                guard var state = sessions[id] else { continue }
                if state.guarded, let asked = state.askedAt, now >= asked + settings.answerWithin {
                    actions += handle(.agentLost(session: id, loss: .unresponsive(now - asked)), at: now)
                    state = sessions[id] ?? state
                } else if state.guarded, state.askedAt == nil, let due = state.proofBy, now >= due {
                    state.askedAt = now
                    sessions[id] = state
                    actions.append(.askAlive(session: id))
                }
                if let check = state.lockedHintCheckAt, now >= check {
                    state.lockedHintCheckAt = nil
                    if state.session.lockedHint && !state.locked {
                        state.session.lockedHint = false
                        actions.append(.audit(GuardAudit.acted(state.session, "LockedHint was set while nothing the guard verified locks the screen: set back to false", priority: 4)))
                        actions.append(.clearLockedHint(session: id))
                    }
                    sessions[id] = state
                }
                if let due = state.actAt, now >= due { actions += act(id, at: now) }
                if let due = state.retryAt, now >= due, !state.guarded { actions += startLocker(id, at: now) }
            }
        }
        return actions
    }

    static let logindUnreachable = "logind cannot be reached"

    /// A registration the edge refused (its checks of the peer failed): counted, and the
    /// audit entry that says it.
    public mutating func refused(pid: Int32, uid: UInt32, reason: String) -> AuditRecord {
        counts.refusedRegistrations += 1
        return GuardAudit.refused(pid: pid, uid: uid, reason: reason)
    }

    /// A line from an agent lost as unresponsive: its loop runs again, as after a SIGCONT.
    private mutating func answeredAgain(_ id: String, at now: MonotonicInstant) -> [GuardAction] {
        guard let state = sessions[id], state.lostUnresponsive, state.agent != nil else { return [] }
        return handle(.agentContinued(session: id), at: now)
    }

    /// The policy's `on-agent-lost`, for a session without a guarding agent.
    private mutating func act(_ id: String, at now: MonotonicInstant) -> [GuardAction] {
        guard var state = sessions[id] else { return [] }
        state.actAt = nil
        sessions[id] = state
        switch settings.onAgentLost {
        case .logoff:
            return logoff(id, because: state.unguarded?.reason ?? "no agent", at: now)
        case .lock:
            if case .running = state.locker { return [] }
            if state.lostUnresponsive && !state.checkingDisplay {
                sessions[id]?.checkingDisplay = true
                return [.checkDisplay(session: id)]
            }
            return startLocker(id, at: now)
        }
    }

    private mutating func startLocker(_ id: String, at now: MonotonicInstant) -> [GuardAction] {
        guard var state = sessions[id] else { return [] }
        if case .running = state.locker { return [] }
        state.locker = .none
        sessions[id] = state
        return [.startLocker(session: id)]
    }

    private mutating func logoff(_ id: String, because reason: String, at now: MonotonicInstant) -> [GuardAction] {
        guard var state = sessions[id] else { return [] }
        counts.logoffs += 1
        state.lastAction = ("logged the session off (\(reason))", now)
        sessions[id] = state
        return [.audit(GuardAudit.acted(state.session, "logging the session off: \(reason)", priority: 3)),
                .terminateSession(session: id)]
    }

    /// The session's locker runs (started now, or found from before a restart, whose end
    /// cannot be seen): said, and handed to the session's agent if one guards it.
    private mutating func lockerRuns(_ id: String, pid: Int32, since: MonotonicInstant, endUnseen: Bool,
                                     _ what: String, at now: MonotonicInstant) -> [GuardAction] {
        guard var state = sessions[id] else { return [] }
        state.locker = .running(pid: pid, since: since)
        state.lockerEndUnseen = endUnseen
        state.lastAction = (what, now)
        var actions: [GuardAction] = [.audit(GuardAudit.acted(state.session, what, priority: 5))]
        if state.guarded {
            state.lockerHandedOver = true
            actions.append(.handOverLocker(session: id, pid: pid))
        }
        sessions[id] = state
        return actions
    }

    private mutating func lockerFailed(_ id: String, _ why: String, at now: MonotonicInstant) -> [GuardAction] {
        guard var state = sessions[id] else { return [] }
        counts.guardLockerFailures += 1
        state.lockerFailuresInARow += 1
        let failures = state.lockerFailuresInARow
        var actions: [GuardAction] = [.audit(GuardAudit.lockerFailed(state.session, why, failures: failures))]
        state.lastAction = ("its locker \(why)", now)
        if failures >= settings.lockerFailuresBeforeLogoff {
            state.locker = .none
            sessions[id] = state
            return actions + logoff(id, because: "the guard's locker failed \(failures) times in a row", at: now)
        }
        // The guard only ever runs under a policy: no back-off, as the agent's there
        // (lockers killed as they start would otherwise leave the screen open between).
        state.locker = .retrying(at: now + LockerSupervisor(underPolicy: true).retryDelay(attempt: failures))
        sessions[id] = state
        if !state.guarded, case .retrying(let at) = state.locker, at <= now { actions += startLocker(id, at: now) }
        return actions
    }
}

extension GuardSessionState {
    /// A line from the verified agent: its loop runs. The next question comes once its
    /// lock was due and it said nothing since, or after the idle interval.
    mutating func heard(at now: MonotonicInstant, settings: GuardSettings) {
        askedAt = nil
        var next = now + settings.idleProofInterval
        // A due time already past is not asked about again: the agent answered since,
        // and says `locked` or a new due time as its lock goes on.
        if let due = lockDueAt, due + settings.lockDueSlack > now, due + settings.lockDueSlack < next { next = due + settings.lockDueSlack }
        proofBy = next
    }

    /// When the guard must next look at the agent's proof of life: the question's
    /// deadline while one is outstanding, else when to ask (nil: no agent guards).
    func proofDue(_ settings: GuardSettings) -> MonotonicInstant? {
        guard guarded else { return nil }
        return askedAt.map { $0 + settings.answerWithin } ?? proofBy
    }

    /// LockedHint true while nothing verified locks the screen: looked at again soon;
    /// otherwise nothing to look at.
    mutating func watchLockedHint(at now: MonotonicInstant, settings: GuardSettings) {
        if session.lockedHint && !locked { lockedHintCheckAt = lockedHintCheckAt ?? now + settings.lockedHintGrace }
        else { lockedHintCheckAt = nil }
    }

    /// Whether root's question waits on this session's answer.
    public var answerPending: Bool { guarded && askedAt != nil }

    var retryAt: MonotonicInstant? {
        if case .retrying(let at) = locker { return at }
        return nil
    }
}

/// The guard's entries in the audit trail (root's journal: `_UID=0` tells them from
/// anything a user can write).
public enum GuardAudit {
    static func fields(_ session: GuardedSession) -> [(name: String, value: String)] {
        [("XIDLELOCK_SESSION", session.id), ("XIDLELOCK_USER", session.userName),
         ("XIDLELOCK_SESSION_UID", String(session.uid)), ("XIDLELOCK_DISPLAY", session.display)]
    }

    static func registered(_ session: GuardedSession, _ agent: VerifiedAgent, again: Bool = false) -> AuditRecord {
        AuditRecord(event: "guard-agent", priority: 6,
                    message: "session \(session.id) (\(session.userName)) is guarded: agent pid \(agent.pid) verified (\(agent.executable))\(again ? ", running again" : "")",
                    fields: fields(session) + [("XIDLELOCK_PID", String(agent.pid))])
    }

    static func lost(_ session: GuardedSession, _ agent: VerifiedAgent, _ loss: AgentLoss, losses: Int,
                     actIn: Millis, action: AgentLostAction) -> AuditRecord {
        AuditRecord(event: "guard-agent-lost", priority: 3,
                    message: "session \(session.id) (\(session.userName)) is NOT guarded: \(loss) (pid \(agent.pid)); \(action == .lock ? "locking" : "logging off") in \(actIn) (\(losses) loss\(losses == 1 ? "" : "es") within 10m)",
                    fields: fields(session) + [("XIDLELOCK_PID", String(agent.pid)), ("XIDLELOCK_REASON", loss.description),
                                               ("XIDLELOCK_LOSSES", String(losses))])
    }

    static func unguarded(_ session: GuardedSession, reason: String) -> AuditRecord {
        AuditRecord(event: "guard-agent-lost", priority: 3,
                    message: "session \(session.id) (\(session.userName)) is NOT guarded: \(reason)",
                    fields: fields(session) + [("XIDLELOCK_REASON", reason)])
    }

    static func acted(_ session: GuardedSession, _ what: String, priority: Int) -> AuditRecord {
        AuditRecord(event: "guard-action", priority: priority, message: "session \(session.id) (\(session.userName)): \(what)",
                    fields: fields(session) + [("XIDLELOCK_ACTION", what)])
    }

    static func lockerFailed(_ session: GuardedSession, _ why: String, failures: Int) -> AuditRecord {
        AuditRecord(event: "guard-locker-failure", priority: 3,
                    message: "session \(session.id) (\(session.userName)): the guard's locker \(why): the screen may NOT be locked (\(failures) in a row)",
                    fields: fields(session) + [("XIDLELOCK_REASON", why), ("XIDLELOCK_FAILURES", String(failures))])
    }

    public static func refused(pid: Int32, uid: UInt32, reason: String) -> AuditRecord {
        AuditRecord(event: "guard-refused", priority: 4, message: "registration refused (pid \(pid), uid \(uid)): \(reason)",
                    fields: [("XIDLELOCK_PID", String(pid)), ("XIDLELOCK_PEER_UID", String(uid)), ("XIDLELOCK_REASON", reason)])
    }
}

/// The lines between an agent and the guard (over `/run/xidlelock/guard.sock`), and
/// root's question. One message a line; the guard's socket is root's, the peer is
/// checked by the guard itself, so nothing here is taken on the peer's word but what
/// a verified agent says of its own lock.
public enum GuardMessage: Equatable, Sendable {
    // The agent's.
    /// The first line: the display the agent watches.
    case register(display: String)
    /// The agent's status (`status --json`, one line), for root's evidence.
    case status(JSONValue)
    case locked(Bool)
    /// When the agent's lock is due from now (nil: none is due: held, or locked).
    case lockDue(Millis?)
    /// The answer to `askAlive` with its number, from the agent's loop.
    case alive(UInt32)
    /// One of the agent's lockers failed.
    case lockerFailed
    // Root's (`doctor --policy`): every session, as JSON, then the guard closes.
    case sessions
    // The guard's.
    case verified
    case refused(String)
    /// The guard's locker runs in the session: adopt it.
    case locker(pid: Int32)
    /// The adopted locker ended: its exit status or signal.
    case lockerEnded(pid: Int32, exitStatus: Int32?, signal: Int32)
    /// Answer from your loop (`alive N`).
    case askAlive(UInt32)

    /// The longest line either side sends (a status is a few KiB).
    public static let longestLine = 64 * 1024

    public var line: String {
        switch self {
        case .register(let display): "register \(display)\n"
        case .status(let json): "status \(json.text)\n"
        case .locked(let locked): locked ? "locked\n" : "unlocked\n"
        case .lockDue(let dueIn): "due \(dueIn.map { String($0.value) } ?? "-")\n"
        case .alive(let number): "alive \(number)\n"
        case .lockerFailed: "locker-failed\n"
        case .askAlive(let number): "alive? \(number)\n"
        case .sessions: "sessions\n"
        case .verified: "verified\n"
        case .refused(let reason): "refused \(reason.filter { $0 != "\n" })\n"
        case .locker(let pid): "locker \(pid)\n"
        case .lockerEnded(let pid, let exitStatus, let signal): "locker-ended \(pid) \(exitStatus.map(String.init) ?? "-") \(signal)\n"
        }
    }

    public init?(line: Substring) {
        let word = line.prefix { $0 != " " }
        let rest = line.dropFirst(word.count + 1)
        let words = rest.split(separator: " ")
        switch word {
        case "register":
            guard !rest.isEmpty, DisplayName(String(rest)) != nil else { return nil }
            self = .register(display: String(rest))
        case "status":
            guard let json = try? JSONValue(parsing: String(rest)) else { return nil }
            self = .status(json)
        case "locked" where rest.isEmpty: self = .locked(true)
        case "unlocked" where rest.isEmpty: self = .locked(false)
        case "due" where rest == "-": self = .lockDue(nil)
        case "due":
            guard let ms = Int64(rest), ms >= 0 else { return nil }
            self = .lockDue(Millis(ms))
        case "alive", "alive?":
            guard let number = UInt32(rest) else { return nil }
            self = word == "alive" ? .alive(number) : .askAlive(number)
        case "sessions" where rest.isEmpty: self = .sessions
        case "locker-failed" where rest.isEmpty: self = .lockerFailed
        case "verified" where rest.isEmpty: self = .verified
        case "refused": self = .refused(String(rest))
        case "locker":
            guard words.count == 1, let pid = Int32(words[0]), pid > 0 else { return nil }
            self = .locker(pid: pid)
        case "locker-ended":
            guard words.count == 3, let pid = Int32(words[0]), let signal = Int32(words[2]) else { return nil }
            let status = words[1] == "-" ? nil : Int32(words[1])
            guard words[1] == "-" || status != nil else { return nil }
            self = .lockerEnded(pid: pid, exitStatus: status, signal: signal)
        default: return nil
        }
    }
}

extension Policy {
    /// The admin's policy as the guard reads it: the file (nil when there is none), the
    /// policy, and each error. The one reading the agent makes too (`LoadedPolicy`), with
    /// its one rule: an unreadable file or line fails closed (the policy is `secure`, the
    /// lines read are kept). The guard's own settings (its locker, on-agent-lost,
    /// agent-grace) are then those lines' or the defaults: lock, after the default grace.
    /// `sha256`: the file's fingerprint (hex, as `sha256sum` prints it), of the very bytes
    /// read; nil when it could not be read.
    public static func forGuard(from sources: ConfigSources) -> (file: String?, policy: Policy, errors: [String], sha256: String?) {
        let contents = sources.read(sources.policy)
        guard let loaded = LoadedPolicy.read(sources.policy, contents) else { return (nil, Policy(), [], nil) }
        let sha256: String? = switch contents {
        case .bytes(let bytes): SHA256.hex(bytes)
        case .text(let text): SHA256.hex(Array(text.utf8))
        case .missing, .unreadable: nil
        }
        return (loaded.path, loaded.policy, loaded.errors, sha256)
    }
}

extension GuardMachine {
    /// Every session as the guard knows it, for root's `doctor --policy` (`sessions`).
    /// `statuses`: what each verified agent reported at its registration.
    public func report(now: MonotonicInstant, policyFile: String?, statuses: [String: JSONValue]) -> JSONValue {
        func ago(_ at: MonotonicInstant) -> JSONValue { .number(Double((now - at).value)) }
        let list: [JSONValue] = sessions.keys.sorted().compactMap { id in
            guard let state = sessions[id] else { return nil }
            var fields: [(String, JSONValue)] = [
                ("id", .string(id)), ("user", .string(state.session.userName)), ("uid", .number(Double(state.session.uid))),
                ("display", .string(state.session.display)), ("active", .bool(state.session.active)),
                ("remote", .bool(state.session.remote)),
                ("guarded", .bool(state.guarded)),
                ("agent", state.agent.map { .object([("pid", .number(Double($0.pid))), ("executable", .string($0.executable))]) } ?? .null),
                ("unguarded", state.unguarded.map { .object([("reason", .string($0.reason)), ("since_ms", ago($0.since))]) } ?? .null),
                ("locked", .bool(state.locked)),
                ("guard_locker", { if case .running(let pid, _) = state.locker { .number(Double(pid)) } else { .null } }()),
                ("last_action", state.lastAction.map { .object([("what", .string($0.what)), ("ms_ago", ago($0.at))]) } ?? .null),
                ("losses_10m", .number(Double(state.losses.filter { now - $0 < settings.repeatWindow }.count))),
            ]
            fields.append(("agent_status", state.guarded ? statuses[id] ?? .null : .null))
            return .object(fields)
        }
        return .object([
            ("policy", policyFile.map { .string($0) } ?? .null),
            ("on_agent_lost", .string(settings.onAgentLost.rawValue)),
            ("agent_grace_ms", .number(Double(settings.agentGrace.value))),
            ("sessions", .array(list)),
        ])
    }
}
