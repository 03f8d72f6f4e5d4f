// `xidlelock doctor --policy FILE`: does the running agent meet a compliance profile?
// The profile is a policy file (the same grammar, e.g. the example policy.stig) read
// as requirements: each setting it makes must be in force in the agent, and locked
// against the user, that is set (as strictly) by the admin's policy the agent runs
// with. The edge reads the file and asks the agent's status; this decides.

/// One requirement of the profile, met or not, in words.
public struct PolicyRequirement: Equatable, Sendable {
    /// The profile's line (`max-lock-after 15m`), or what every profile asks (`agent`).
    public var requirement: String
    public var met: Bool
    public var detail: String
}

public struct PolicyCheckReport: Equatable, Sendable {
    public var profile: String
    public var requirements: [PolicyRequirement]

    public var met: Bool { requirements.allSatisfy(\.met) }

    public var text: String {
        var lines = requirements.map { ($0.met ? "met" : "NOT MET").padding(to: 8) + " " + $0.requirement + ": " + $0.detail }
        let unmet = requirements.filter { !$0.met }.count
        lines.append(unmet == 0
            ? "=> the agent meets every requirement of \(profile)"
            : "=> \(unmet) of \(requirements.count) requirements of \(profile) NOT met")
        return lines.joined(separator: "\n")
    }

    public var json: JSONValue {
        .object([
            ("profile", .string(profile)),
            ("met", .bool(met)),
            ("requirements", .array(requirements.map { r in
                .object([("requirement", .string(r.requirement)), ("met", .bool(r.met)), ("detail", .string(r.detail))])
            })),
        ])
    }
}

/// Yama's ptrace scope, as the edge read `/proc/sys/kernel/yama/ptrace_scope`.
public enum YamaPtraceScope: Equatable, Sendable {
    /// 0 (classic: any process of the same user), 1 (only ancestors), 2 (only
    /// CAP_SYS_PTRACE), 3 (none).
    case scope(Int)
    /// No /proc/sys/kernel/yama: the kernel runs without the Yama LSM.
    case noYama
    /// The file is there but could not be read, or did not hold a scope.
    case unreadable(String)
    /// The caller did not look.
    case notRead

    /// From the file's text (nil: the file could not be read, `why`), `yamaExists`: the
    /// directory /proc/sys/kernel/yama is there.
    public init(yamaExists: Bool, text: String?, why: String = "cannot be read") {
        guard yamaExists else { self = .noYama; return }
        guard let text else { self = .unreadable(why); return }
        let trimmed = text.trimmingCharacters(in: " \t\n")
        guard let scope = Int(trimmed), scope >= 0 else { self = .unreadable("'\(trimmed)' is not a scope"); return }
        self = .scope(scope)
    }
}

/// What the machine (not the agent) is, for the profile's machine requirements; the
/// edge reads it.
public struct MachineFacts: Equatable, Sendable {
    public var ptraceScope: YamaPtraceScope
    public init(ptraceScope: YamaPtraceScope = .notRead) {
        self.ptraceScope = ptraceScope
    }
}

public enum PolicyCheck {
    /// The profile's requirements, in its order. A line it cannot read, or a file that
    /// sets nothing (which every agent would meet), is an error naming what is wrong.
    public static func requirements(_ contents: FileContents, path: String) throws(UsageError) -> [ReportedSetting] {
        switch contents {
        case .missing: throw UsageError("doctor --policy: \(path) does not exist")
        case .unreadable(let reason): throw UsageError("doctor --policy: \(path) cannot be read (\(reason))")
        case .bytes, .text: break
        }
        let read = Policy.read(ConfigText.lines(contents) ?? [], path: path)
        if let first = read.errors.first {
            throw UsageError("doctor --policy: \(first)" + (read.errors.count > 1 ? " (and \(read.errors.count - 1) more lines)" : ""))
        }
        guard !read.settings.isEmpty else {
            throw UsageError("doctor --policy: \(path) sets no requirement (write the policy settings it asks for, e.g. max-lock-after 15m)")
        }
        return read.settings
    }

    /// Holds the agent's `status` (nil: no agent answered, for `agentProblem`) against
    /// the profile's requirements.
    /// Whether a program file is the admin's (owned by root, which alone may change
    /// it): nil when it is, else why not in words. The edge looks at the file.
    public typealias ProgramOwnership = @Sendable (String) -> String?

