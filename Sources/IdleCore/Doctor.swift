// `xidlelock doctor`: "why did my screen not lock?" answered in plain words. The
// edge gathers the facts (the display, the agent's status, the locker on disk, the
// keyboard grab); this turns them into findings, each problem with what to do.

/// `xidlelock doctor [--json] [--socket PATH] [--policy FILE]`.
public struct DoctorOptions: Equatable, Sendable {
    public var json = false
    public var socket: String?
    /// A profile to hold the running agent against (see `PolicyCheck`).
    public var policy: String?

    static let specs: [OptionSpec<DoctorOptions>] = [
        OptionSpec("--json", nil, "Print the findings as JSON.") { o, _ in o.json = true },
        OptionSpec("--socket", "PATH", "The agent's control socket (default: $XDG_RUNTIME_DIR/xidlelock/DISPLAY.sock).") { o, v throws(UsageError) in
            o.socket = try AgentOptions.socketPath(v)
        },
        OptionSpec("--policy", "FILE", "Check the running agent against a profile instead: a policy file whose every setting must be in force and set by the admin's policy (e.g. /usr/share/doc/xidlelock/examples/policy.stig); exit 0 only when all are met.") { o, v throws(UsageError) in
            guard !v.isEmpty else { throw UsageError("--policy: the path is empty") }
            o.policy = v
        },
    ]
}

/// What the edge found.
public struct DoctorFacts: Sendable {
    public var display: String?
    /// Why the display cannot be watched; nil when it can.
    public var displayProblem: String?
    /// What to do about it, when it is not the usual (DISPLAY naming no reachable server).
    public var displayFix: String?
    /// The extensions found, in words (`MIT-SCREEN-SAVER`, `XInput 2.2`, `RandR`).
    public var extensions: [String] = []
    public var socket: String?
    /// Why no agent answered; nil when one did.
    public var agentProblem: String?
    /// The agent's `status` reply.
    public var status: JSONValue?
    /// The locker the agent uses (or, without an agent, would use), where that came
    /// from, and where its program is on disk (nil: not found or not executable).
    public var lockerCommand: String?
    public var lockerFrom: String?
    public var lockerProgram: String?
    public var lockerPath: String?
    /// Whether another client holds the keyboard grab now (nil: not asked, as while locked).
    public var keyboardGrabbedByOther: Bool?
    /// The same for the pointer grab (i3lock and slock need both).
    public var pointerGrabbedByOther: Bool?
    /// Why the grab probe cannot tell the locker's grab from another client's (no
    /// X-Resource extension, no libXRes); nil when it can.
    public var grabOwnersUnknown: String?
    /// Without an agent: why the config files could not be read.
    public var configProblem: String?
    /// Why this session is not one the agent can watch (Wayland).
    public var sessionProblem: String?
    /// Without an agent: the files and lines an agent started now would skip.
    public var configErrors: [String] = []
    /// Why an agent cannot make its control socket in the default place (it then runs
    /// and locks without it); nil when it can, or with --socket.
    public var socketProblem: String?
    /// An agent of this user for this display found running without its socket.
    public var socketlessAgent: Int32?

    public init() {}
}

public struct DoctorFinding: Equatable, Sendable {
    public enum Level: String, Sendable {
        case ok, info, warning, problem
    }

    public var check: String
    public var level: Level
    public var detail: String
    /// What to do about it.
    public var fix: String?

    init(_ check: String, _ level: Level, _ detail: String, fix: String? = nil) {
        self.check = check
        self.level = level
        self.detail = detail
        self.fix = fix
    }
}

public struct DoctorReport: Equatable, Sendable {
    public var findings: [DoctorFinding]
    /// When the lock comes if nothing changes (nil: it would not, or it holds now).
    public var nextLockIn: Millis?
    public var lockedNow: Bool

    /// A lock would happen: no finding is a problem.
    public var lockWouldHappen: Bool { !findings.contains { $0.level == .problem } }

