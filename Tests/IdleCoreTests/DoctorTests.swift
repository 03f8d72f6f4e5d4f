import IdleCore
import Testing

@Suite("doctor's diagnosis")
struct DoctorDiagnosisTests {
    /// The facts of a healthy setup: an agent idle for 1 minute of 10, its locker installed.
    static func healthy() throws -> DoctorFacts {
        var facts = DoctorFacts()
        facts.display = ":0"
        facts.extensions = ["MIT-SCREEN-SAVER", "XInput 2"]
        facts.socket = "/run/user/1000/xidlelock/0.sock"
        facts.status = try JSONValue(parsing: """
            {"v":1,"ok":true,"state":"active","idle_ms":60000,"locker":null,"inhibitors":[],"disabled":false,
             "session_active":true,"policy":null,"settings":[{"name":"lock-after","value":"10m","from":"flag"}],
             "stages":[{"name":"lock","role":"lock","idle_ms":600000}],"desktop":{}}
            """)
        facts.lockerCommand = "i3lock -n"
        facts.lockerProgram = "i3lock"
        facts.lockerPath = "/usr/bin/i3lock"
        facts.keyboardGrabbedByOther = false
        return facts
    }

    func problems(_ report: DoctorReport) -> [String] { report.findings.filter { $0.level == .problem }.map(\.check) }

    @Test("healthy: no problem, and the lock comes at the lock time less the idle time")
    func healthy() throws {
        let report = Doctor.diagnose(try Self.healthy())
        #expect(report.lockWouldHappen)
        #expect(report.nextLockIn == .minutes(9))
        #expect(report.text.hasSuffix("=> the screen will lock in 9m if nothing happens"))
        #expect(report.text.contains("info     settings: lock-after 10m (flag)"))
    }

    @Test("per stage: which stages a hold keeps waiting and which fire on time; the next lock from the lock stage's own due time")
    func perStageHolds() throws {
        var facts = try Self.healthy()
        facts.status = try JSONValue(parsing: """
            {"v":1,"ok":true,"state":"inhibited","idle_ms":60000,"locker":null,"inhibitors":[],"disabled":false,
             "session_active":true,"policy":null,"settings":[],"power_source":"battery","desktop":{},
             "stages":[{"name":"dim","role":"custom","idle_ms":120000,"fired":false,"held":false,"held_by":[],"due_in_ms":60000},
                       {"name":"lock","role":"lock","idle_ms":180000,"fired":false,"held":true,"held_by":["audio"],"due_in_ms":null}]}
            """)
        let report = Doctor.diagnose(facts)
        #expect(report.text.contains("stages: dim fires on time; lock held by audio"), "\(report.text)")
        #expect(report.text.contains("power: on battery"), "\(report.text)")
        #expect(report.nextLockIn == nil, "the lock stage is held")
    }

    @Test("a socket directory an agent cannot use is a warning that says why; an agent found running without its socket is not a problem")
    func socketless() throws {
        var facts = try Self.healthy()
        facts.status = nil
        facts.agentProblem = "cannot reach the agent at /tmp/xidlelock-1000/0.sock: Permission denied"
        facts.socketProblem = "refusing the socket directory /tmp/xidlelock-1000: it belongs to nobody, not to you"
        let unknown = Doctor.diagnose(facts)
        #expect(problems(unknown) == ["agent"], "without an agent found, whether one runs is not known")
        let socket = try #require(unknown.findings.first { $0.check == "socket" })
        #expect(socket.level == .warning)
        #expect(socket.detail.hasPrefix("refusing the socket directory /tmp/xidlelock-1000: it belongs to nobody"))
        #expect(socket.detail.contains("runs without its control socket (it still locks"))
        facts.socketlessAgent = 4242
        let found = Doctor.diagnose(facts)
        #expect(found.lockWouldHappen)
        #expect(found.text.contains("warning  agent: running (pid 4242) without its control socket: it locks as set"))
    }

    @Test("an audit trail going to stderr because the journal does not read is a warning with the count; locking is not affected")
    func journalNotReading() throws {
        var facts = try Self.healthy()
        guard case .object(var members) = facts.status else { throw UsageError("no status") }
        members.append(("audit", .object([("to", .string("stderr (the journal is not reading)")), ("sent_to_stderr", .number(12))])))
        facts.status = .object(members)
        let report = Doctor.diagnose(facts)
        #expect(report.lockWouldHappen)
        #expect(report.text.contains("warning  audit: the systemd journal is not taking entries: 12 audit entries went to the agent's stderr instead"))
    }