    /// `machine`: the facts of the machine a requirement such as `ptrace-scope` asks
    /// about, which hold whether an agent answers or not.
    public static func check(_ profile: [ReportedSetting], path: String, status: JSONValue?,
                             agentProblem: String? = nil, machine: MachineFacts = MachineFacts(),
                             ownership: @escaping ProgramOwnership) -> PolicyCheckReport {
        func line(_ r: ReportedSetting) -> String { r.value.isEmpty ? r.name : "\(r.name) \(r.value)" }
        guard let status else {
            let why = (agentProblem ?? "no agent answers") + ": nothing can be checked"
            return PolicyCheckReport(profile: path, requirements: [PolicyRequirement(requirement: "agent", met: false, detail: why)]
                + profile.map { r in
                    let (met, detail) = meets(r, machine: machine) ?? (false, "no agent answers")
                    return PolicyRequirement(requirement: line(r), met: met, detail: detail)
                })
        }
        var requirements = [PolicyRequirement(requirement: "agent", met: true, detail: "answers (state \(status["state"]?.string ?? "?"))")]
        let agent = AgentFacts(status, ownership: ownership)
        requirements.append(agent.policyRequirement)
        for r in profile {
            let (met, detail) = meets(r, machine: machine) ?? agent.meets(r)
            requirements.append(PolicyRequirement(requirement: line(r), met: met, detail: detail))
        }
        return PolicyCheckReport(profile: path, requirements: requirements)
    }

    /// A requirement of the machine, met or not and why; nil for the agent's requirements.
    static func meets(_ r: ReportedSetting, machine: MachineFacts) -> (Bool, String)? {
        switch r.name {
        case "ptrace-scope":
            guard let least = Int(r.value), (0...3).contains(least) else { return (false, "'\(r.value)' is not 0, 1, 2 or 3") }
            let meaning = [0: "any process may ptrace another of its user", 1: "only a process's ancestors may ptrace it",
                           2: "only root (CAP_SYS_PTRACE) may ptrace", 3: "no process may ptrace"]
            let fix = "set kernel.yama.ptrace_scope = \(least) in /etc/sysctl.d"
            switch machine.ptraceScope {
            case .scope(let scope) where scope >= least:
                return (true, "kernel.yama.ptrace_scope is \(scope): \(meaning[scope] ?? "a scope above 3")")
            case .scope(let scope):
                return (false, "kernel.yama.ptrace_scope is \(scope): \(meaning[scope] ?? "?"), so the user can ptrace the lockers of the session (\(fix))")
            case _ where least == 0:
                return (true, "ptrace-scope 0 asks for no restriction")
            case .noYama:
                return (false, "no Yama LSM in this kernel (no /proc/sys/kernel/yama): any process may ptrace another of its user, the lockers of the session too (a kernel with Yama, and \(fix))")
            case .unreadable(let why):
                return (false, "kernel.yama.ptrace_scope \(why)")
            case .notRead:
                return (false, "this check did not read kernel.yama.ptrace_scope")
            }
        default:
            return nil
        }
    }

    /// What the status says of the settings in force and of the admin's policy.
    struct AgentFacts {
        let status: JSONValue
        /// The admin's policy file, its settings as written (last one wins), its errors.
        let policyFile: String?
        let policy: [String: String]
        let policyErrors: [String]
        /// The status reports the policy's settings (older agents do not).
        let policyReported: Bool
        /// The settings in force (`status.settings`), by name.
        let settings: [String: String]

        let ownership: ProgramOwnership

        init(_ status: JSONValue, ownership: @escaping ProgramOwnership) {
            self.status = status
            self.ownership = ownership
            let policy = status["policy"].flatMap { $0 == .null ? nil : $0 }
            (policyFile, policyErrors, policyReported) = Self.policyReading(status)
            self.policy = Self.values(policy?["settings"])
            settings = Self.values(status["settings"])
        }

        /// What the status says of the admin's policy: its file, the lines the agent could
        /// not read, whether it reports the policy's settings. Read alone (the guard's
        /// metrics ask it of every session at every turn of its loop).
        static func policyReading(_ status: JSONValue) -> (file: String?, errors: [String], reported: Bool) {
            let policy = status["policy"].flatMap { $0 == .null ? nil : $0 }
            let errors: [String] = if case .array(let items)? = policy?["errors"] { items.compactMap(\.string) } else { [] }
            return (policy?["file"]?.string, errors, policy?["settings"] != nil)
        }

        /// `policyRequirement`'s verdict from the reading alone.
        static func policyWhole(file: String?, errors: [String], reported: Bool) -> Bool {
            file != nil && errors.isEmpty && reported
        }