    public var text: String {
        var lines: [String] = []
        for f in findings {
            let label = f.level == .problem ? "PROBLEM" : f.level.rawValue
            lines.append(label.padding(to: 8) + " " + f.check + ": " + f.detail)
            if let fix = f.fix { lines.append(String(repeating: " ", count: 9) + "what to do: " + fix) }
        }
        let problems = findings.filter { $0.level == .problem }.count
        if problems > 0 {
            lines.append("=> the screen will NOT lock by itself: \(problems) problem\(problems == 1 ? "" : "s") above")
        } else if lockedNow {
            lines.append("=> the screen is locked now")
        } else if let next = nextLockIn {
            lines.append("=> the screen will lock in \(next) if nothing happens")
        } else {
            lines.append("=> the screen will lock once the idle time comes")
        }
        return lines.joined(separator: "\n")
    }

    public var json: JSONValue {
        .object([
            ("lock_would_happen", .bool(lockWouldHappen)),
            ("locked_now", .bool(lockedNow)),
            ("next_lock_in_ms", nextLockIn.map { .number(Double($0.value)) } ?? .null),
            ("findings", .array(findings.map { f in
                .object([("check", .string(f.check)), ("level", .string(f.level.rawValue)), ("detail", .string(f.detail)),
                         ("fix", f.fix.map(JSONValue.string) ?? .null)])
            })),
        ])
    }
}

public enum Doctor {
    public static func diagnose(_ facts: DoctorFacts) -> DoctorReport {
        var findings: [DoctorFinding] = []
        let display = facts.display ?? "(DISPLAY not set)"
        if let problem = facts.sessionProblem {
            findings.append(DoctorFinding("session", .problem, problem, fix: "run swayidle or hypridle in this session; xidlelock is for X11 sessions"))
        }
        if let problem = facts.displayProblem {
            findings.append(DoctorFinding("display", .problem, problem,
                                          fix: facts.displayFix ?? "run xidlelock inside your X session, where DISPLAY names the display (e.g. :0)"))
        } else {
            findings.append(DoctorFinding("display", .ok, "\(display): \(facts.extensions.joined(separator: ", "))"))
        }
        let status = facts.status
        if let status {
            let pid = facts.socket.map { " on \($0)" } ?? ""
            findings.append(DoctorFinding("agent", .ok, "running, answering\(pid)" + (status["state"]?.string.map { "; state \($0)" } ?? "")))
        } else if let pid = facts.socketlessAgent {
            findings.append(DoctorFinding("agent", .warning, "running (pid \(pid)) without its control socket: it locks as set, but cannot be asked what it holds or sees"))
        } else {
            findings.append(DoctorFinding("agent", .problem, facts.agentProblem ?? "no agent answers",
                                          fix: "start it: `systemctl --user start xidlelock`, or log in again (autostart); run `xidlelock` in a terminal to see why it stops"))
        }
        if let problem = facts.socketProblem {
            findings.append(DoctorFinding("socket", .warning, problem + ": an agent started here runs without its control socket (it still locks; status, disable, inhibit and doctor cannot reach it)",
                                          fix: "remove that directory or make it yours with mode 0700 (ask an administrator if it belongs to another user), or set XDG_RUNTIME_DIR; then restart the agent"))
        }
        if let problem = facts.configProblem {
            findings.append(DoctorFinding("config", .problem, problem, fix: "fix the line named, then start the agent again"))
        }
        if status == nil { findings += configFindings(facts.configErrors) }
        findings += lockerFindings(facts)
        // The agent's own word (its locker could not cover the screen because of it) or
        // doctor's probe while no locker runs.
        for device in GrabbedDevice.allCases {
            let heldDuringLock = status?["locker"]?["\(device.rawValue)_held_by_other"]?.bool == true
            let heldNow = device == .keyboard ? facts.keyboardGrabbedByOther : facts.pointerGrabbedByOther
            if heldDuringLock || heldNow == true {
                let now = heldDuringLock
                    ? "the locker cannot grab it, so the screen may NOT be locked now (the agent keeps retrying)"
                    : "a locker cannot grab it now, so a lock would fail (and be retried)"
                let holders = device == .keyboard ? "the menu, game or screenshot tool" : "the drag, menu, game or screenshot tool"
                findings.append(DoctorFinding(device.rawValue, .problem, "another program holds the \(device.rawValue) grab: \(now)",
                                              fix: "close \(holders) that holds it; a stuck grab is released by ending its program"))
            } else if heldNow == false {
                findings.append(DoctorFinding(device.rawValue, .ok, "free: a locker can grab it"))
            }
        }
        if let reason = facts.grabOwnersUnknown {
            findings.append(DoctorFinding("keyboard", .warning,
                                          "\(reason): the agent cannot tell the locker's keyboard grab from another program's (one held before the locker started never counts; one taken after it may be taken for the lock until the locker fails)",
                                          fix: "install libxres1, or use an X server with the X-Resource extension (Xorg and Xvfb have it)"))
        }
        var nextLockIn: Millis?
        var lockedNow = false
        if let status {
            findings += stateFindings(status)
            findings += settingsFindings(status)
            if case .array(let errors)? = status["config_errors"] { findings += configFindings(errors.compactMap(\.string)) }
            findings += desktopFindings(status["desktop"])
            findings += cardFindings(status["card"], policy: status["settings"])
            findings += auditFindings(status["audit"])
            lockedNow = status["locker"]?["covers_screen"]?.bool == true
            nextLockIn = lockDue(status)
        }
        return DoctorReport(findings: findings, nextLockIn: nextLockIn, lockedNow: lockedNow)
    }