    /// A status's desktop part: the session bus joined, the services as given.
    static func desktop(services: [(String, String)], portal: String?) throws -> JSONValue {
        let list = services.map { "{\"source\":\"\($0.0)\",\"names\":[\"org.example.\($0.0)\"],\"state\":\"\($0.1)\",\"off_flag\":null}" }
        return try JSONValue(parsing: """
            {"session_bus":true,"system_bus":true,"logind_session":"/s","services":[\(list.joined(separator: ","))],
             "inhibit_portal":\(portal.map { "\"\($0)\"" } ?? "null")}
            """)
    }

    @Test("each service of holds: served, or whose name it is and what is not seen; GTK's way to hold the lock off, or how to give it one")
    func sessionBusServices() throws {
        let owned = "org.example.dbus: owned by another program (pid 42, light-locker): its inhibitors are not seen by xidlelock"
        let findings = Doctor.serviceFindings(try Self.desktop(
            services: [("dbus", owned), ("power-management", "org.example.power-management: served"), ("session-manager", "off")],
            portal: nil))
        #expect(findings.contains { $0.level == .warning && $0.detail == owned }, "\(findings)")
        #expect(findings.contains { $0.level == .ok && $0.detail == "serving org.example.power-management" }, "\(findings)")
        let gtk = findings.first { $0.detail.hasPrefix("GTK applications") }
        #expect(gtk?.level == .warning && gtk?.fix?.hasPrefix("install xdg-desktop-portal-gtk, or run the agent with --session-manager-service") == true, "\(findings)")
        // A portal installed, or the session manager served: GTK has its way, nothing to say.
        for (manager, portal) in [("off", "/usr/share/xdg-desktop-portal/portals/gtk.portal"),
                                  ("org.example.session-manager: served", nil)] {
            let quiet = Doctor.serviceFindings(try Self.desktop(services: [("session-manager", manager)], portal: portal))
            #expect(!quiet.contains { $0.detail.hasPrefix("GTK applications") }, "\(quiet)")
        }
    }

    @Test("each broken part is a problem with what to do", arguments: [
        ("no agent", "agent", "systemctl --user start xidlelock"),
        ("no locker", "locker", "install one"),
        ("locker missing", "locker", "install it, or set another locker"),
        ("keyboard held", "keyboard", "close the menu"),
        ("no display", "display", "inside your X session"),
        ("no Xlib", "display", "install libx11-6"),
    ])
    func broken(_ what: String, _ check: String, _ fix: String) throws {
        var facts = try Self.healthy()
        switch what {
        case "no agent":
            facts.status = nil
            facts.agentProblem = "no xidlelock agent is running for this display"
        case "no locker": facts.lockerCommand = nil
        case "locker missing": facts.lockerPath = nil
        case "keyboard held": facts.keyboardGrabbedByOther = true
        case "no Xlib":
            facts.displayProblem = "cannot load Xlib (libX11.so.6: cannot open shared object file)"
            facts.displayFix = "install libx11-6 and libxss1: the agent loads them when it starts"
        default: facts.displayProblem = "cannot open X display ':0'"
        }
        let report = Doctor.diagnose(facts)
        #expect(!report.lockWouldHappen)
        #expect(problems(report) == [check])
        #expect(report.findings.first { $0.check == check }?.fix?.contains(fix) == true)
        #expect(report.text.contains("=> the screen will NOT lock by itself: 1 problem above"))
    }

    @Test("what holds the lock off: each inhibitor by source, who, why and for how long; a disable; a failing locker")
    func holds() throws {
        var facts = try Self.healthy()
        facts.status = try JSONValue(parsing: """
            {"state":"inhibited","idle_ms":900000,"disabled":true,"disabled_remaining_ms":null,
             "inhibitors":[{"id":3,"source":"dbus","who":"firefox-esr (pid 77 firefox-esr, :1.9)","why":"Playing video","since_ms":754000},
                           {"id":4,"source":"audio","who":"mpv (pid 80)","why":"playing audio","since_ms":1000}],
             "locker":{"state":"failing","next_try_in_ms":4000},"last_locker_failure":{"reason":"exited with status 1"},
             "stages":[{"name":"lock","role":"lock","idle_ms":600000}]}
            """)
        let report = Doctor.diagnose(facts)
        #expect(problems(report) == ["locker", "held off", "held off", "held off"])
        let held = report.findings.filter { $0.check == "held off" }.map(\.detail)
        #expect(held == ["disabled until enabled",
                         "by firefox-esr (pid 77 firefox-esr, :1.9) [dbus] for 12m34s: Playing video",
                         "by mpv (pid 80) [audio] for 1s: playing audio"])
        #expect(report.findings.contains { $0.fix?.contains("--no-screensaver-service") == true })
        #expect(report.nextLockIn == nil)
    }

    @Test("--json: the verdict, the next lock and every finding")
    func json() throws {
        let report = Doctor.diagnose(try Self.healthy())
        #expect(report.json["lock_would_happen"] == .bool(true))
        #expect(report.json["next_lock_in_ms"] == .number(540_000))
        guard case .array(let findings)? = report.json["findings"] else {
            Issue.record("no findings")
            return
        }
        #expect(findings.count == report.findings.count)
        #expect(findings.first?["check"] == .string("display"))
    }
}