        /// A list of `{name, value}` settings by name; the last of a name wins, as in a file.
        static func values(_ list: JSONValue?) -> [String: String] {
            guard case .array(let items)? = list else { return [:] }
            var values: [String: String] = [:]
            for item in items { if let name = item["name"]?.string { values[name] = item["value"]?.string ?? "" } }
            return values
        }

        /// Every profile asks that the admin's policy be in force and read whole: a
        /// requirement met only by the user's own settings is one the user can undo.
        var policyRequirement: PolicyRequirement {
            let met = Self.policyWhole(file: policyFile, errors: policyErrors, reported: policyReported)
            guard let file = policyFile else {
                return PolicyRequirement(requirement: "policy", met: false,
                                         detail: "the agent runs without an admin's policy (/etc/xidlelock/policy): every setting is the user's to change")
            }
            if !policyErrors.isEmpty {
                return PolicyRequirement(requirement: "policy", met: false,
                                         detail: "\(file) has lines the agent could not read (it runs secure meanwhile): " + policyErrors.joined(separator: "; "))
            }
            guard policyReported else {
                return PolicyRequirement(requirement: "policy", met: false,
                                         detail: "\(file) is in force, but this agent does not report its settings (an older version): restart it")
            }
            return PolicyRequirement(requirement: "policy", met: met, detail: "\(file) is in force, every line read")
        }

        var secureByPolicy: Bool { policy["secure"] != nil }

        func duration(_ text: String?) -> Millis? { text.flatMap(Millis.init(parsing:)) }