    static func lockerFindings(_ facts: DoctorFacts) -> [DoctorFinding] {
        var findings = lockerProgramFindings(facts)
        // A command that goes on after its locker: the agent sees the last command's end.
        if let command = facts.lockerCommand, let hazard = ShellCommand.lockerEndHazard(command) {
            findings.append(DoctorFinding("locker", .warning, "`\(command)` \(hazard.summary): \(hazard.detail)", fix: hazard.fix))
        }
        return findings
    }

    static func lockerProgramFindings(_ facts: DoctorFacts) -> [DoctorFinding] {
        guard let command = facts.lockerCommand else {
            return [DoctorFinding("locker", .problem, "no locker: none of xsecurelock, i3lock or slock is installed, and none is set",
                                  fix: "install one (apt install i3lock), or set `locker CMD` in ~/.config/xidlelock/config")]
        }
        let from = facts.lockerFrom.map { $0.hasPrefix("default") ? "; the \($0)" : "; from \($0)" } ?? ""
        guard let program = facts.lockerProgram else {
            return [DoctorFinding("locker", .info, "`\(command)`\(from): a shell command, whose program cannot be checked without running it")]
        }
        guard let path = facts.lockerPath else {
            return [DoctorFinding("locker", .problem, "'\(program)' (of `\(command)`\(from)) is not found in PATH or is not executable: the screen cannot be locked",
                                  fix: "install it, or set another locker (--locker, `locker` in the config file)")]
        }
        return [DoctorFinding("locker", .ok, "`\(command)` (\(path)\(from))")]
    }