@Suite("doctor on what others tried")
struct DoctorAttackTests {
    @Test("forged logind signals are a warning naming what to do; refused holds and holds past the list are named")
    func forgedAndRefused() throws {
        var facts = try DoctorDiagnosisTests.healthy()
        facts.status = try JSONValue(parsing: """
            {"v":1,"ok":true,"state":"inhibited","idle_ms":60000,"locker":null,"disabled":false,"session_active":true,
             "policy":null,"settings":[],"stages":[{"name":"lock","role":"lock","idle_ms":600000}],
             "inhibitors":[{"id":7,"source":"dbus","who":"pid 9 (firefox-esr), :1.9","why":"firefox-esr: Playing video"}],
             "inhibitor_count":33,
             "refused_holds":[{"source":"logind","who":"backup (pid 77, uid 0, logind)","why":"running","reason":"it belongs to another user (uid 0); --logind-inhibitors own"}],
             "desktop":{"session_bus":true,"screensaver_service":true,"system_bus":true,"logind_session":"/org/freedesktop/login1/session/c1","forged_signals":12}}
            """)
        let report = Doctor.diagnose(facts)
        #expect(report.text.contains("12 signals claiming to be logind's came from other connections and were dropped"), "\(report.text)")
        #expect(report.text.contains("and 32 more holds"), "\(report.text)")
        #expect(report.text.contains("backup (pid 77, uid 0, logind) [logind]: it belongs to another user (uid 0)"), "\(report.text)")
        #expect(!report.lockWouldHappen)
    }
}

@Suite("doctor on the buses")
struct DoctorBusTests {
    @Test("a bus not connected says why and what the agent does next; locking goes on")
    func busNotConnected() throws {
        var facts = try DoctorDiagnosisTests.healthy()
        facts.status = try JSONValue(parsing: """
            {"v":1,"ok":true,"state":"active","idle_ms":1000,"locker":null,"disabled":false,"session_active":true,
             "policy":null,"settings":[],"stages":[{"name":"lock","role":"lock","idle_ms":600000}],
             "desktop":{"session_bus":false,"session_bus_state":"not connected: it did not answer within 5s; trying again",
                        "screensaver_service":false,"system_bus":false,"system_bus_state":"connecting","logind_session":null,"forged_signals":0}}
            """)
        let report = Doctor.diagnose(facts)
        #expect(report.text.contains("not connected: it did not answer within 5s; trying again: browsers' and players' inhibitors"), "\(report.text)")
        #expect(report.text.contains("connecting: no lock before sleep"), "\(report.text)")
        #expect(report.lockWouldHappen, "\(report.text)")
    }
}

@Suite("a Wayland session")
struct WaylandSessionTests {
    @Test("either sign makes it one; an X11 session is not", arguments: [
        ("wayland", nil, true), (nil, "wayland-0", true), ("x11", nil, false), (nil, nil, false), ("x11", "", false),
    ] as [(String?, String?, Bool)])
    func detected(_ type: String?, _ display: String?, _ refused: Bool) {
        let refusal = WaylandSession.refusal(sessionType: type, waylandDisplay: display)
        #expect((refusal != nil) == refused)
        if let refusal { #expect(refusal.contains("swayidle") && refusal.contains("hypridle")) }
    }

    @Test("doctor makes it a problem: no lock would happen")
    func doctorSaysSo() throws {
        var facts = try DoctorDiagnosisTests.healthy()
        facts.sessionProblem = WaylandSession.refusal(sessionType: "wayland", waylandDisplay: nil)
        let report = Doctor.diagnose(facts)
        #expect(!report.lockWouldHappen)
        #expect(report.text.contains("Wayland session"))
    }
}
