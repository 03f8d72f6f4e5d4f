// The admin's policy, `/etc/xidlelock/policy`: settings a user cannot undo, enforced
// over the flags and the config files. Same grammar as a config file. No flag or
// environment variable points the agent at another policy.
//
// A policy never stops the agent from starting (that would leave the screen
// unlocked): a lock time above its maximum is clamped, and a line it cannot read
// is an error in status and the log that makes the agent as strict as it can be
// (`secure`), keeping the lines it could read.

public struct Policy: Equatable, Sendable {
    public var maxLockAfter: Millis?
    public var secure = false
    public var locker: String?
    /// Which sources may hold the lock off; nil: every one.
    public var inhibitFrom: Set<InhibitorSource>?
    /// The longest the screen may stay unlocked without input, however holds
    /// (inhibitors, disables) are chained or renewed.
    public var maxInhibit: Millis?
    /// Only real input counts as activity: no screensaver reset, pointer warp or
    /// SimulateUserActivity keeps the screen unlocked.
    public var ignoreScreensaverReset = false
    /// Input faked through XTEST (a software jiggler, xdotool, a remote session) is not
    /// activity, nor are the server's counter resets it makes.
    public var ignoreXtest = false
    /// Lock the moment another session comes to the front.
    public var lockOnSwitch = false
    /// Lock the moment the agent starts.
    public var lockAtStart = false
    /// Lock when a smart card is taken out; `cardATRs`: only these cards count.
    public var lockOnCardRemoval = false
    public var cardATRs: [CardATR]?
    /// What the guard (`xidlelock guard`, root) does when a session's agent is lost,
    /// and after how long.
    public var onAgentLost: AgentLostAction?
    public var agentGrace: Millis?
    /// Where the guard keeps its metrics file (an absolute directory, or `none`); nil:
    /// Debian's node_exporter directory.
    public var metricsDirectory: String?
    /// A requirement of the machine, not of the agent: Yama's `kernel.yama.ptrace_scope`
    /// at least this (`doctor --policy` checks it; nothing here sets a sysctl).
    public var ptraceScope: Int?

    public init() {}

    /// The guard's settings this policy makes.
    public var guardSettings: GuardSettings {
        var settings = GuardSettings(onAgentLost: onAgentLost ?? .lock, agentGrace: agentGrace ?? GuardSettings.defaultAgentGrace)
        if let metricsDirectory { settings.metricsDirectory = metricsDirectory == "none" ? nil : metricsDirectory }
        return settings
    }

    /// Every setting a policy file may hold (`max-lock-after`, …), for the docs' tests.
    public static var settingNames: [String] { specs.map { String($0.flag.dropFirst(2)) } }

