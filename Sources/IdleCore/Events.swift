/// What the agent's edges tell the state machine.
public enum Event: Equatable, Sendable {
    /// The agent starts; the X server says the user has been idle this long. No stage
    /// fires until each source in `awaiting` has said what it holds now (or
    /// `HoldLimits.startupWait` has passed): an agent restarted during a film must not
    /// lock before it has heard the film's hold.
    case start(serverIdle: Millis, awaiting: Set<InhibitorSource> = [])
    /// Raw input (XInput2) arrived. One event stands for a whole batch.
    case input
    /// A deadline passed (or the edge woke for another reason) and read the
    /// server's idle counter (`nil` if it could not be read), with the X server's
    /// keep-awake holds of the same reading: the counter's reset at a hold's end is
    /// seen before the end, and a hold that begins, before any stage fires.
    case wake(serverIdle: Millis?, holds: HoldReport? = nil)
    /// A process the machine asked for has ended, or could not be started.
    case processEnded(ProcessRole, ProcessEnd)
    /// The agent is asked to stop (SIGTERM, SIGINT, SIGHUP, `xidlelock quit`).
    case stop
    /// `xidlelock lock`: lock now, unless a locker already runs.
    case lockNow
    /// `xidlelock reset` (`.socket`) or org.freedesktop.ScreenSaver.SimulateUserActivity
    /// (`.dbus`): a client asks that now count as activity. Answered.
    case reset(from: InhibitorSource, by: String = "")
    /// What one owner holds now, all of it: the machine compares it with what it knew.
    /// Also says that the owner's source has reported at start.
    case holdsNow(HoldReport)
    /// One more hold (ScreenSaver.Inhibit, `xidlelock inhibit`): answered with its id,
    /// also the D-Bus cookie, or a refusal.
    case holdAsked(HoldOwner, HoldClaim)
    /// The owner ends one of its own holds (UnInhibit). Answered: another owner's id is refused.
    case holdReleased(HoldOwner, id: Int)
    /// The owner is gone (its connection closed, its bus lost): its holds end.
    case ownerGone(HoldOwner)
    /// A source with nothing to report at start has started (or cannot): the first
    /// stage need not wait for it once `settle` has passed (its clients may still be
    /// taking their holds: a browser takes its inhibitor again when it sees the
    /// ScreenSaver service appear).
    case sourceReady(InhibitorSource, settle: Millis = .zero)
    /// A source is lost (its bus, its server): every hold of it ends, whoever held it,
    /// since none can be seen to end any more (fail closed).
    case sourceLost(InhibitorSource)
    /// `xidlelock disable [--for D]`: no stage fires until enabled (or for `span`, from
    /// the moment the machine takes it). `by`: who asked, for the audit trail. Answered.
    case disable(for: Millis?, by: String = "")
    case enable(by: String = "")
    /// `xidlelock quit`: answered; the edge stops only when it is granted.
    case quitAsked(by: String)
    /// A locker started by an earlier agent on this display still runs: no second
    /// locker may start. Its end arrives as `.lockerFact(.endedUnseen)`.
    case lockerAdopted
    /// Something the edge saw of the locker that is not a child's end: the grab
    /// probe's answer, the end of an adopted locker.
    case lockerFact(LockerFact)
    /// The desktop asks for a lock now (logind's Lock signal, `loginctl lock-session`,
    /// the lid switch; org.freedesktop.ScreenSaver.Lock; the X server's own saver).
    case lockRequest(from: String)
    /// logind: the system is about to sleep; the agent holds a delay inhibitor that it
    /// must release within `delayLimit`.
    case prepareForSleep(delayLimit: Millis)
    /// logind: the system has resumed.
    case resumedFromSleep
    /// logind: our session became active (true) or another one is in front (false).
    case sessionActive(Bool)
    /// Where the pointer rests: the answer to `.checkPointerCorner`.
    case pointerRests(PointerRest)
    /// UPower's OnBattery, from UPower's own connection (false with no UPower): the
    /// stages' times on this source take effect at once.
    case powerSource(onBattery: Bool)
    /// What pcscd sees of the smart card readers (`--lock-on-card-removal`).
    case cards(CardReport)
}

/// Someone holding the lock off, as the machine admitted it.
public struct Inhibitor: Equatable, Sendable {
    /// Unique while it holds, and not guessable: also the D-Bus cookie.
    public var id: Int
    /// The real caller, as the agent verified it (`pid 1234 (mpv), :1.42`), never
    /// text the caller chose.
    public var who: String
    /// What the caller said (its application name, its reason).
    public var why: String
    /// When it ends by itself; nil while its client stays connected.
    public var until: BoottimeInstant?
    /// Where it came from, in the user's words.
    public var source: InhibitorSource
    /// The client of the source that holds it ("" for a source with one voice).
    public var client: String
    /// The source's name for it, unique within its owner.
    public var key: String

    public init(id: Int, who: String, why: String, until: BoottimeInstant?, source: InhibitorSource = .socket,
                client: String = "", key: String = "") {
        self.id = id
        self.who = who
        self.why = why
        self.until = until
        self.source = source
        self.client = client
        self.key = key
    }

    public var owner: HoldOwner { HoldOwner(source, client) }
}