        /// Whether the agent meets one requirement, and why (not) in words.
        func meets(_ r: ReportedSetting) -> (Bool, String) {
            let file = policyFile ?? "the policy"
            switch r.name {
            case "max-lock-after":
                guard let limit = duration(r.value) else { return (false, "'\(r.value)' is not a duration") }
                guard case .array(let stages)? = status["stages"],
                      let lock = stages.first(where: { $0["role"]?.string == "lock" })?["idle_ms"]?.integer else {
                    return (false, "the agent reports no lock time")
                }
                let lockAfter = Millis(lock)
                guard lockAfter <= limit else { return (false, "the agent locks after \(lockAfter), above \(limit)") }
                guard let cap = duration(policy["max-lock-after"]) else {
                    return (false, "the agent locks after \(lockAfter), but its policy sets no max-lock-after: the user can set a longer lock time")
                }
                guard cap <= limit else {
                    return (false, "the agent locks after \(lockAfter), but \(file) lets the user set up to \(cap), above \(limit)")
                }
                return (true, "the agent locks after \(lockAfter); \(file) keeps it at \(cap) or less")
            case "lock-on-switch":
                let (met, detail) = check(PolicySwitch.lockOnSwitch)
                guard met else { return (met, detail) }
                // It rests on logind's word about the agent's own session.
                guard let session = status["session"], session != .null, session["from"]?.string == "logind" else {
                    return (false, "in force, but the agent follows no logind session: it cannot see another session come to the front")
                }
                return (true, detail + "; logind's session \(session["id"]?.string ?? "?")")
            case "lock-on-card-removal":
                guard let card = status["card"], card != .null, let on = card["lock_on_removal"]?.bool else {
                    return (false, "this agent has no card removal (lock-on-card-removal): it does not lock when the smart card is removed")
                }
                guard on else { return (false, "the agent does not lock when the smart card is removed") }
                if let error = card["error"]?.string { return (false, "the agent cannot watch the smart card: \(error)") }
                guard policy["lock-on-card-removal"] != nil else {
                    return (false, "the agent locks when the smart card is removed, but \(file) does not set lock-on-card-removal: the user can turn it off")
                }
                return (true, "\(PolicySwitch.lockOnCardRemoval.meaning); set by \(file)")
            case "locker":
                let running = settings["locker"] ?? "?"
                guard PolicyCheck.sameLocker(running: running, written: r.value) else { return (false, "the agent's locker is `\(running)`, not `\(r.value)`") }
                guard policy["locker"] == r.value else { return (false, "the locker is `\(r.value)`, but \(file) does not set it: the user can change it") }
                // The facts the requirement rests on: the admin's program, and a lock it holds.
                if let program = ShellCommand.firstWord(of: running) {
                    guard program.hasPrefix("/") else { return (false, "the agent runs `\(running)`: `\(program)` is not named by an absolute path, so the user's PATH picks it") }
                    if let problem = ownership(program) { return (false, "`\(program)` is not the admin's: \(problem)") }
                }
                if let locker = status["locker"], locker["state"]?.string == "running", locker["covers_screen"]?.bool == false {
                    return (false, "the locker runs but does NOT cover the screen (it does not hold the keyboard)")
                }
                return (true, "`\(running)`, set by \(file)")
            case "inhibit-from":
                if secureByPolicy { return (true, "\(file) sets secure: nothing holds the lock off") }
                guard let allowed = try? Policy.inhibitorSources(r.value) else { return (false, "'\(r.value)' is not a list of sources") }
                guard let text = policy["inhibit-from"], let given = try? Policy.inhibitorSources(text) else {
                    return (false, "\(file) sets neither inhibit-from nor secure: every source may hold the lock off")
                }
                let extra = InhibitorSource.allCases.filter { given.contains($0) && !allowed.contains($0) }.map(\.rawValue)
                guard extra.isEmpty else { return (false, "\(file) also lets \(extra.joined(separator: ", ")) hold the lock off") }
                return (true, "\(file) lets only \(text) hold the lock off")
            case "max-inhibit":
                if secureByPolicy { return (true, "\(file) sets secure: nothing holds the lock off") }
                guard let limit = duration(r.value) else { return (false, "'\(r.value)' is not a duration") }
                guard let max = duration(policy["max-inhibit"]) else {
                    return (false, "\(file) sets neither max-inhibit nor secure: holds may keep the screen unlocked for ever")
                }
                guard max <= limit else { return (false, "\(file) lets holds keep the screen unlocked for \(max), above \(limit)") }
                return (true, "\(file) ends every hold \(max) after the last input at the latest")
            case "on-agent-lost":
                // The guard's settings: what the admin's policy says is what the guard does.
                guard let given = policy["on-agent-lost"] ?? (policyFile != nil ? "lock" : nil) else {
                    return (false, "no admin's policy: no guard acts for this session")
                }
                guard given == r.value else { return (false, "\(file) makes the guard \(given) when the agent is lost, not \(r.value)") }
                return (true, "the guard does \(given) when the agent is lost (\(policy["on-agent-lost"] == nil ? "the default" : "set by \(file)"))")
            case "agent-grace":
                guard let limit = duration(r.value) else { return (false, "'\(r.value)' is not a duration") }
                guard policyFile != nil else { return (false, "no admin's policy: no guard acts for this session") }
                let grace = duration(policy["agent-grace"]) ?? GuardSettings.defaultAgentGrace
                guard grace <= limit else { return (false, "\(file) lets the guard wait \(grace) for a lost agent, above \(limit)") }
                return (true, "the guard acts \(grace) after the agent is lost")
            default:
                if let row = PolicySwitch.named(r.name) { return check(row) }
                // A setting this doctor does not know how to check is never passed silently.
                return (false, "this doctor cannot check '\(r.name)'")
            }
        }

        /// A switch of the policy's, as its row says: in force and set by the policy, or
        /// given by the policy's `secure`.
        func check(_ row: PolicySwitch) -> (Bool, String) {
            if let covered = row.coveredBySecure, secureByPolicy && settings["secure"] == "yes" {
                return (true, "\(policyFile ?? "the policy") sets secure, which \(covered)")
            }
            return flag(row.name, row.meaning)
        }

        /// A switch the policy must set, and that must be in force.
        func flag(_ name: String, _ meaning: String) -> (Bool, String) {
            let file = policyFile ?? "the policy"
            guard settings[name] == "yes" else { return (false, "not in force: the agent runs without \(name)") }
            guard policy[name] != nil else { return (false, "in force, but not set by \(file): the user can turn it off") }
            return (true, "\(meaning); set by \(file)")
        }
    }
}

/// Root's `doctor --policy`: every graphical session, as the guard verified it, held
/// against the profile. The agent's status comes from the guard (what the verified
/// agent reported at its registration), never from a socket the user serves.
public struct GuardCheckReport: Equatable, Sendable {
    public var profile: String
    /// Each session's id and user, and its check.
    public var sessions: [(id: String, user: String, report: PolicyCheckReport)]
    /// Why nothing could be checked (the guard does not answer), if so.
    public var problem: String?

    public static func == (a: GuardCheckReport, b: GuardCheckReport) -> Bool {
        a.profile == b.profile && a.problem == b.problem && a.sessions.map(\.id) == b.sessions.map(\.id)
            && a.sessions.map(\.report) == b.sessions.map(\.report)
    }

