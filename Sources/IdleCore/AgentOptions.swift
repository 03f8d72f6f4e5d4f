// The agent's flags: parsed and checked, and the configuration they make.

public enum Verbosity: Int, Equatable, Sendable {
    case quiet, normal, verbose

    /// The least severe level that is written to the log.
    public var threshold: LogLevel {
        switch self {
        case .quiet: .warning
        case .normal: .info
        case .verbose: .debug
        }
    }
}

/// The agent's flags, as given.
public struct AgentOptions: Equatable, Sendable {
    public var lockAfter = Millis.minutes(10)
    /// The lock time on battery, where it differs (UPower's OnBattery).
    public var lockAfterOnBattery: Millis?
    public var screenOffAfterLock: Millis?
    public var screenOffAfterLockOnBattery: Millis?
    public var locker: String?
    public var notifyBefore: Millis?
    public var notifier: String?
    public var onUnlock: String?
    public var onUnlockInterval = Millis.zero
    public var ignoreScreensaverReset = false
    /// `--ignore-xtest`: input faked through XTEST (xdotool, jigglers, x11vnc) is not activity.
    public var ignoreXtest = false
    public var suspendResetsIdle = false
    public var verbosity = Verbosity.normal
    /// Stages given with --stage, in the order given.
    public var stages: [Stage] = []
    public var socket: String?
    public var secure = false
    public var lockBeforeSleep = true
    public var lockOnSwitch = false
    public var lockAtStart = false
    public var lockOnCardRemoval = false
    /// `--card-atr`: the cards whose removal locks; nil: every card.
    public var cardATRs: [CardATR]?
    public var beforeSleep: String?
    public var afterResume: String?
    public var transferSleepLock = false
    /// Whose logind idle inhibitors hold the stages off: own, all or none.
    public var logindInhibitors = "own"
    public var logind = true
    /// The sources that a flag of their own switches (see `HoldSourceRow.flag`), as switched.
    public var switchedSources = AgentOptions.sourcesOnByDefault
    public var corners: HotCorners?
    /// xautolock's defaults: -cornerdelay 5, -cornersize 10.
    public var cornerDelay = Millis.seconds(5)
    public var cornerSize: Int32 = 10
    /// `--config FILE` (instead of the user's file) and `--no-config` (no files).
    public var configFile: String?
    public var noConfig = false
    /// The config files read, lowest first.
    public var configFiles: [String] = []
    /// The files and lines that could not be used, and were skipped.
    public var configProblems: [ConfigProblem] = []
    /// Where each setting (by group: see `group`) came from; a default has none.
    public var origins: [String: SettingOrigin] = [:]
    /// The user's settings that would weaken `secure` or the policy, undone by
    /// `refuseWeakenings` ("--no-logind", …): said at start, and in status.
    public var weakeningsRefused: [String] = []
    /// The admin's policy, when there is one, and what it changed.
    public var policy: PolicyReport?
    /// Which sources may hold the lock off (the policy's inhibit-from).
    public var allowedInhibitors = Set(InhibitorSource.allCases)
    /// The longest a hold may last (the policy's max-inhibit).
    public var maxInhibit: Millis?

    public init() {}