    /// What holds the lock off now, and the locker's state.
    static func stateFindings(_ status: JSONValue) -> [DoctorFinding] {
        var findings: [DoctorFinding] = []
        func duration(_ value: JSONValue?) -> String? { value?.integer.map { Millis($0).description } }
        if let locker = status["locker"], locker != .null {
            let heldByOther = GrabbedDevice.allCases.filter { locker["\($0.rawValue)_held_by_other"]?.bool == true }
            if !heldByOther.isEmpty {
                // Not the locker's fault: the keyboard or pointer finding says what to do.
                let held = GrabbedDevice.phrase(heldByOther)
                let running = locker["state"]?.string == "failing"
                    ? "failing while another program holds \(held); next try in \(duration(locker["next_try_in_ms"]) ?? "?")"
                    : "runs, but another program holds \(held): the screen may be visible"
                findings.append(DoctorFinding("locker", .problem, running))
            } else if locker["state"]?.string == "failing" {
                let reason = status["last_locker_failure"]?["reason"]?.string ?? "?"
                findings.append(DoctorFinding("locker", .problem, "failing: the locker \(reason); next try in \(duration(locker["next_try_in_ms"]) ?? "?")",
                                              fix: "run the locker command by hand in this session to see its error"))
            } else if locker["let_go"]?.bool == true {
                findings.append(DoctorFinding("locker", .problem, "held the keyboard, then let go of it while it runs: the screen may be visible",
                                              fix: "unlock it (its exit 0 ends the lock) and look in its own log for why it lost the grab"))
            } else if locker["covers_screen"]?.bool == false {
                findings.append(DoctorFinding("locker", .problem, "runs but was never seen to grab the keyboard: the screen may be visible",
                                              fix: "use a locker that grabs the keyboard and stays running (i3lock -n, not i3lock)"))
            } else if locker["covers_screen"]?.bool == true {
                findings.append(DoctorFinding("locker", .info, "locked now (pid \(locker["pid"]?.integer.map(String.init) ?? "?"))"))
            }
        }
        if status["disabled"]?.bool == true {
            let span = duration(status["disabled_remaining_ms"]).map { "for \($0) more" } ?? "until enabled"
            findings.append(DoctorFinding("held off", .problem, "disabled \(span)", fix: "`xidlelock enable`"))
        }
        if case .array(let inhibitors)? = status["inhibitors"] {
            for i in inhibitors {
                let source = i["source"]?.string ?? "?"
                let since = duration(i["since_ms"]).map { " for \($0)" } ?? ""
                let why = i["why"]?.string.flatMap { $0.isEmpty ? nil : ": \($0)" } ?? ""
                let who = HumanText.who(i["who"])
                findings.append(DoctorFinding("held off", .problem, "by \(who) [\(source)]\(since)\(ClientText.sanitized(why))",
                                              fix: InhibitorSource(rawValue: source)?.row.advice ?? "see `xidlelock status`"))
            }
            if let total = status["inhibitor_count"]?.integer.map(Int.init), total > inhibitors.count {
                findings.append(DoctorFinding("held off", .problem, "and \(total - inhibitors.count) more holds (see `xidlelock status --json`)"))
            }
        }
        if case .array(let refused)? = status["refused_holds"] {
            for r in refused {
                let who = HumanText.who(r["who"])
                findings.append(DoctorFinding("not honoured", .info,
                                              "\(who) [\(r["source"]?.string ?? "?")]: \(ClientText.sanitized(r["reason"]?.string ?? "?"))"))
            }
        }
        // Per stage, while anything holds one: which stages wait and for what, which fire through.
        if case .array(let stages)? = status["stages"],
           stages.contains(where: { $0["held"]?.bool == true && $0["fired"]?.bool != true }) {
            let each = stages.filter { $0["fired"]?.bool != true }.map { stage -> String in
                let name = stage["name"]?.string ?? "?"
                let by = stage["held_by"]?.array?.compactMap(\.string) ?? []
                return by.isEmpty ? "\(name) fires on time" : "\(name) held by \(by.joined(separator: ", "))"
            }
            findings.append(DoctorFinding("stages", .info, each.joined(separator: "; ")))
        }
        if status["power_source"]?.string == "battery" {
            findings.append(DoctorFinding("power", .info, "on battery: the times on battery are in force (`xidlelock status --json` lists them)"))
        }
        if status["screen_off"] != nil, status["screen_off"] != .null,
           let dpms = status["monitor"]?["dpms"]?.string, dpms.hasPrefix("unavailable") {
            findings.append(DoctorFinding("screen off", .warning, "--screen-off-after-lock: \(dpms): the monitor stays on while locked (the locker still covers it)"))
        }
        if status["session_active"]?.bool == false {
            findings.append(DoctorFinding("session", .warning, "another session is in front: the idle time goes on and the stages fire on time"))
        }
        if let policy = status["policy"], policy != .null {
            let file = policy["file"]?.string ?? "?"
            if case .array(let errors)? = policy["errors"] {
                for error in errors {
                    findings.append(DoctorFinding("policy", .warning, (error.string ?? "?") + " (the agent is secure meanwhile)",
                                                  fix: "ask the administrator to fix \(file)"))
                }
            }
            var changes: [String] = []
            if case .array(let items)? = policy["changes"] { changes = items.compactMap(\.string) }
            findings.append(DoctorFinding("policy", .info, "\(file) is in force" + (changes.isEmpty ? "" : ": " + changes.joined(separator: "; "))))
        }
        return findings
    }