    static let specs: [OptionSpec<Policy>] = PolicySwitch.all.map(\.spec) + [
        OptionSpec("--max-lock-after", "DURATION", "The longest lock time allowed; a longer one is clamped to it.") { p, v throws(UsageError) in
            p.maxLockAfter = try duration(v, for: "max-lock-after")
        },
        OptionSpec("--locker", "CMD", "The locker, whatever the user's flags and files say.") { p, v throws(UsageError) in
            p.locker = try command(v, for: "locker")
        },
        OptionSpec("--inhibit-from", "LIST", "Which sources may hold the lock off: a comma-separated list of \(InhibitorSource.words); or none.") { p, v throws(UsageError) in
            p.inhibitFrom = try inhibitorSources(v)
        },
        OptionSpec("--max-inhibit", "DURATION", "The longest the screen stays unlocked without input while inhibitors or a disable hold the lock off, however they are chained or renewed.") { p, v throws(UsageError) in
            p.maxInhibit = try duration(v, for: "max-inhibit")
        },
        OptionSpec("--card-atr", "LIST", "The cards whose removal locks (a comma-separated list of ATRs), whatever the user's files say.") { p, v throws(UsageError) in
            p.cardATRs = try CardATR.list(v, for: "card-atr")
        },
        OptionSpec("--on-agent-lost", "lock|logoff", "What the guard does when a session's agent is lost: start the policy's locker in the session (lock, the default) or log the session off (logoff).") { p, v throws(UsageError) in
            guard let action = AgentLostAction(rawValue: v) else {
                throw UsageError("on-agent-lost: '\(v)' is not lock or logoff")
            }
            p.onAgentLost = action
        },
        OptionSpec("--agent-grace", "DURATION", "How long the guard waits for a lost agent to come back before it acts (default 10s); three losses within 10 minutes act at once.") { p, v throws(UsageError) in
            p.agentGrace = try duration(v, for: "agent-grace")
        },
        OptionSpec("--metrics-directory", "PATH", "Where the guard keeps its metrics file xidlelock.prom for node_exporter's textfile collector (default /var/lib/prometheus/node-exporter, Debian's); none for no file. Nothing is written where the directory does not exist.") { p, v throws(UsageError) in
            guard v == "none" || v.hasPrefix("/") else {
                throw UsageError("metrics-directory: '\(v)' is not an absolute path or none")
            }
            p.metricsDirectory = v
        },
        OptionSpec("--ptrace-scope", "N", "The least Yama ptrace scope (kernel.yama.ptrace_scope, 0 to 3) the machine must run with, which doctor --policy checks; at 1 the user can no longer ptrace the lockers of the session. Set by sysctl, not by xidlelock.") { p, v throws(UsageError) in
            guard let scope = Int(v), (0...3).contains(scope) else {
                throw UsageError("ptrace-scope: '\(v)' is not 0, 1, 2 or 3")
            }
            p.ptraceScope = scope
        },
    ]

    static func inhibitorSources(_ text: String) throws(UsageError) -> Set<InhibitorSource> {
        let names = text.split(separator: ",").map { $0.trimmingCharacters(in: " \t") }
        if names == ["none"] { return [] }
        var sources: Set<InhibitorSource> = []
        for name in names {
            guard let source = InhibitorSource(rawValue: name) else {
                let known = InhibitorSource.words
                throw UsageError("inhibit-from: '\(name)' is not one of \(known), or none")
            }
            sources.insert(source)
        }
        return sources
    }
}

/// What the policy did, for status, `doctor` and the log.
public struct PolicyReport: Equatable, Sendable {
    public var path: String
    /// Each change to what the user asked for, in words ("lock-after 30m clamped to 10m").
    public var changes: [String] = []
    /// Lines that could not be read: each made the agent `secure`.
    public var errors: [String] = []
    /// Each setting the file made, as written (`max-lock-after`, `15m`, `PATH:LINE`): what
    /// `doctor --policy` holds against a profile's requirements.
    public var settings: [ReportedSetting] = []

    public init(path: String, changes: [String] = [], errors: [String] = [], settings: [ReportedSetting] = []) {
        self.path = path
        self.changes = changes
        self.errors = errors
        self.settings = settings
    }
}

extension Policy {
    /// The lines of a policy file (the admin's, or a profile of requirements): the policy
    /// they make, each setting read, and each line that could not be ("PATH:LINE: what").
    static func read(_ lines: [(Int, String?)], path: String) -> (policy: Policy, settings: [ReportedSetting], errors: [String]) {
        var policy = Policy()
        var settings: [ReportedSetting] = []
        var errors: [String] = []
        for (k, line) in lines {
            do throws(UsageError) {
                guard let line else { throw UsageError("not UTF-8 text") }
                guard let (flag, value) = try ConfigText.setting(line[...], table: Policy.specs) else { continue }
                try Policy.specs.first { $0.flag == flag }?.apply(&policy, value)
                settings.append(ReportedSetting(name: String(flag.dropFirst(2)), value: value, from: "\(path):\(k)"))
            } catch {
                errors.append("\(path):\(k): \(error.message)")
            }
        }
        return (policy, settings, errors)
    }
}

