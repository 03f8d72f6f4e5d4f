/// Something that happens once per idle period when the idle time reaches `idleTime`.
public struct Stage: Equatable, Sendable {
    public enum Role: String, Equatable, Sendable {
        /// Warns before the lock; skipped while locked, ended when input returns.
        case notify
        /// Runs the locker, which is supervised: never two at once, never killed.
        case lock
        /// Any other command (dim, screen off, suspend).
        case custom
    }

    public var name: String
    public var role: Role
    /// The idle time on AC power (and where no power source is known).
    public var idleTime: Millis
    /// The idle time on battery (`on-battery=`), where it differs.
    public var idleTimeOnBattery: Millis?
    public var command: String
    /// Run when activity returns after this stage fired.
    public var resumeCommand: String?
    /// Holds of these sources do not hold this stage off (`ignore=`): a dim while a
    /// film plays. The policy still decides which sources may hold at all.
    public var ignoresHolds: Set<InhibitorSource> = []

    public init(name: String, role: Role, idleTime: Millis, command: String, resumeCommand: String? = nil,
                idleTimeOnBattery: Millis? = nil, ignoresHolds: Set<InhibitorSource> = []) {
        self.name = name
        self.role = role
        self.idleTime = idleTime
        self.command = command
        self.resumeCommand = resumeCommand
        self.idleTimeOnBattery = idleTimeOnBattery
        self.ignoresHolds = ignoresHolds
    }

    /// The idle time in force on this power source.
    public func idleTime(onBattery: Bool) -> Millis { onBattery ? idleTimeOnBattery ?? idleTime : idleTime }

    /// As the settings report and the start's log line say it: `dim=4m (2m on battery; ignores audio)`.
    public var summary: String {
        var notes: [String] = []
        if let battery = idleTimeOnBattery { notes.append("\(battery) on battery") }
        if ignoresHolds == Set(InhibitorSource.allCases) {
            notes.append("ignores every hold")
        } else if !ignoresHolds.isEmpty {
            notes.append("ignores " + InhibitorSource.allCases.filter(ignoresHolds.contains).map(\.rawValue).joined(separator: ", "))
        }
        return "\(name)=\(idleTime)" + (notes.isEmpty ? "" : " (" + notes.joined(separator: "; ") + ")")
    }
}

/// A setting as `status` and `doctor` show it: `lock-after`, `5m`, `flag`.
public struct ReportedSetting: Equatable, Sendable {
    public var name: String
    public var value: String
    /// `flag`, `default`, `FILE:LINE` or `policy FILE`.
    public var from: String

    public init(name: String, value: String, from: String) {
        self.name = name
        self.value = value
        self.from = from
    }
}