    public var met: Bool { problem == nil && sessions.allSatisfy(\.report.met) }

    public var text: String {
        if let problem { return "NOT MET  guard: \(problem)\n=> nothing speaks for the sessions of this machine" }
        if sessions.isEmpty { return "=> no user's graphical session to check (the guard watches none now)" }
        var blocks = sessions.map { "session \($0.id) (\($0.user)):\n" + $0.report.text }
        let unmet = sessions.filter { !$0.report.met }.map(\.id)
        blocks.append(unmet.isEmpty ? "=> every session meets \(profile), as the guard verified"
                                    : "=> NOT met in session\(unmet.count == 1 ? "" : "s") \(unmet.joined(separator: ", "))")
        return blocks.joined(separator: "\n")
    }

    /// The version of `json`'s shape (docs/admin.md, packaging/doctor-policy.schema.json):
    /// raised when a field is renamed, removed or changes meaning; a new field keeps it.
    public static let schemaVersion = 1

    public var json: JSONValue {
        .object([
            ("schema", .number(Double(GuardCheckReport.schemaVersion))),
            ("profile", .string(profile)), ("met", .bool(met)), ("source", .string("guard")),
            ("problem", problem.map { .string($0) } ?? .null),
            ("sessions", .array(sessions.map { s in
                .object([("id", .string(s.id)), ("user", .string(s.user)), ("met", .bool(s.report.met)),
                         ("requirements", s.report.json["requirements"] ?? .array([]))])
            })),
        ])
    }
}

extension PolicyCheck {
    /// The running locker is the profile's: the same words, or the same with its program
    /// found in the system's directories (`/usr/bin/i3lock -n` for `i3lock -n`).
    static func sameLocker(running: String, written: String) -> Bool {
        if running == written { return true }
        guard let program = ShellCommand.firstWord(of: running), let word = ShellCommand.firstWord(of: written),
              !word.contains("/"), program.hasSuffix("/" + word) else { return false }
        let rest = { (command: String, first: String) in command.drop { $0 == " " || $0 == "\t" }.dropFirst(first.count) }
        return rest(running, program) == rest(written, word)
    }

    /// Said under a check that asked the agent's own socket.
    public static let userCheckNote = "note: this check asked the agent's own socket, which its user controls; only root's `xidlelock doctor --policy` (through xidlelock-guard.service) speaks for the guard"

    /// Holds every session the guard reports (`sessions`; nil with `problem` when the guard
    /// did not answer) against the profile: each must be guarded by a verified agent, and
    /// that agent's status must meet every requirement.
    public static func check(_ profile: [ReportedSetting], path: String, guardReport: JSONValue?, problem: String? = nil,
                             machine: MachineFacts = MachineFacts(), ownership: @escaping ProgramOwnership) -> GuardCheckReport {
        guard let guardReport, case .array(let sessions)? = guardReport["sessions"] else {
            return GuardCheckReport(profile: path, sessions: [], problem: problem ?? "the guard sent no sessions")
        }
        return GuardCheckReport(profile: path, sessions: sessions.map { session in
            let id = session["id"]?.string ?? "?"
            let user = session["user"]?.string ?? "?"
            let agent = session["agent"]
            let guarded = session["guarded"]?.bool == true
            let why = session["unguarded"]?["reason"]?.string ?? "no verified agent"
            let lastAction = session["last_action"]?["what"]?.string
            // Each session named with its state: where it is, guarded or not and why, locked.
            let where_ = "\(session["display"]?.string ?? "?")\(session["remote"]?.bool == true ? ", remote" : "")"
            let locked = session["locked"]?.bool == true ? "; locked" : "; not locked"
            let guardLine = PolicyRequirement(
                requirement: "guard", met: guarded,
                detail: (guarded ? "agent pid \(agent?["pid"]?.integer ?? 0) verified by the guard (\(agent?["executable"]?.string ?? "?"))"
                                 : "NOT guarded: \(why)" + (lastAction.map { "; the guard \($0)" } ?? "")) + " (on \(where_)\(locked))")
            let status = guarded ? session["agent_status"].flatMap { $0 == .null ? nil : $0 } : nil
            var report = check(profile, path: path, status: status, agentProblem: guarded ? "the agent reported no status" : "no verified agent",
                               machine: machine, ownership: ownership)
            report.requirements.insert(guardLine, at: 0)
            return (id, user, report)
        }, problem: nil)
    }
}