/// Who can hold the lock off.
/// What happened, for `xidlelock events` subscribers.
public enum Announcement: Equatable, Sendable {
    case stageFired(name: String, idle: Millis)
    /// The locker was started (attempt 1, or a retry); the screen is not yet known to be covered.
    case locking(idle: Millis, requested: Bool, attempt: Int)
    /// The locker holds the screen (its keyboard grab was seen).
    case locked(idle: Millis, requested: Bool)
    /// The locker runs but was never seen to grab the keyboard, or (`letGo`) let go of
    /// it after holding it: the screen may be visible.
    case lockerNotCovering(runningFor: Millis, letGo: Bool = false)
    /// Another client holds the keyboard or the pointer, so the locker cannot cover the
    /// screen (it held it before the locker started, or, the keyboard, no window of the
    /// locker shows): the screen may be visible.
    case grabHeldByOther(GrabbedDevice, beforeStart: Bool)
    case lockerFailed(kind: String, reason: String, retryIn: Millis)
    case unlocked(lockedFor: Millis)
    case activityResumed(idleBefore: Millis)
    case suspendGap(length: Millis)
    case inhibited(Inhibitor)
    case uninhibited(Inhibitor)
    /// `by`: who disabled or enabled it (a client; for an end by time, what ended it).
    case disabled(remaining: Millis?, by: String = "")
    case enabled(by: String = "")
    /// The system is about to sleep; `covered` tells whether the locker held the screen
    /// when the sleep was let go.
    case sleeping(covered: Bool)
    case resumed
    /// The monitor was turned off, the screen being locked (`--screen-off-after-lock`).
    case screenOff(lockedFor: Millis)
    /// The power source changed (the stages' times in force with it).
    case powerSource(onBattery: Bool)
    /// A card in a reader, at the start or inserted since; `counts`: its removal locks.
    case cardInserted(reader: String, atr: String, counts: Bool)
    /// A card taken out (or its reader unplugged); `locks`: it counted, and the screen locks.
    case cardRemoved(reader: String, atr: String, locks: Bool)
    /// pcscd cannot be watched (why), or can again (nil).
    case cardWatch(error: String?)
}

/// Which of the agent's children a process is.
public enum ProcessRole: Hashable, Sendable, CustomStringConvertible {
    case locker
    /// The command of the stage at this index of `AgentConfig.stages`.
    case stage(Int)
    /// The resume command of the stage at this index.
    case resume(Int)
    case onUnlock
    /// `--before-sleep`, run inside logind's sleep delay.
    case beforeSleep
    /// `--after-resume`.
    case afterResume

    public var description: String {
        switch self {
        case .locker: "locker"
        case .stage(let i): "stage #\(i + 1)"
        case .resume(let i): "resume command of stage #\(i + 1)"
        case .onUnlock: "on-unlock hook"
        case .beforeSleep: "before-sleep hook"
        case .afterResume: "after-resume hook"
        }
    }
}

/// How a child process ended.
public enum ProcessEnd: Equatable, Sendable, CustomStringConvertible {
    case exited(Int32)
    case killed(signal: Int32)
    case failedToStart(String)

    public var succeeded: Bool { self == .exited(0) }

    public var description: String {
        switch self {
        case .exited(let status): "exited with status \(status)"
        case .killed(let signal): "was killed by signal \(signal)"
        case .failedToStart(let reason): "could not be started (\(reason))"
        }
    }
}

public enum LogLevel: Int, Comparable, Sendable {
    case debug, info, warning, error
    /// The audit trail's lines where there is no journal: always written, whatever the verbosity.
    case audit
    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
}

public struct EnvironmentVariable: Equatable, Sendable {
    public var name: String
    public var value: String
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// What the state machine asks the edges to do.
public enum Action: Equatable, Sendable {
    /// Start `/bin/sh -c command` in its own session with these variables added.
    case run(ProcessRole, command: String, environment: [EnvironmentVariable])
    /// End the process group of this role if it still runs (a notifier after input).
    /// Never sent for the locker.
    case terminate(ProcessRole)
    case log(LogLevel, String)
    /// A warning that a hold was refused: anyone at a door can cause any number of
    /// them, so the edge logs them within its one rate limit (the first in full, then
    /// a count).
    case logRefusal(String)
    /// Tell event subscribers.
    case announce(Announcement)
    /// Kill the running locker's process group at once (SIGKILL) and forget it: its end
    /// is not reported, and the next locker may start at once. Sent only under the
    /// policy, for a locker of the agent's own that does not cover the screen
    /// (`LockerFailure.stillRuns`): a failure like an exit 1, not an unlock.
    case killLocker
    /// Ask the X server whether another client holds the keyboard grab (the
    /// locker covering the screen) and the pointer grab; the answer comes back as
    /// `.lockerFact(.grabs(_))` at once.
    case probeGrabs
    /// Let the system sleep: close the logind delay inhibitor.
    case releaseSleepDelay
    /// Tell logind whether the screen is locked (the session's LockedHint).
    case setLockedHint(Bool)
    /// Tell logind whether the user is idle (the session's IdleHint, for IdleAction).
    case setIdleHint(Bool)
    /// Ask the X server where the pointer is; the answer comes back as `.pointerRests` at once.
    case checkPointerCorner
    /// The screen has been locked for `--screen-off-after-lock` without input: the
    /// monitor goes off (DPMS); the X server turns it on at input.
    case turnScreenOff
    /// The lock has ended: the X server's own DPMS settings, as they were before the
    /// agent first turned the monitor off, are put back.
    case restoreScreenSettings
    /// The answer to a client's request (a hold asked for or released, disable, reset, quit).
    case answer(Answer)
}

/// What a client's request got.
public enum Answer: Equatable, Sendable {
    /// A hold, with its id (the D-Bus cookie).
    case granted(id: Int)
    case done
    case refused(String)
}

public struct SuspendGap: Equatable, Sendable {
    /// When the gap was noticed (the first wake-up after resume).
    public var noticedAt: BoottimeInstant
    public var length: Millis
}