/// Everything the idle state machine needs to know, fixed for the agent's life.
public struct AgentConfig: Equatable, Sendable {
    /// Sorted by idle time; ties keep their given order.
    public private(set) var stages: [Stage]
    public var onUnlock: String?
    public var onUnlockInterval: Millis
    /// Default true: an `XResetScreenSaver` (video players) or a pointer warp counts as activity.
    public var screensaverResetCountsAsActivity: Bool
    /// Default true: input faked through XTEST (xdotool, jigglers, x11vnc) counts as
    /// activity. False (`--ignore-xtest`, `--secure`): the edge drops it, and the
    /// counter resets it makes do not count either (`screensaverResetCountsAsActivity`
    /// is false with it).
    public var xtestInputCounts = true
    /// Default true: time spent suspended counts as idle time. False is xautolock's `-detectsleep`.
    public var suspendCountsAsIdle: Bool
    /// How long after its start the locker has to be seen grabbing the keyboard.
    public var lockerGrabDeadline: Millis
    /// An exit 0 sooner than this after the start never held the screen.
    public var lockerShortestHold: Millis
    /// With `screensaverResetCountsAsActivity` false, how long input listening pauses after
    /// input; server activity inside the pause is attributed to input.
    public var inputPause: Millis
    /// Lock before the system sleeps (logind's PrepareForSleep), holding the sleep off until covered.
    public var lockBeforeSleep: Bool = true
    /// Lock the moment another session comes to the front (`--lock-on-switch`).
    public var lockOnSwitch = false
    /// Turn the monitor off (DPMS) once the screen has been locked this long without
    /// input, whatever holds the stages (`--screen-off-after-lock`), on AC and on battery.
    public var screenOffAfterLock: Millis?
    public var screenOffAfterLockOnBattery: Millis?
    /// Lock as the agent starts (`--lock-at-start`).
    public var lockAtStart = false
    /// Lock when a card that counts is taken out (`--lock-on-card-removal`); nil: off.
    public var cardRemoval: CardSettings?
    public var beforeSleep: String?
    public var afterResume: String?
    /// `--corners`; nil when no corner does anything.
    public var corners: CornerSettings?
    /// `--secure` (given, or the policy's): no inhibitor of any source holds the lock off.
    public var secure = false
    /// The sources whose inhibitors hold the lock off (the policy's inhibit-from).
    public var allowedInhibitors = Set(InhibitorSource.allCases)
    /// How long the holds (inhibitors, a disable) may keep the screen unlocked without
    /// input, however chained or renewed (the policy's max-inhibit).
    public var maxInhibit: Millis?
    /// Whose logind idle inhibitors hold the lock off, and who "own" is.
    public var logindInhibitors = LogindInhibitorPolicy.own
    public var userID: UInt32 = 0
    /// For status: the config files read and what the admin's policy changed.
    public var configFiles: [String] = []
    /// The files and lines skipped, each said in status and by `doctor`.
    public var configProblems: [ConfigProblem] = []
    public var policy: PolicyReport?
    /// Under a policy: the session as logind names it, and where the environment disagreed.
    public var session: AgentSession?
    /// For status and `doctor`: the main settings, their values and where each came from.
    public var settings: [ReportedSetting] = []

    public init(
        stages: [Stage],
        onUnlock: String? = nil,
        onUnlockInterval: Millis = .zero,
        screensaverResetCountsAsActivity: Bool = true,
        suspendCountsAsIdle: Bool = true,
        lockerGrabDeadline: Millis = .seconds(3),
        lockerShortestHold: Millis = .seconds(1),
        inputPause: Millis = .seconds(1)
    ) {
        self.stages = AgentConfig.ordered(stages)
        self.onUnlock = onUnlock
        self.onUnlockInterval = onUnlockInterval
        self.screensaverResetCountsAsActivity = screensaverResetCountsAsActivity
        self.suspendCountsAsIdle = suspendCountsAsIdle
        self.lockerGrabDeadline = lockerGrabDeadline
        self.lockerShortestHold = lockerShortestHold
        self.inputPause = inputPause
    }

    /// The flag that makes only real input count, as the log and refusals name it.
    var onlyInputFlag: String { xtestInputCounts || secure ? "--ignore-screensaver-reset" : "--ignore-xtest" }

    /// Stable sort by idle time, so stages with equal times fire in the order given.
    static func ordered(_ stages: [Stage]) -> [Stage] {
        stages.enumerated()
            .sorted { ($0.element.idleTime, $0.offset) < ($1.element.idleTime, $1.offset) }
            .map(\.element)
    }

    public var lockStage: Stage? { stages.first { $0.role == .lock } }

    /// Why an inhibitor of this source is refused; nil when it holds the lock off.
    public func refusal(for source: InhibitorSource) -> String? {
        if secure { return "the agent runs with --secure" }
        guard allowedInhibitors.contains(source) else {
            let allowed = InhibitorSource.allCases.filter(allowedInhibitors.contains).map(\.rawValue)
            return "the policy's inhibit-from allows " + (allowed.isEmpty ? "none" : allowed.joined(separator: ", "))
        }
        return nil
    }
}

/// Which logind idle inhibitors hold the stages off.
public enum LogindInhibitorPolicy: String, Sendable, CaseIterable {
    /// This user's own (a shared workstation must not be kept open by a system
    /// service or another user); the others are shown, not honoured.
    case own
    case all
    case none
}