    static func settingsFindings(_ status: JSONValue) -> [DoctorFinding] {
        guard case .array(let settings)? = status["settings"], !settings.isEmpty else { return [] }
        let text = settings.map { s in "\(s["name"]?.string ?? "?") \(s["value"]?.string ?? "?") (\(s["from"]?.string ?? "?"))" }
        var findings = [DoctorFinding("settings", .info, text.joined(separator: "; "))]
        if case .array(let files)? = status["config_files"], !files.isEmpty {
            findings.append(DoctorFinding("config", .info, "read " + files.compactMap(\.string).joined(separator: ", ")))
        }
        return findings
    }

    /// The config files and lines skipped: the agent runs with the rest.
    static func configFindings(_ errors: [String]) -> [DoctorFinding] {
        errors.map {
            DoctorFinding("config", .warning, ClientText.sanitized($0, maxBytes: 400),
                          fix: "fix or remove what is named (the agent runs with the other settings); restart the agent to read it again")
        }
    }

    /// Where the audit trail goes: a journal that does not read is worth a warning.
    static func auditFindings(_ audit: JSONValue?) -> [DoctorFinding] {
        guard let audit, let to = audit["to"]?.string, to.hasPrefix("stderr (the journal is not reading)") else { return [] }
        let sent = audit["sent_to_stderr"]?.integer ?? 0
        return [DoctorFinding("audit", .warning, "the systemd journal is not taking entries: \(sent) audit entries went to the agent's stderr instead (locking is not affected)",
                              fix: "check systemd-journald (`systemctl status systemd-journald`); the entries come back to the journal once it reads again")]
    }

    /// Each service of holds on the session bus: served, off, or whose it is (a desktop's
    /// own service keeps its name: the agent never fights over one); and whether GTK
    /// applications have a way to hold the lock off.
    public static func serviceFindings(_ desktop: JSONValue) -> [DoctorFinding] {
        guard case .array(let services)? = desktop["services"] else { return [] }
        var findings: [DoctorFinding] = []
        var served: [String] = []
        var sessionManagerServed = false
        for service in services {
            let source = service["source"]?.string ?? "?"
            let state = ClientText.sanitized(service["state"]?.string ?? "?", maxBytes: 400)
            let names = service["names"]?.array?.compactMap(\.string) ?? []
            if state == "off" { continue }
            let parts = state.split(separator: ";").map { $0.trimmingCharacters(in: " ") }
            if parts.allSatisfy({ $0.hasSuffix(": served") }) {
                served += names
                if source == InhibitorSource.sessionManager.rawValue { sessionManagerServed = true }
            } else if parts.allSatisfy({ $0.firstRange(matching: ": served by the xidlelock agent of another session") != nil }) {
                // One user's sessions share one session bus: the first agent serves it for all.
                findings.append(DoctorFinding("session bus", .ok, state))
                if source == InhibitorSource.sessionManager.rawValue { sessionManagerServed = true }
            } else {
                let off = service["off_flag"]?.string.map { " (or leave it to that program with \($0))" } ?? ""
                findings.append(DoctorFinding("session bus", .warning, state,
                                              fix: "the other program's inhibitors hold only its own desktop's lock; quit it if xidlelock is your locker\(off)"))
            }
        }
        if !served.isEmpty {
            // On a bus several sessions of the user share, the holds of the others' programs go to their agents.
            let routing = desktop["hold_routing"].flatMap { $0 == .null ? nil : $0 }
            let shared = routing.map { " for session \($0["own_session"]?.string ?? "?"); a hold of another session's program is passed on to that session's agent" } ?? ""
            findings.append(DoctorFinding("session bus", .ok, "serving " + served.joined(separator: ", ") + shared))
        }
        if !sessionManagerServed && desktop["inhibit_portal"] == .null {
            findings.append(DoctorFinding("session bus", .warning, "GTK applications (Totem, Evince's slideshow, Clapper) cannot hold the lock off: no desktop portal relays their inhibitors and org.gnome.SessionManager is not served, so the screen locks during their films and slideshows",
                                          fix: "install xdg-desktop-portal-gtk, or run the agent with --session-manager-service"))
        }
        return findings
    }