/// The admin's policy as read from its file, under the one failure rule both its readers
/// (the agent and the guard) share: it fails closed. A file that exists in some form but
/// cannot be read (a dangling symlink, a FIFO, a directory: an admin meant something by
/// it), or a line that cannot be, makes the policy `secure` and keeps the lines it could
/// read; each error says so ("; enforcing secure").
public struct LoadedPolicy: Equatable, Sendable {
    public var path: String
    public var policy: Policy
    public var settings: [ReportedSetting]
    public var errors: [String]

    /// nil when there is no policy file.
    public static func read(from sources: ConfigSources) -> LoadedPolicy? {
        read(sources.policy, sources.read(sources.policy))
    }

    /// The policy from the file's contents, read once by the caller.
    static func read(_ path: String, _ contents: FileContents) -> LoadedPolicy? {
        switch contents {
        case .missing:
            return nil
        case .unreadable(let reason):
            var policy = Policy()
            policy.secure = true
            return LoadedPolicy(path: path, policy: policy, settings: [], errors: ["\(path): cannot be read (\(reason)); enforcing secure"])
        case .bytes, .text:
            let read = Policy.read(ConfigText.lines(contents) ?? [], path: path)
            var policy = read.policy
            if !read.errors.isEmpty { policy.secure = true }
            return LoadedPolicy(path: path, policy: policy, settings: read.settings, errors: read.errors.map { $0 + "; enforcing secure" })
        }
    }
}

extension AgentOptions {
    /// Reads the policy (if there is one) and enforces it over these options.
    mutating func applyPolicy(from sources: ConfigSources) {
        guard let loaded = LoadedPolicy.read(from: sources) else { return }
        var report = PolicyReport(path: loaded.path, errors: loaded.errors, settings: loaded.settings)
        report.changes = enforce(loaded.policy, from: loaded.path)
        self.policy = report
    }

    /// Changes these options to obey `policy`; returns each change in words.
    mutating func enforce(_ policy: Policy, from path: String) -> [String] {
        var changes: [String] = []
        if let max = policy.maxLockAfter, lockAfter > max {
            changes.append("lock-after \(lockAfter) is above the policy's max-lock-after: locking at \(max)")
            lockAfter = max
            origins["--lock-after"] = .policy(path: path)
            if let before = notifyBefore, before >= max {
                let moved = Millis(max.value / 2)
                changes.append("notify-before \(before) no longer fits before the lock: warning \(moved) before it")
                notifyBefore = moved
            }
        }
        if let max = policy.maxLockAfter, let battery = lockAfterOnBattery, battery > max {
            changes.append("lock-after-on-battery \(battery) is above the policy's max-lock-after: locking at \(max) on battery")
            lockAfterOnBattery = max
            origins["--lock-after-on-battery"] = .policy(path: path)
        }
        if let before = notifyBefore, let battery = lockAfterOnBattery, before >= battery {
            // Clamped below the warning: no warning on battery rather than none at all.
            changes.append("notify-before \(before) no longer fits before the lock on battery: warning \(Millis(battery.value / 2)) before it")
            notifyBefore = Millis(Swift.min(before.value, battery.value / 2))
        }
        for row in PolicySwitch.all where row.enforced == .beforeLocker { enforce(row, policy, from: path, &changes) }
        if let locker = policy.locker {
            if let asked = self.locker, asked != locker {
                changes.append("locker '\(asked)' replaced by the policy's '\(locker)'")
            } else if self.locker == nil {
                changes.append("locker: the policy's '\(locker)'")
            }
            self.locker = locker
            origins["--locker"] = .policy(path: path)
        }
        if let allowed = policy.inhibitFrom {
            allowedInhibitors = allowed
            let refused = InhibitorSource.allCases.filter { !allowed.contains($0) }.map(\.rawValue)
            if !refused.isEmpty { changes.append("inhibitors refused from \(refused.joined(separator: ", "))") }
            // An opt-in source the policy refuses is not followed at all (its holds would be refused anyway).
            for source in InhibitorSource.allCases where source.row.flag?.isOptIn == true && follows(source) && !allowed.contains(source) {
                switchedSources.remove(source)
                changes.append("\(source.row.flag?.name ?? source.rawValue) is off: inhibit-from does not list \(source.rawValue)")
            }
            if let corners, corners.actions.contains(.never), !allowed.contains(.corner) {
                self.corners = corners.withoutHolds
                changes.append("the - corners of --corners \(corners) do nothing: inhibit-from does not list corner")
            }
        }
        if let max = policy.maxInhibit {
            maxInhibit = max
            changes.append("inhibitors and disables hold the lock off for \(max) at most after the last input, however renewed")
        }
        for row in PolicySwitch.all where row.enforced == .afterMaxInhibit { enforce(row, policy, from: path, &changes) }
        if lockOnCardRemoval && (policy.lockOnCardRemoval || policy.cardATRs != nil) && cardATRs != policy.cardATRs {
            // The user may not narrow the admin's setting to cards that are never there.
            if let policyATRs = policy.cardATRs {
                changes.append("card-atr: only the cards the policy lists count (\(policyATRs.map(\.description).joined(separator: ",")))")
            } else if let asked = cardATRs {
                changes.append("card-atr \(asked.map(\.description).joined(separator: ",")) dropped: under the policy's lock-on-card-removal every card counts")
            }
            cardATRs = policy.cardATRs
            origins["--card-atr"] = .policy(path: path)
        }
        for row in PolicySwitch.all where row.enforced == .afterCardATRs { enforce(row, policy, from: path, &changes) }
        return changes
    }