    static let specs: [OptionSpec<AgentOptions>] = [
        OptionSpec("--lock-after", "DURATION", "Idle time before the locker runs (default: 10m).") { o, v throws(UsageError) in
            o.lockAfter = try duration(v, for: "--lock-after")
        },
        OptionSpec("--lock-after-on-battery", "DURATION", "Idle time before the locker runs while on battery (UPower; default: --lock-after).") { o, v throws(UsageError) in
            o.lockAfterOnBattery = try duration(v, for: "--lock-after-on-battery")
        },
        OptionSpec("--screen-off-after-lock", "DURATION", "Turn the monitor off (DPMS) once the screen has been locked this long without input, whatever holds the stages; input turns it on, and it goes off again after DURATION.") { o, v throws(UsageError) in
            o.screenOffAfterLock = try duration(v, for: "--screen-off-after-lock")
        },
        OptionSpec("--screen-off-after-lock-on-battery", "DURATION", "--screen-off-after-lock while on battery.") { o, v throws(UsageError) in
            o.screenOffAfterLockOnBattery = try duration(v, for: "--screen-off-after-lock-on-battery")
        },
        OptionSpec("--locker", "CMD", "Shell command that locks the screen and keeps running until unlocked (default: the first installed of xsecurelock, i3lock -n, slock).") { o, v throws(UsageError) in
            o.locker = try command(v, for: "--locker")
        },
        OptionSpec("--notify-before", "DURATION", "Run the notifier this long before the lock; input after it cancels the lock.") { o, v throws(UsageError) in
            o.notifyBefore = try duration(v, for: "--notify-before")
        },
        OptionSpec("--notifier", "CMD", "Shell command that warns of the coming lock (with --notify-before); ended when input returns.") { o, v throws(UsageError) in
            o.notifier = try command(v, for: "--notifier")
        },
        OptionSpec("--on-unlock", "CMD", "Shell command run when the locker exits.") { o, v throws(UsageError) in
            o.onUnlock = try command(v, for: "--on-unlock")
        },
        OptionSpec("--on-unlock-interval", "DURATION", "Run --on-unlock at most once per this time (default: 0s, every unlock).") { o, v throws(UsageError) in
            o.onUnlockInterval = try duration(v, for: "--on-unlock-interval", allowZero: true)
        },
        OptionSpec("--ignore-screensaver-reset", nil, "Count only real input as activity, not screensaver resets (video players, xset s reset) or pointer warps.") { o, _ in
            o.ignoreScreensaverReset = true
        },
        OptionSpec("--ignore-xtest", nil, "Count no input faked through XTEST as activity (xdotool, mouse jigglers, x11vnc: such a session locks while in use), nor the idle-counter resets it makes (screensaver resets look the same, and do not count either). A locker still gets its keys.") { o, _ in
            o.ignoreXtest = true
        },
        OptionSpec("--suspend-resets-idle", nil, "A suspend restarts the idle time instead of counting as idle time (xautolock's -detectsleep).") { o, _ in
            o.suspendResetsIdle = true
        },
        OptionSpec("--stage", "[NAME=]DURATION[ on-battery=DURATION][ ignore=SOURCES]:CMD", "Also run CMD at this idle time, once per idle period (repeatable; e.g. dim=4m:'brightnessctl -s set 10%'). on-battery= is its time on battery; ignore= lists the holds it fires through (\(InhibitorSource.words), or all), e.g. 'dim=4m ignore=audio,dbus:CMD'.") { o, v throws(UsageError) in
            o.stages.append(try parseStage(v, number: o.stages.count + 1))
            if o.stages.dropLast().contains(where: { $0.name == o.stages.last?.name }) {
                throw UsageError("--stage: the name '\(o.stages.last!.name)' is used twice")
            }
        },
        OptionSpec("--resume", "CMD", "Run CMD when activity returns after the --stage just before it fired.") { o, v throws(UsageError) in
            guard !o.stages.isEmpty else { throw UsageError("--resume must follow the --stage it belongs to") }
            guard o.stages[o.stages.count - 1].resumeCommand == nil else {
                throw UsageError("--resume: stage '\(o.stages[o.stages.count - 1].name)' has a resume command already")
            }
            guard !v.isEmpty else { throw UsageError("--resume: the command is empty") }
            o.stages[o.stages.count - 1].resumeCommand = v
        },
        OptionSpec("--socket", "PATH", "Control socket (default: $XDG_RUNTIME_DIR/xidlelock/DISPLAY.sock).") { o, v throws(UsageError) in
            o.socket = try socketPath(v)
        },
        OptionSpec("--secure", nil, "Nothing may hold the lock off or stop the agent (for managed machines): only input on this X server's devices counts as activity (no XTEST input, as --ignore-xtest, no screensaver resets, pointer warps or SimulateUserActivity); refuse disable, inhibit, toggle, reset and quit over the socket, the buses' and the X server's inhibitors, \(InhibitorSource.optInFlags) and - corners.") { o, _ in
            o.secure = true
        },
        OptionSpec("--no-lock-before-sleep", nil, "Do not lock when logind announces a suspend (by default the sleep waits until the locker covers the screen).") { o, _ in
            o.lockBeforeSleep = false
        },
        OptionSpec("--lock-on-switch", nil, "Lock the moment another session comes to the front (a switch to another VT or user), as logind reports it.") { o, _ in
            o.lockOnSwitch = true
        },
        OptionSpec("--lock-at-start", nil, "Lock the moment the agent starts, before any hold is heard (auto-login kiosks, sessions restored without a password).") { o, _ in
            o.lockAtStart = true
        },
        OptionSpec("--lock-on-card-removal", nil, "Lock the moment a smart card (or a USB token such as a YubiKey) is taken out, or its reader unplugged: any card present at the start or inserted since, as pcscd reports it.") { o, _ in
            o.lockOnCardRemoval = true
        },
        OptionSpec("--card-atr", "LIST", "With --lock-on-card-removal, only the cards with these ATRs count: a comma-separated list of hex bytes (e.g. 3b951381018073ff01000b; spaces and colons between bytes allowed).") { o, v throws(UsageError) in
            o.cardATRs = try CardATR.list(v, for: "--card-atr")
        },
        OptionSpec("--before-sleep", "CMD", "Shell command run when the system is about to sleep, inside logind's sleep delay.") { o, v throws(UsageError) in
            o.beforeSleep = try command(v, for: "--before-sleep")
        },
        OptionSpec("--after-resume", "CMD", "Shell command run when the system has resumed (XIDLELOCK_SUSPEND_GAP_MS says how long it slept).") { o, v throws(UsageError) in
            o.afterResume = try command(v, for: "--after-resume")
        },
        OptionSpec("--transfer-sleep-lock", nil, "Give the locker logind's sleep delay as XSS_SLEEP_LOCK_FD, to close once it covers the screen (automatic for xsecurelock).") { o, _ in
            o.transferSleepLock = true
        },
        OptionSpec("--logind-inhibitors", "WHOSE", "Whose logind idle inhibitors hold the lock off: own (default; others are shown, not honoured), all or none.") { o, v throws(UsageError) in
            guard ["own", "all", "none"].contains(v) else { throw UsageError("--logind-inhibitors: '\(v)' is not one of own, all, none") }
            o.logindInhibitors = v
        },
        OptionSpec("--no-logind", nil, "Do not talk to logind: no lock before sleep, no lock-session, no hints, no idle inhibitors.") { o, _ in
            o.logind = false
        },
    ] + sourceFlagSpecs + [
        OptionSpec("--corners", "XXXX", "Hot corners of each monitor: top-left, top-right, bottom-left, bottom-right; + locks once the pointer rests there for --corner-delay, - never locks while it rests there, 0 does nothing (e.g. 00+-).") { o, v throws(UsageError) in
            o.corners = try HotCorners(v)
        },
        OptionSpec("--corner-delay", "DURATION", "How long the pointer rests in a + corner before the lock (default: 5s).") { o, v throws(UsageError) in
            o.cornerDelay = try duration(v, for: "--corner-delay")
        },
        OptionSpec("--corner-size", "PIXELS", "The corners' size in pixels (default: 10).") { o, v throws(UsageError) in
            guard let size = Int32(v), (1...4096).contains(size) else {
                throw UsageError("--corner-size: '\(v)' is not a number of pixels from 1 to 4096")
            }
            o.cornerSize = size
        },
        OptionSpec("--config", "FILE", "Read this config file instead of the user's ($XDG_CONFIG_HOME/xidlelock/config, else ~/.config/xidlelock/config; after /etc/xidlelock/config).") { o, v throws(UsageError) in
            guard !v.isEmpty else { throw UsageError("--config: the path is empty") }
            o.configFile = v
        },
        OptionSpec("--no-config", nil, "Read no config file (the admin's policy still applies).") { o, _ in
            o.noConfig = true
        },
        OptionSpec("--verbose", nil, "Log every wake-up and decision.") { o, _ in o.verbosity = .verbose },
        OptionSpec("--quiet", nil, "Log only warnings and errors.") { o, _ in o.verbosity = .quiet },
    ]