    static func desktopFindings(_ desktop: JSONValue?) -> [DoctorFinding] {
        guard let desktop, case .object(let members) = desktop, !members.isEmpty else { return [] }
        var findings: [DoctorFinding] = []
        // Why and what happens next, as the agent says it ("did not answer within 5 s; trying again").
        func why(_ bus: String) -> String {
            guard let state = desktop["\(bus)_bus_state"]?.string, state != "not used" else { return "not connected" }
            return ClientText.sanitized(state, maxBytes: 300)
        }
        if desktop["session_bus"]?.bool == false {
            findings.append(DoctorFinding("session bus", .warning, "\(why("session")): browsers' and players' inhibitors (org.freedesktop.ScreenSaver) are not seen (locking goes on)",
                                          fix: "start the session with a D-Bus session bus (dbus-run-session, or your display manager)"))
        } else {
            findings += serviceFindings(desktop)
        }
        if desktop["system_bus"]?.bool == false {
            findings.append(DoctorFinding("system bus", .warning, "\(why("system")): no lock before sleep, no lock-session (locking goes on)"))
        } else if desktop["logind_session"] == .null {
            findings.append(DoctorFinding("logind", .warning, "no logind session found for this display: lock-session and the hints do not work"))
        } else {
            findings.append(DoctorFinding("logind", .ok, "session \(desktop["logind_session"]?.string ?? "?")" +
                                          (desktop["sleep_delay_held"]?.bool == true ? "; the sleep waits for the lock" : "")))
        }
        if let forged = desktop["forged_signals"]?.integer, forged > 0 {
            findings.append(DoctorFinding("logind", .warning, "\(forged) signal\(forged == 1 ? "" : "s") claiming to be logind's came from other connections and \(forged == 1 ? "was" : "were") dropped: another local program may be trying to switch the lock off (locking is not affected)",
                                          fix: "find who sent them in the agent's log (the sender's bus name), and ask the administrator"))
        }
        return findings
    }

    /// `--lock-on-card-removal`: whether pcscd can be watched, and each reader.
    static func cardFindings(_ card: JSONValue?, policy settings: JSONValue?) -> [DoctorFinding] {
        guard let text = HumanText.cards(card) else { return [] }
        let byPolicy = settings?.array?.contains {
            $0["name"]?.string == "lock-on-card-removal" && $0["from"]?.string?.hasPrefix("policy") == true
        } == true
        guard card?["error"]?.string != nil else { return [DoctorFinding("smart cards", .ok, text)] }
        // A warning, not a problem: the idle lock still comes (a problem says it would not).
        return [DoctorFinding("smart cards", .warning, text + (byPolicy ? " (the policy asks for it)" : ""),
                              fix: "start pcscd (`systemctl start pcscd.socket`) and install libpcsclite1; the agent reconnects by itself")]
    }

    /// When the lock stage comes, from the status (nil while held, or once it has fired).
    static func lockDue(_ status: JSONValue) -> Millis? {
        guard let lock = status["stages"]?.array?.first(where: { $0["role"]?.string == "lock" }) else { return nil }
        if let due = lock["due_in_ms"] {
            return due.integer.flatMap { $0 > 0 ? Millis($0) : nil }
        }
        // An agent from before per-stage holds (a doctor newer than the running agent).
        guard status["disabled"]?.bool != true, status["state"]?.string != "inhibited",
              let time = lock["idle_ms"]?.integer, let idle = status["idle_ms"]?.integer, idle < time else { return nil }
        return Millis(time - idle)
    }
}

extension String {
    func padding(to width: Int) -> String { count >= width ? self : self + String(repeating: " ", count: width - count) }
}