    /// One switch of the policy's, turned on over these options.
    private mutating func enforce(_ row: PolicySwitch, _ policy: Policy, from path: String, _ changes: inout [String]) {
        guard policy[keyPath: row.policy] else { return }
        let flag = "--" + row.name
        if !self[keyPath: row.option] {
            self[keyPath: row.option] = true
            origins[flag] = .policy(path: path)
            changes.append("\(row.name): \(row.change)")
        } else if row.ownedWhenAsked {
            origins[flag] = .policy(path: path)
        }
    }
}

extension AgentOptions {
    /// Undoes what a user could set to get around `secure` or the policy: no lock
    /// before sleep, no logind (no lock-on-switch, no lock-session), a suspend that
    /// does not count as idle time, other users' logind inhibitors. Under `secure`
    /// none of them is taken; under a policy without it, those its keys rest on.
    mutating func refuseWeakenings() {
        let underPolicy = policy != nil
        let locksOnSwitchByPolicy = if case .policy? = origins["--lock-on-switch"] { true } else { false }
        func refuse(_ what: String, when weak: Bool, _ why: String, _ undo: (inout AgentOptions) -> Void) {
            guard weak else { return }
            undo(&self)
            weakeningsRefused.append("\(what) refused: \(why)")
            // Status and doctor show a policy's changes; without a policy the log says it.
            policy?.changes.append("\(what) refused: \(why)")
        }
        let secureWhy = underPolicy && origins["--secure"] != .flag ? "the policy makes the agent secure" : "the agent runs with --secure"
        refuse("--no-logind", when: !logind && (secure || locksOnSwitchByPolicy),
               secure ? secureWhy : "the policy's lock-on-switch follows logind") { $0.logind = true }
        refuse("--no-lock-before-sleep", when: !lockBeforeSleep && secure, secureWhy) { $0.lockBeforeSleep = true }
        refuse("--suspend-resets-idle", when: suspendResetsIdle && secure, secureWhy) { $0.suspendResetsIdle = false }
        // Any user's or service's idle inhibitor: never the session user's to let in under a policy.
        refuse("--logind-inhibitors all", when: logindInhibitors == "all" && (secure || underPolicy),
               secure ? secureWhy : "under a policy only the user's own logind inhibitors count") { $0.logindInhibitors = "own" }
    }
}

extension String {
    func trimmingCharacters(in set: String) -> String {
        String(drop { set.contains($0) }.reversed().drop { set.contains($0) }.reversed())
    }
}

extension Substring {
    func trimmingCharacters(in set: String) -> String { String(self).trimmingCharacters(in: set) }
}