    /// Rules that span several flags.
    func validate(_ given: Set<String>) throws(UsageError) {
        if given.contains("--config") && given.contains("--no-config") {
            throw UsageError("--config and --no-config cannot be used together")
        }
        if given.contains("--verbose") && given.contains("--quiet") {
            throw UsageError("--verbose and --quiet cannot be used together")
        }
        if given.contains("--card-atr") && !lockOnCardRemoval {
            throw UsageError("--card-atr needs --lock-on-card-removal")
        }
        for flag in ["--corner-delay", "--corner-size"] where given.contains(flag) && corners == nil {
            throw UsageError("\(flag) needs --corners XXXX")
        }
        switch (notifyBefore, notifier) {
        case (.some, nil): throw UsageError("--notify-before needs --notifier CMD")
        case (nil, .some): throw UsageError("--notifier needs --notify-before DURATION")
        case (.some(let before), .some):
            if before >= lockAfter {
                throw UsageError("--notify-before (\(before)) must be shorter than --lock-after (\(lockAfter))")
            }
            if let battery = lockAfterOnBattery, before >= battery {
                throw UsageError("--notify-before (\(before)) must be shorter than --lock-after-on-battery (\(battery))")
            }
        case (nil, nil): break
        }
    }

    /// `[NAME=]DURATION[ on-battery=DURATION][ ignore=SOURCES]:CMD`; without a name the
    /// stage is called `stageN`. The settings before the first colon are words of
    /// KEY=VALUE (hypridle's listener has `ignore_inhibit`, all or nothing; here by
    /// source), so the command after it may hold any colon.
    static func parseStage(_ text: String, number: Int) throws(UsageError) -> Stage {
        guard let colon = text.firstIndex(of: ":") else {
            throw UsageError("--stage: '\(text)' is not [NAME=]DURATION:CMD (e.g. dim=4m:'brightnessctl set 10%')")
        }
        let words = text[..<colon].split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard let head = words.first else { throw UsageError("--stage: no idle time before ':' in '\(text)'") }
        let command = String(text[text.index(after: colon)...])
        var name = "stage\(number)"
        var time = String(head)
        if let eq = head.firstIndex(of: "=") {
            name = String(head[..<eq])
            time = String(head[head.index(after: eq)...])
            guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }) else {
                throw UsageError("--stage: the name '\(name)' must be letters, digits, - or _")
            }
            guard name != "lock", name != "notify" else {
                throw UsageError("--stage: the name '\(name)' belongs to --lock-after/--notify-before")
            }
        }
        guard !command.trimmingSpaces.isEmpty else { throw UsageError("--stage: the command after ':' is empty in '\(text)'") }
        var stage = Stage(name: name, role: .custom, idleTime: try duration(time, for: "--stage"), command: command)
        for word in words.dropFirst() {
            let (key, value) = word.firstIndex(of: "=").map { (word[..<$0], String(word[word.index(after: $0)...])) } ?? (word, "")
            switch key {
            case "on-battery":
                stage.idleTimeOnBattery = try duration(value, for: "--stage \(name): on-battery")
            case "ignore":
                stage.ignoresHolds = try ignoredHolds(value, stage: name)
            default:
                throw UsageError("--stage \(name): '\(word)' is not on-battery=DURATION or ignore=SOURCES (the command follows the first ':')")
            }
        }
        return stage
    }

    /// `ignore=`'s list: sources by name, or all.
    static func ignoredHolds(_ text: String, stage: String) throws(UsageError) -> Set<InhibitorSource> {
        if text == "all" { return Set(InhibitorSource.allCases) }
        var sources: Set<InhibitorSource> = []
        for name in text.split(separator: ",", omittingEmptySubsequences: false) {
            guard let source = InhibitorSource(rawValue: String(name)) else {
                let known = InhibitorSource.words
                throw UsageError("--stage \(stage): ignore='\(text)': '\(name)' is not one of \(known), or all")
            }
            sources.insert(source)
        }
        return sources
    }

    static func socketPath(_ path: String) throws(UsageError) -> String {
        guard !path.isEmpty else { throw UsageError("--socket: the path is empty") }
        // sockaddr_un holds 108 bytes with the terminating NUL.
        guard path.utf8.count < 108 else { throw UsageError("--socket: '\(path)' is longer than a socket path may be (107 bytes)") }
        return path
    }

    /// The state machine's configuration, with the locker command chosen by the edge.
    public func config(locker command: String) -> AgentConfig {
        var stages = [Stage(name: "lock", role: .lock, idleTime: lockAfter, command: command,
                            idleTimeOnBattery: lockAfterOnBattery)] + self.stages
        if let notifyBefore, let notifier {
            stages.append(Stage(name: "notify", role: .notify, idleTime: lockAfter - notifyBefore, command: notifier,
                                idleTimeOnBattery: lockAfterOnBattery.map { $0 - notifyBefore }))
        }
        var config = AgentConfig(
            stages: stages,
            onUnlock: onUnlock,
            onUnlockInterval: onUnlockInterval,
            // Under --secure only the user's input counts: no reset, warp or SimulateUserActivity.
            // Nor under --ignore-xtest: XTEST input restarts the server's counter too, and
            // a restart without input counted cannot be told from it.
            screensaverResetCountsAsActivity: !ignoreScreensaverReset && !ignoreXtest && !secure,
            suspendCountsAsIdle: !suspendResetsIdle
        )
        config.lockBeforeSleep = lockBeforeSleep && logind
        config.lockOnSwitch = lockOnSwitch
        config.screenOffAfterLock = screenOffAfterLock
        config.screenOffAfterLockOnBattery = screenOffAfterLockOnBattery
        config.lockAtStart = lockAtStart
        if lockOnCardRemoval {
            var cards = CardSettings(atrs: cardATRs)
            if case .policy? = origins["--lock-on-card-removal"] { cards.byPolicy = true }
            config.cardRemoval = cards
        }
        config.beforeSleep = beforeSleep
        config.afterResume = afterResume
        if let corners = secure ? corners?.withoutHolds : corners, !corners.doesNothing {
            config.corners = CornerSettings(corners: corners, delay: cornerDelay)
        }
        config.secure = secure
        config.xtestInputCounts = !ignoreXtest && !secure
        config.allowedInhibitors = allowedInhibitors
        config.maxInhibit = maxInhibit
        config.logindInhibitors = LogindInhibitorPolicy(rawValue: logindInhibitors) ?? .own
        config.configFiles = configFiles
        config.configProblems = configProblems
        config.policy = policy
        config.settings = settingsReport(locker: command)
        return config
    }

    /// The settings that decide whether and when the screen locks, with their origins.
    func settingsReport(locker command: String) -> [ReportedSetting] {
        func from(_ flag: String, chosen: String = "default") -> String { origins[AgentOptions.group(flag)]?.description ?? chosen }
        var report = [
            ReportedSetting(name: "lock-after", value: lockAfter.description, from: from("--lock-after")),
        ]
        if let lockAfterOnBattery {
            report.append(ReportedSetting(name: "lock-after-on-battery", value: lockAfterOnBattery.description, from: from("--lock-after-on-battery")))
        }
        report += [
            ReportedSetting(name: "locker", value: command, from: from("--locker", chosen: "default (the first installed)")),
        ]
        // The policy's switches, as their rows say: each when on (secure either way).
        for row in PolicySwitch.all where self[keyPath: row.option] || row.reportedWhenOff {
            report.append(ReportedSetting(name: row.name, value: self[keyPath: row.option] ? "yes" : "no", from: from("--" + row.name)))
        }
        // Right after lock-on-card-removal, the last row.
        if lockOnCardRemoval, let cardATRs {
            report.append(ReportedSetting(name: "card-atr", value: cardATRs.map(\.description).joined(separator: ","), from: from("--card-atr")))
        }
        if let notifyBefore { report.append(ReportedSetting(name: "notify-before", value: notifyBefore.description, from: from("--notify-before"))) }
        if !stages.isEmpty {
            report.append(ReportedSetting(name: "stage", value: stages.map(\.summary).joined(separator: ", "), from: from("--stage")))
        }
        for (name, value) in [("screen-off-after-lock", screenOffAfterLock), ("screen-off-after-lock-on-battery", screenOffAfterLockOnBattery)] {
            if let value { report.append(ReportedSetting(name: name, value: value.description, from: from("--" + name))) }
        }
        if let corners { report.append(ReportedSetting(name: "corners", value: corners.description, from: from("--corners"))) }
        if logindInhibitors != "own" {
            report.append(ReportedSetting(name: "logind-inhibitors", value: logindInhibitors, from: from("--logind-inhibitors")))
        }
        for flag in sourceFlagsGiven + (logind ? [] : ["--no-logind"]) {
            report.append(ReportedSetting(name: String(flag.dropFirst(2)), value: "yes", from: from(flag)))
        }
        return report
    }

    /// Some time differs on battery: UPower's OnBattery is worth following.
    public var followsPowerSource: Bool {
        lockAfterOnBattery != nil || screenOffAfterLockOnBattery != nil || stages.contains { $0.idleTimeOnBattery != nil }
    }

    /// What `--secure` turns off of the flags given: nothing may hold the lock off on a
    /// managed machine, so the heuristics are not followed at all (said at start).
    public var refusedBySecure: [String] {
        guard secure else { return [] }
        var refused: [String] = []
        refused += sourceFlagsGiven.filter { InhibitorSource.switched(by: $0)?.row.flag?.isOptIn == true }
        if let corners, corners.actions.contains(.never) { refused.append("the - corners of --corners \(corners)") }
        return refused
    }
}
