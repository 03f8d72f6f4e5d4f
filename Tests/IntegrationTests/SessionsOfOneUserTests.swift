import Foundation
import Glibc
import Testing

/// Issue #40: several graphical sessions of one user (a local one beside xrdp's and
/// TigerVNC's), each agent answering for its own session only.
@Suite struct SessionsOfOneUserTests {
    // Row 3.
    @Test("JOURNAL_STREAM inherited from a service while stderr is a file: plain lines, no <N> prefixes; naming stderr itself: prefixed")
    func journalStreamCheckedAgainstStderr() async throws {
        try await Sandbox.with { s in
            // The device and inode of another file (the sandbox directory), as a session
            // started from tigervncserver@:1.service inherits its unit's stream.
            var other = stat()
            #expect(stat(s.directory.path, &other) == 0)
            let inherited = try s.startAgent(["--lock-after", "1h", "--socket", s.path("inherited.sock")],
                                             environment: ["JOURNAL_STREAM": "\(other.st_dev):\(other.st_ino)"])
            try await inherited.waitForLog(containing: "started; idle for")
            #expect(!inherited.log.contains("<6>"), "\(inherited.log)")
            #expect(inherited.log.contains("xidlelock: "), "\(inherited.log)")
            // sd-daemon's rule holds both ways: a stream that is stderr is the journal's.
            let journal = try s.startAgent(["--lock-after", "1h", "--socket", s.path("journal.sock")],
                                           shell: "JOURNAL_STREAM=$(stat -L -c %d:%i /proc/$$/fd/2) && export JOURNAL_STREAM && exec \"$0\" \"$@\"")
            try await waitUntil("a prefixed line", context: { journal.log }) { journal.log.contains("<6>") }
            #expect(!journal.log.contains("xidlelock: started"), "\(journal.log)")
        }
    }
}

/// Two graphical sessions of the test's user, as a local session beside xrdp's: `c3` on
/// the sandbox's Xvfb (active) and `c4` on a second Xvfb, both in logind's mock, whose
/// GetSessionByPID finds a process's session by `MOCK_LOGIND_SESSION` in its (or an
/// ancestor's) environment, as real logind finds it by the process's cgroup. Both share
/// the sandbox's one session bus (one user, one `/run/user/UID/bus`) and one runtime
/// directory, where each agent's control socket is named after its display.
final class TwoSessions {
    let s: Sandbox
    let second: XvfbServer
    /// Sessions added by `addSession`, each on an Xvfb of its own.
    private var more: [String: XvfbServer] = [:]
    static let first = "c3", other = "c4"
    var runtime: String { s.path("runtime") }

    private init(_ s: Sandbox, second: XvfbServer) {
        self.s = s
        self.second = second
    }

    static func with(_ body: (TwoSessions) async throws -> Void) async throws {
        try await Sandbox.with(buses: true) { s in
            let directory = s.directory.appending(path: "second")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let second = try await XvfbServer(in: directory)
            let sessions = TwoSessions(s, second: second)
            do {
                mkdir(sessions.runtime, 0o700)
                let name = String(cString: getpwuid(getuid())!.pointee.pw_name)
                try await s.bus("guard-setup", first, String(getuid()), name, try #require(s.display))
                try await s.bus("session-add", other, String(getuid()), name, second.display)
                try await body(sessions)
            } catch {
                await sessions.stopServers()
                throw error
            }
            await sessions.stopServers()
        }
    }

    private func stopServers() async {
        await second.stop()
        for server in more.values { await server.stop() }
    }

    /// Another session of this user (class user, not active) on an Xvfb of its own.
    func addSession(_ session: String) async throws {
        let directory = s.directory.appending(path: session)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let server = try await XvfbServer(in: directory)
        more[session] = server
        try await s.bus("session-add", session, String(getuid()), String(cString: getpwuid(getuid())!.pointee.pw_name), server.display)
    }

    func display(_ session: String) -> String { session == Self.first ? s.display! : more[session]?.display ?? second.display }

    /// What every process of `session` has in its environment.
    func environment(_ session: String) -> [String: String?] {
        ["DISPLAY": display(session), "XDG_SESSION_ID": session, "MOCK_LOGIND_SESSION": session, "XDG_RUNTIME_DIR": runtime]
    }

    /// The agent of `session`, on its default socket (the runtime directory's, named after
    /// its display); waits until it answers.
    func startAgent(_ session: String, _ arguments: [String], environment more: [String: String?] = [:]) async throws -> AgentProcess {
        let agent = try s.startAgent(arguments, environment: environment(session).merging(more) { $1 })
        try await waitUntil("the agent of \(session) to answer", context: { agent.log }) {
            guard agent.process.isRunning else { throw AgentExited(waitingFor: "its socket", exit: Exit(agent.process), log: agent.log) }
            return (try? await self.client(session, "status").exit) == .exited(0)
        }
        return agent
    }

    /// `xidlelock ARGUMENTS` run in `session`.
    func client(_ session: String, _ arguments: String...) async throws -> CommandResult {
        try await s.run(agentBinary, arguments, environment: environment(session))
    }

    func status(_ session: String) async throws -> [String: Any] {
        let result = try await client(session, "status", "--json")
        guard result.exit == .exited(0), let object = jsonObject(result.stdout) else {
            throw CommandFailed(command: ["status", "--json"], result: result)
        }
        return object
    }

    /// Runs bus.py as a process of `session`.
    func bus(_ session: String, _ arguments: String...) async throws -> CommandResult {
        try await s.run(systemPython, [busScript] + arguments, environment: environment(session))
    }
}

extension SessionsOfOneUserTests {
    // Row 5.
    @Test("status (and --json) names the logind session and the display each agent of one user answers for")
    func statusNamesTheSession() async throws {
        try await TwoSessions.with { t in
            _ = try await t.startAgent(TwoSessions.first, ["--lock-after", "1h", "--locker", Script.locker])
            _ = try await t.startAgent(TwoSessions.other, ["--lock-after", "1h", "--locker", Script.locker])
            for session in [TwoSessions.first, TwoSessions.other] {
                let named = try await t.status(session)["session"] as? [String: Any]
                #expect(named?["id"] as? String == session && named?["display"] as? String == t.display(session)
                        && named?["from"] as? String == "logind", "\(session): \(String(describing: named))")
                let text = try await t.client(session, "status").stdout
                #expect(text.contains("session: \(session) on \(t.display(session)) (from logind)"), "\(text)")
            }
        }
    }

    @Test("an agent in no session (the user unit's), whose DISPLAY is the user manager's (the second session's, whose agent runs): it watches the user's display session as logind elects it, and runs")
    func userUnitAgentFollowsTheUsersDisplaySession() async throws {
        try await TwoSessions.with { t in
            let (first, other) = (TwoSessions.first, TwoSessions.other)
            let user = String(getuid())
            let set = try await t.bus(first, "user-display", user, first)
            try #require(set.exit == .exited(0), "\(set.stderr)")
            let second = try await t.startAgent(other, ["--lock-after", "1h", "--locker", Script.locker])
            // What `systemctl --user restart xidlelock` gives it: the last session's DISPLAY
            // (each X session pushes its own into the one user manager), no session of its own.
            let unit = try t.s.startAgent(["--lock-after", "1h", "--locker", Script.locker],
                                          environment: ["DISPLAY": t.display(other), "XDG_SESSION_ID": nil,
                                                        "MOCK_LOGIND_SESSION": nil, "XDG_RUNTIME_DIR": t.runtime])
            try await waitUntil("the unit's agent to answer in \(first)", context: { unit.log }) {
                guard unit.process.isRunning else { throw AgentExited(waitingFor: "its socket", exit: Exit(unit.process), log: unit.log) }
                return (try? await t.client(first, "status").exit) == .exited(0)
            }
            let named = try await t.status(first)["session"] as? [String: Any]
            #expect(named?["id"] as? String == first && named?["display"] as? String == t.display(first), "\(String(describing: named))")
            #expect(unit.log.contains("the agent runs in no session (a user unit's), so it watches its user's display session"), "\(unit.log)")
            let otherNamed = try await t.status(other)["session"] as? [String: Any]
            #expect(second.process.isRunning && otherNamed?["id"] as? String == other, "the second session's agent: \(String(describing: otherNamed))")
        }
    }

    // Row 4.
    @Test("a lock due at start (X idle past the lock time): its audit entry and its LockedHint name the logind session, learned before the lock")
    func firstLockNamesTheSession() async throws {
        try await TwoSessions.with { t in
            try await t.s.x("xdotool", "key", "shift")
            try await t.s.waitUntil("1.5 s of X idle") { try await t.s.serverIdle() >= 1500 }
            let agent = try await t.startAgent(TwoSessions.first, ["--lock-after", "1s", "--locker", Script.grabbingLocker()])
            _ = try await t.s.waitForLines("lockers.pids")
            try await agent.waitForLog(containing: "locked: the locker holds the keyboard")
            let log = agent.log
            let named = log.range(of: "session \(TwoSessions.first) on \(t.display(TwoSessions.first)), as logind says")
            let locking = log.range(of: "locking after")
            #expect(named != nil && locking != nil && named!.lowerBound < locking!.lowerBound, "the session named after the lock\n\(log)")
            try await t.s.waitUntil("LockedHint true on \(TwoSessions.first)") {
                let calls = try await t.bus(TwoSessions.first, "locked-hint-calls")
                return calls.stdout.contains("true")
            }
            if AuditTests.journalRuns {
                let lock = try await AuditTests().waitForJournal(t.s, pid: agent.pid, "lock")["lock"]
                #expect(lock?["XIDLELOCK_SESSION"] as? String == TwoSessions.first, "\(String(describing: lock))")
                #expect(lock?["XIDLELOCK_DISPLAY"] as? String == t.display(TwoSessions.first), "\(String(describing: lock))")
            } else {
                try await agent.waitForAuditLine(of: "lock")
                let line = agent.auditLines(of: "lock").first ?? ""
                #expect(line.contains("XIDLELOCK_SESSION=\"\(TwoSessions.first)\""), "\(line)")
            }
        }
    }
}

/// A real i3lock that any typed password unlocks, whose let-go falls before the agent's
/// look and its exit `exitAfter` ms after that look (Harness/i3lock-preload.c, built
/// here with cc into the sandbox).
func preloadedI3lock(_ s: Sandbox, exitAfter: Int) async throws -> String {
    let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appending(path: "Harness/i3lock-preload.c").path
    let library = s.path("i3lock-preload.so")
    let built = try await s.run("cc", ["-shared", "-fPIC", "-o", library, source, "-ldl", "-lxcb"])
    guard built.exit == .exited(0) else { throw CommandFailed(command: ["cc", source], result: built) }
    return "exec env LD_PRELOAD=\(library) I3LOCK_PRELOAD_LOG=\(s.path("i3lock.log")) I3LOCK_PRELOAD_EXIT_AFTER_MS=\(exitAfter) i3lock -n"
}

extension SessionsOfOneUserTests {
    // Row 2.
    @Test("a real i3lock unlocked by typing, letting go of the keyboard before the agent's look and exiting 0 1 s later (within the 1.5 s bound): an unlock each time, no error line, no new locker",
          arguments: [1000])
    func i3lockLetGoThenExitIsAnUnlock(exitAfter: Int) async throws {
        try await Sandbox.with { s in
            // i3lock lets go explicitly (before its exit) when it took the focus from the
            // active window (_NET_ACTIVE_WINDOW, as a window manager sets it).
            let window = try await s.x(testWindowBinary, "create", "editor")
            try await s.x(testWindowBinary, "activate", window)
            try await s.x("xdotool", "windowfocus", window)
            let locker = try await preloadedI3lock(s, exitAfter: exitAfter)
            let agent = try await s.startControlledAgent(["--lock-after", "1h", "--locker", locker, "--on-unlock", "echo >> unlocks"])
            _ = try await s.startEvents()
            for round in 1...2 {
                #expect(try await s.client("lock").exit == .exited(0))
                let pid = try await s.waitForCoveringLocker()
                #expect(ProcInfo.name(pid) == "i3lock", "the locker is \(ProcInfo.name(pid) ?? "gone")")
                try await s.x("xdotool", "type", "x")
                try await s.x("xdotool", "key", "Return")
                try await s.waitUntil("unlock \(round)", timeout: .seconds(30)) { s.lines("unlocks").count == round }
            }
            let notes = s.lines("i3lock.log")
            print("figure: real i3lock, let-go, the agent's look, exit 0 \(exitAfter) ms after the look: \(notes)")
            #expect(notes.filter { $0.hasPrefix("probed") }.count == 2, "the agent never looked between a let-go and the exit: \(notes)")
            #expect(!agent.log.contains("error:"), "\(agent.log)")
            #expect(!agent.log.contains("never grabbed"), "\(agent.log)")
            #expect(!agent.log.contains("(attempt 2)"), "a new locker started\n\(agent.log)")
            #expect(s.events("locker-not-covering").isEmpty && s.events("locker-failed").isEmpty, "\(s.contents("events"))")
            #expect(agent.count(of: "unlocked after") == 2, "\(agent.log)")
        }
    }

    @Test("without a policy: a locker that lets go and is still running past the 1.5 s bound is not covering (an error, LockedHint false); its later exit 0 unlocks without saying it never grabbed")
    func letGoPastTheBound() async throws {
        try await Sandbox.with(buses: true) { s in
            let agent = try await s.startControlledAgent(["--lock-after", "1h", "--locker",
                                                          "exec \(testLockerBinary) --let-go-after 500 --let-go-file let-go --exit-after-probe 2500"])
            #expect(try await s.client("lock").exit == .exited(0))
            _ = try await s.waitForCoveringLocker()
            try await agent.waitForLog(containing: "unlocked after", timeout: .seconds(30))
            let letGo = s.lines("let-go")
            #expect(letGo.count == 2 && letGo[1].hasPrefix("probed"), "\(letGo)")
            #expect(agent.log.contains("error: the locker let go of the keyboard after holding it for"), "\(agent.log)")
            #expect(agent.log.contains("(the locker had let go of the keyboard before it exited)"), "\(agent.log)")
            #expect(!agent.log.contains("never grabbed"), "\(agent.log)")
            let hints = try await s.lockedHintCalls()
            #expect(Array(hints.prefix(2)) == [true, false], "\(hints)")
        }
    }
}

extension TwoSessions {
    /// The first session's agent (it owns the session bus's names, started first), then
    /// the second's, each with a lock time of an hour; returns once both have had the
    /// bus's answer for org.freedesktop.ScreenSaver.
    func startBothAgents() async throws -> (owner: AgentProcess, second: AgentProcess) {
        let owner = try await startAgent(Self.first, ["--lock-after", "1h", "--locker", Script.locker])
        try await owner.waitForLog(containing: "serving org.freedesktop.ScreenSaver")
        let second = try await startAgent(Self.other, ["--lock-after", "1h", "--locker", Script.locker])
        try await second.waitForLog(containing: "org.freedesktop.ScreenSaver is ")
        return (owner, second)
    }

    /// `bus.py ss-inhibit` as a player of `session`, holding until `until` exists (then
    /// `--uninhibit` if asked); returns once it printed its cookie (or failed).
    func startPlayer(_ session: String, until: String, uninhibit: Bool = false) async throws -> (process: Process, output: String) {
        let output = "player-\(session)-\(until)"
        let process = try s.startBackground(systemPython, [busScript, "ss-inhibit", "/org/freedesktop/ScreenSaver", "player-\(session)", "film",
                                                           "--until", until] + (uninhibit ? ["--uninhibit"] : []),
                                            output: output, environment: environment(session))
        try await s.waitUntil("the player of \(session) to be answered") { !s.lines(output).isEmpty || !process.isRunning }
        return (process, output)
    }

    func inhibitors(_ session: String) async throws -> [[String: Any]] {
        try await status(session)["inhibitors"] as? [[String: Any]] ?? []
    }
}

extension SessionsOfOneUserTests {
    // Row 1.
    @Test("one user, two sessions, one session bus: a player's Inhibit holds the session it plays in, whichever agent owns org.freedesktop.ScreenSaver; the other session locks on time; a session with no agent is refused by name")
    func holdHoldsTheCallersSession() async throws {
        try await TwoSessions.with { t in
            let (first, other) = (TwoSessions.first, TwoSessions.other)
            let (owner, _) = try await t.startBothAgents()

            // A film in the second session: its agent holds it, the owner holds nothing.
            let (player, output) = try await t.startPlayer(other, until: "stop-film")
            let cookie = try #require(Int(t.s.lines(output).first ?? ""), "the player's Inhibit: \(t.s.contents(output))\n\(owner.log)")
            let held = try await t.inhibitors(other)
            #expect(held.count == 1 && held.first?["source"] as? String == "dbus" && held.first?["id"] as? Int == cookie
                    && (held.first?["who"] as? String)?.contains("passed on by") == true, "\(held)")
            #expect(try await t.inhibitors(first).isEmpty, "the owner holds its own session for the other's film")
            #expect(try await t.status(first)["state"] as? String == "active")
            #expect(owner.log.contains("passed on to the agent of logind session \(other)"), "\(owner.log)")

            // Its end (the player leaves the bus) ends the hold over there.
            t.s.touch("stop-film")
            _ = try await player.waitForExit("the player")
            try await t.s.waitUntil("the second session's hold to end") { try await t.inhibitors(other).isEmpty }

            // UnInhibit of a hold passed on ends it too.
            let (_, output2) = try await t.startPlayer(other, until: "stop-film-2", uninhibit: true)
            #expect(Int(t.s.lines(output2).first ?? "") != nil, "\(t.s.contents(output2))")
            try await t.s.waitUntil("the second hold") { try await t.inhibitors(other).count == 1 }
            t.s.touch("stop-film-2")
            try await t.s.waitUntil("the UnInhibit") { t.s.lines(output2).contains("uninhibited") }
            try await t.s.waitUntil("the second session's hold to end by UnInhibit") { try await t.inhibitors(other).isEmpty }

            // A film in the owner's own session is held there, as ever.
            let (_, output3) = try await t.startPlayer(first, until: "stop-film-3")
            #expect(Int(t.s.lines(output3).first ?? "") != nil, "\(t.s.contents(output3))")
            let ownHeld = try await t.inhibitors(first), otherHeld = try await t.inhibitors(other)
            #expect(ownHeld.count == 1 && otherHeld.isEmpty, "\(ownHeld) \(otherHeld)")
            t.s.touch("stop-film-3")

            // The same for org.freedesktop.PowerManagement (VLC, OBS, LibreOffice).
            let pmOutput = "pm-\(other)"
            _ = try t.s.startBackground(systemPython, [busScript, "pm-inhibit", "org.freedesktop.PowerManagement", "vlc", "film", "--until", "stop-pm"],
                                        output: pmOutput, environment: t.environment(other))
            try await t.s.waitUntil("PowerManagement's answer") { !t.s.lines(pmOutput).isEmpty }
            let pmHeld = try await t.inhibitors(other)
            #expect(pmHeld.count == 1 && pmHeld.first?["source"] as? String == "power-management", "\(pmHeld)\n\(t.s.contents(pmOutput))")
            #expect(try await t.inhibitors(first).filter { $0["source"] as? String == "power-management" }.isEmpty)
            t.s.touch("stop-pm")
            try await t.s.waitUntil("the PowerManagement hold to end") { try await t.inhibitors(other).isEmpty }

            // A session of the user with no agent: refused, naming it.
            try await t.s.bus("session-add", "c5", String(getuid()), "someone", ":77")
            let lonely = try await t.bus("c5", "ss", "/org/freedesktop/ScreenSaver", "Inhibit", "player-c5", "film")
            #expect(lonely.exit != .exited(0) && lonely.stderr.contains("org.freedesktop.DBus.Error.AccessDenied")
                    && lonely.stderr.contains("session c5") && lonely.stderr.contains("no xidlelock agent answers"), "\(lonely.stderr)")

            // What passing on costs the caller: Inhibit and UnInhibit, 20 times, on one connection.
            let timing = """
            import dbus, time
            o = dbus.SessionBus().get_object('org.freedesktop.ScreenSaver', '/org/freedesktop/ScreenSaver', introspect=False)
            times = []
            for k in range(20):
                t0 = time.monotonic(); c = o.Inhibit('timing', 'film', dbus_interface='org.freedesktop.ScreenSaver'); times.append(time.monotonic() - t0)
                o.UnInhibit(c, dbus_interface='org.freedesktop.ScreenSaver')
            times.sort(); print('%.2f %.2f %.2f' % (times[0] * 1000, times[10] * 1000, times[-1] * 1000))
            """
            for session in [first, other] {
                let measured = try await t.s.run(systemPython, ["-c", timing], environment: t.environment(session))
                print("figure: Inhibit answered in ms (min, median, max of 20) for a caller of \(session == first ? "the owner's session, held there" : "the other session, passed on"): \(measured.stdout.trimmingCharacters(in: .whitespacesAndNewlines))\(measured.stderr)")
            }
            try await t.s.waitUntil("the timing holds to end") {
                let (a, b) = (try await t.inhibitors(other), try await t.inhibitors(first))
                return a.isEmpty && b.isEmpty
            }

            // doctor, in each session, says which agent serves the names on the shared bus.
            let doctorOther = try await t.client(other, "doctor")
            #expect(doctorOther.stdout.contains("served by the xidlelock agent of another session"), "\(doctorOther.stdout)")
            let doctorFirst = try await t.client(first, "doctor")
            #expect(doctorFirst.stdout.contains("for session \(first); a hold of another session's program is passed on"), "\(doctorFirst.stdout)")
        }
    }

    @Test("a film in one session holds that session only: the other locks on time, whichever session's agent owns the bus's names")
    func otherSessionLocksOnTime() async throws {
        for ownerSession in [TwoSessions.first, TwoSessions.other] {
            try await TwoSessions.with { t in
                let filmSession = ownerSession == TwoSessions.first ? TwoSessions.other : TwoSessions.first
                let lockAfter = 4000
                for session in [ownerSession, filmSession] {
                    _ = try await t.s.run("xdotool", ["key", "shift"], environment: t.environment(session))
                    let agent = try await t.startAgent(session, ["--lock-after", "\(lockAfter)ms", "--locker", "echo locked > locked-\(session); exec sleep 60"])
                    try await agent.waitForLog(containing: session == ownerSession ? "serving org.freedesktop.ScreenSaver" : "org.freedesktop.ScreenSaver is ")
                }
                // The film plays in the session whose agent does not own the name, or does.
                let (_, output) = try await t.startPlayer(filmSession, until: "stop")
                #expect(Int(t.s.lines(output).first ?? "") != nil, "\(t.s.contents(output))")
                try await t.s.waitUntil("the session without a film to lock", timeout: .seconds(30)) {
                    t.s.exists("locked-\(ownerSession)")
                }
                var filmStatus: [String: Any] = [:]
                try await t.s.waitUntil("the film's session idle past the lock time") {
                    filmStatus = try await t.status(filmSession)
                    return filmStatus["idle_ms"] as? Int ?? 0 >= lockAfter + 1000
                }
                #expect(!t.s.exists("locked-\(filmSession)") && filmStatus["state"] as? String == "inhibited", "\(filmStatus)")
                t.s.touch("stop")
            }
        }
    }

    @Test("a pass-on request from a program that does not own the service's name is refused: the socket's door is the user's, the service's is the bus's owner's")
    func passOnFromAnotherProgramIsRefused() async throws {
        try await TwoSessions.with { t in
            let other = TwoSessions.other
            let (_, second) = try await t.startBothAgents()
            // The user's own program, naming a real process of the second session.
            let socket = "\(t.runtime)/xidlelock/\(t.display(other).dropFirst()).sock"
            let script = """
            import json, os, socket, sys
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sys.argv[1])
            s.sendall((json.dumps({"v": 1, "cmd": "pass-on", "source": "dbus", "pid": int(sys.argv[2]), "who": "a film", "why": "forged"}) + "\\n").encode())
            print(s.makefile().readline().strip())
            """
            let forged = try await t.s.run(systemPython, ["-c", script, socket, String(second.pid)], environment: t.environment(other))
            #expect(forged.stdout.contains("only the program that owns"), "\(forged.stdout)\(forged.stderr)")
            #expect(try await t.inhibitors(other).isEmpty)
        }
    }
}

extension SessionsOfOneUserTests {
    // Row 1, MPRIS.
    @Test("--not-when-playing with two sessions of one user: a player playing in one session holds that session's agent only (the player's pid placed by logind)")
    func playerHoldsItsOwnSession() async throws {
        try await TwoSessions.with { t in
            let (first, other) = (TwoSessions.first, TwoSessions.other)
            let agents = [try await t.startAgent(first, ["--lock-after", "1h", "--locker", Script.locker, "--not-when-playing"]),
                          try await t.startAgent(other, ["--lock-after", "1h", "--locker", Script.locker, "--not-when-playing"])]
            for agent in agents { try await agent.waitForLog(containing: "following the media players") }
            let player = try await MprisPlayer("film", in: t.s, environment: t.environment(other))
            try await t.s.waitUntil("the player's hold in \(other)") {
                try await t.inhibitors(other).contains { $0["source"] as? String == "playing" }
            }
            // The first agent has seen the same player, and logind's answer, by now: a
            // player of its own session would be held within the same moment.
            let mine = try await MprisPlayer("mine", in: t.s, environment: t.environment(first))
            try await t.s.waitUntil("its own player's hold in \(first)") {
                try await t.inhibitors(first).contains { $0["source"] as? String == "playing" }
            }
            let held = try await t.inhibitors(first)
            #expect(held.count == 1 && (held.first?["who"] as? String)?.contains("\(mine.pid)") == true, "\(held)")
            let otherHeld = try await t.inhibitors(other)
            #expect(otherHeld.count == 1 && (otherHeld.first?["who"] as? String)?.contains("\(player.pid)") == true, "\(otherHeld)")
        }
    }
}

extension SessionsOfOneUserTests {
    @Test("the agent of the session that stays takes over the session bus's names when the owner's session ends: its players are held there, and the ended session's are refused")
    func namesTakenOverWhenTheOwnerEnds() async throws {
        try await TwoSessions.with { t in
            let (first, other) = (TwoSessions.first, TwoSessions.other)
            let (owner, second) = try await t.startBothAgents()
            let (_, before) = try await t.startPlayer(other, until: "stop-before")
            #expect(Int(t.s.lines(before).first ?? "") != nil, "\(t.s.contents(before))")
            try await t.s.waitUntil("the passed-on hold") { try await t.inhibitors(other).count == 1 }
            owner.terminate()
            _ = try await owner.waitForExit()
            // What the ended agent passed on ended with it; the name is the second's now.
            try await t.s.waitUntil("the passed-on hold to end with its agent") { try await t.inhibitors(other).isEmpty }
            try await second.waitForLog(containing: "serving org.freedesktop.ScreenSaver")
            let (_, after) = try await t.startPlayer(other, until: "stop-after")
            #expect(Int(t.s.lines(after).first ?? "") != nil, "\(t.s.contents(after))")
            let held = try await t.inhibitors(other)
            #expect(held.count == 1 && (held.first?["who"] as? String)?.contains("passed on") == false, "\(held)")
            let orphan = try await t.bus(first, "ss", "/org/freedesktop/ScreenSaver", "Inhibit", "player-c3", "film")
            #expect(orphan.exit != .exited(0) && orphan.stderr.contains("session \(first)"), "\(orphan.stderr)")
            t.s.touch("stop-before")
            t.s.touch("stop-after")
        }
    }
}

extension SessionsOfOneUserTests {
    @Test("three sessions: when the owner's session ends and the names pass to the agent queued next, the third session's agent takes the new owner's pass-ons (the ended owner's pid no longer counts)")
    func passOnFollowsTheNewOwner() async throws {
        try await TwoSessions.with { t in
            let (first, other, third) = (TwoSessions.first, TwoSessions.other, "c5")
            try await t.addSession(third)
            let owner = try await t.startAgent(first, ["--lock-after", "1h", "--locker", Script.locker])
            try await owner.waitForLog(containing: "serving org.freedesktop.ScreenSaver")
            // Queued in this order: the second session's agent takes the names next.
            let next = try await t.startAgent(other, ["--lock-after", "1h", "--locker", Script.locker])
            try await next.waitForLog(containing: "org.freedesktop.ScreenSaver is ")
            let last = try await t.startAgent(third, ["--lock-after", "1h", "--locker", Script.locker])
            try await last.waitForLog(containing: "org.freedesktop.ScreenSaver is ")
            owner.terminate()
            _ = try await owner.waitForExit()
            try await next.waitForLog(containing: "serving org.freedesktop.ScreenSaver")
            let (_, played) = try await t.startPlayer(third, until: "stop-third")
            try #require(Int(t.s.lines(played).first ?? "") != nil, "the third session's Inhibit: \(t.s.contents(played))\n\(last.log)")
            try await t.s.waitUntil("the third session's hold, passed on by the new owner") { try await t.inhibitors(third).count == 1 }
            #expect(try await t.inhibitors(other).isEmpty, "the new owner holds the third session's film itself")
            t.s.touch("stop-third")
        }
    }
}

extension SessionsOfOneUserTests {
    @Test("org.freedesktop.ScreenSaver.Lock (xdg-screensaver lock) from a program of the second session locks the second session, not the owner's; its SimulateUserActivity is refused")
    func lockLocksTheCallersSession() async throws {
        try await TwoSessions.with { t in
            let (first, other) = (TwoSessions.first, TwoSessions.other)
            let owner = try await t.startAgent(first, ["--lock-after", "1h", "--locker", "echo > locked-\(first); exec sleep 60"])
            try await owner.waitForLog(containing: "serving org.freedesktop.ScreenSaver")
            let second = try await t.startAgent(other, ["--lock-after", "1h", "--locker", "echo > locked-\(other); exec sleep 60"])
            try await second.waitForLog(containing: "org.freedesktop.ScreenSaver is ")
            let lock = try await t.bus(other, "ss", "/org/freedesktop/ScreenSaver", "Lock")
            #expect(lock.exit == .exited(0), "\(lock.stderr)")
            try await t.s.waitUntil("the second session's locker") { t.s.exists("locked-\(other)") }
            #expect(!t.s.exists("locked-\(first)"), "the owner's session was locked for the other's Lock\n\(owner.log)")
            // Nor is another session's program activity in the owner's session.
            let activity = try await t.bus(other, "ss", "/org/freedesktop/ScreenSaver", "SimulateUserActivity")
            #expect(activity.exit != .exited(0) && activity.stderr.contains("its activity is not this session's"), "\(activity.stderr)")
            let own = try await t.bus(first, "ss", "/org/freedesktop/ScreenSaver", "SimulateUserActivity")
            #expect(own.exit == .exited(0), "\(own.stderr)")
        }
    }
}

extension TwoSessions {
    /// Every question of the shared services asked on one connection from `session`, as
    /// JSON: `active`, `active_time`, `idle_time` (org.freedesktop.ScreenSaver), `has_inhibit`
    /// (PowerManagement), `is_inhibited` (the session manager, idle flag); each a value or
    /// "error: NAME: message".
    func questions(_ session: String) async throws -> [String: Any] {
        let script = """
        import dbus, json
        bus = dbus.SessionBus()
        def call(name, path, interface, method, *args):
            try:
                v = getattr(bus.get_object(name, path, introspect=False), method)(*args, dbus_interface=interface)
                return bool(v) if isinstance(v, dbus.Boolean) else int(v)
            except dbus.exceptions.DBusException as e:
                return 'error: %s: %s' % (e.get_dbus_name(), e.get_dbus_message())
        ss = ('org.freedesktop.ScreenSaver', '/org/freedesktop/ScreenSaver', 'org.freedesktop.ScreenSaver')
        pm = ('org.freedesktop.PowerManagement', '/org/freedesktop/PowerManagement/Inhibit', 'org.freedesktop.PowerManagement.Inhibit')
        sm = ('org.gnome.SessionManager', '/org/gnome/SessionManager', 'org.gnome.SessionManager')
        print(json.dumps({'active': call(*ss, 'GetActive'), 'active_time': call(*ss, 'GetActiveTime'),
                          'idle_time': call(*ss, 'GetSessionIdleTime'), 'has_inhibit': call(*pm, 'HasInhibit'),
                          'is_inhibited': call(*sm, 'IsInhibited', dbus.UInt32(8))}))
        """
        let result = try await s.run(systemPython, ["-c", script], environment: environment(session))
        return try #require(jsonObject(result.stdout), "the questions from \(session): \(result.stdout)\(result.stderr)")
    }

}

extension SessionsOfOneUserTests {
    // Issue #40, what was left: the questions.
    @Test("GetActive, GetActiveTime, GetSessionIdleTime, HasInhibit and IsInhibited answer for the caller's session, whichever agent owns the names; a session with no agent is refused by name; a stopped agent of the other session costs its caller a bounded wait, never the owner's loop")
    func questionsAnsweredForTheCallersSession() async throws {
        try await TwoSessions.with { t in
            let (first, other) = (TwoSessions.first, TwoSessions.other)
            let owner = try await t.startAgent(first, ["--lock-after", "1h", "--locker", Script.locker, "--session-manager-service"])
            try await owner.waitForLog(containing: "serving org.gnome.SessionManager")
            try await owner.waitForLog(containing: "serving org.freedesktop.ScreenSaver")
            let second = try await t.startAgent(other, ["--lock-after", "1h", "--locker", Script.grabbingLocker(unlock: "unlock-\(other)"),
                                                        "--session-manager-service"])
            try await second.waitForLog(containing: "org.gnome.SessionManager is ")

            // The second session: a film held through PowerManagement and the session manager, and its screen locked.
            _ = try t.s.startBackground(systemPython, [busScript, "pm-inhibit", "org.freedesktop.PowerManagement", "vlc", "film", "--until", "stop-pm"],
                                        output: "pm.out", environment: t.environment(other))
            let sessionManagerHold = """
            import dbus, os, time
            o = dbus.SessionBus().get_object('org.gnome.SessionManager', '/org/gnome/SessionManager', introspect=False)
            print(int(o.Inhibit('totem', dbus.UInt32(0), 'film', dbus.UInt32(8), dbus_interface='org.gnome.SessionManager')), flush=True)
            while not os.path.exists('stop-sm'): time.sleep(0.05)
            """
            _ = try t.s.startBackground(systemPython, ["-c", sessionManagerHold], output: "sm.out", environment: t.environment(other))
            try await t.s.waitUntil("both holds in the second session") { try await t.inhibitors(other).count == 2 }
            #expect(try await t.client(other, "lock").exit == .exited(0))
            try await t.s.waitUntil("the second session's locker to cover its screen") {
                (try await t.status(other)["locker"] as? [String: Any])?["covers_screen"] as? Bool == true
            }
            // Idle times apart: the second session idle for 3 s at least, the owner's just touched.
            // Idle for 3 s and locked for over a second: on a loaded machine the session may
            // have been idle that long before its lock.
            try await t.s.waitUntil("the second session idle for 3 s and locked for 1.5 s", every: .milliseconds(200)) {
                let status = try await t.status(other)
                return status["idle_ms"] as? Int ?? 0 >= 3000 && status["locked_ms"] as? Int ?? 0 >= 1500
            }
            try await t.s.x("xdotool", "mousemove_relative", "1", "1")

            let asked = try await t.questions(other)
            #expect(asked["active"] as? Bool == true, "GetActive from the locked session: \(asked)\n\(owner.log)")
            #expect(asked["active_time"] as? Int ?? -1 >= 1, "GetActiveTime from the locked session: \(asked)")
            #expect(asked["idle_time"] as? Int ?? -1 >= 2, "GetSessionIdleTime from the session idle for 3 s: \(asked)")
            #expect(asked["has_inhibit"] as? Bool == true, "HasInhibit from the session with a PowerManagement hold: \(asked)")
            #expect(asked["is_inhibited"] as? Bool == true, "IsInhibited(idle) from the session with a session-manager hold: \(asked)")

            // The owner's own session: as ever, its own screen and holds.
            let own = try await t.questions(first)
            #expect(own["active"] as? Bool == false && own["active_time"] as? Int == 0 && own["has_inhibit"] as? Bool == false
                    && own["is_inhibited"] as? Bool == false && own["idle_time"] as? Int ?? 99 < 2, "\(own)")

            // A session of the user with no agent: refused, naming it.
            try await t.s.bus("session-add", "c5", String(getuid()), "someone", ":77")
            let lonely = try await t.questions("c5")
            for key in ["active", "active_time", "idle_time", "has_inhibit", "is_inhibited"] {
                let answer = lonely[key] as? String ?? ""
                #expect(answer.contains("org.freedesktop.DBus.Error.AccessDenied") && answer.contains("session c5")
                        && answer.contains("no xidlelock agent answers"), "\(key): \(lonely)")
            }

            // What asking the other session's agent costs the caller: GetActive, 20 times.
            let timing = """
            import dbus, time
            o = dbus.SessionBus().get_object('org.freedesktop.ScreenSaver', '/org/freedesktop/ScreenSaver', introspect=False)
            times = []
            for k in range(20):
                t0 = time.monotonic(); o.GetActive(dbus_interface='org.freedesktop.ScreenSaver'); times.append(time.monotonic() - t0)
            times.sort(); print('%.2f %.2f %.2f' % (times[0] * 1000, times[10] * 1000, times[-1] * 1000))
            """
            for session in [first, other] {
                let measured = try await t.s.run(systemPython, ["-c", timing], environment: t.environment(session))
                print("figure: GetActive answered in ms (min, median, max of 20) for a caller of \(session == first ? "the owner's session, answered there" : "the other session, from its agent's status"): \(measured.stdout.trimmingCharacters(in: .whitespacesAndNewlines))\(measured.stderr)")
            }

            // The second session's agent stopped: its caller is refused after the bound,
            // and the owner answers its own socket meanwhile.
            kill(second.process.processIdentifier, SIGSTOP)
            let stalled = try t.s.startBackground(systemPython, ["-c", "import dbus; print(bool(dbus.SessionBus().get_object('org.freedesktop.ScreenSaver', '/org/freedesktop/ScreenSaver', introspect=False).GetActive(dbus_interface='org.freedesktop.ScreenSaver')))"],
                                                  output: "stalled.out", environment: t.environment(other))
            #expect(try await t.status(first)["state"] as? String == "active")
            #expect(stalled.isRunning, "the stalled question was answered before the owner's status")
            _ = try await stalled.waitForExit("GetActive from the session whose agent is stopped")
            kill(second.process.processIdentifier, SIGCONT)
            #expect(t.s.contents("stalled.out").contains("AccessDenied") && t.s.contents("stalled.out").contains("did not answer within 2s"),
                    "\(t.s.contents("stalled.out"))")
            #expect(try await t.questions(other)["active"] as? Bool == true)

            t.s.touch("stop-pm")
            t.s.touch("stop-sm")
            t.s.touch("unlock-\(other)")
        }
    }
}

extension SessionsOfOneUserTests {
    // Issue #40, what was left: logind's idle inhibitors.
    @Test("logind idle inhibitors (systemd-inhibit --what=idle) of one user's two sessions: each holds its own session's agent only; the other agent shows it not honoured, naming the session; its end ends the hold")
    func idleInhibitorHoldsItsOwnSession() async throws {
        try await TwoSessions.with { t in
            let (first, other) = (TwoSessions.first, TwoSessions.other)
            let uid = String(getuid())
            _ = try await t.startBothAgents()
            func logind(_ held: [[String: Any]]) -> [String] {
                held.filter { $0["source"] as? String == "logind" }.compactMap { $0["who"] as? String }
            }
            func refused(_ session: String) async throws -> [[String: Any]] {
                try await t.status(session)["refused_holds"] as? [[String: Any]] ?? []
            }

            // An inhibitor held by a process of the second session.
            let holder = try t.s.startBackground("sleep", ["600"], output: "holder-\(other).out", environment: t.environment(other))
            try await t.s.bus("idle-inhibitor-add", "raid-check", "checking the array", uid, String(holder.processIdentifier))
            try await t.s.bus("block-inhibited", "idle")
            try await t.s.waitUntil("the second session's agent to hold it") { try await !logind(t.inhibitors(other)).isEmpty }
            try await t.s.waitUntil("the owner's agent to hold or refuse it") {
                let (held, notHeld) = (try await logind(t.inhibitors(first)), try await refused(first))
                return !held.isEmpty || !notHeld.isEmpty
            }
            #expect(try await logind(t.inhibitors(first)).isEmpty, "the owner holds its session for the other session's systemd-inhibit")
            let notHonoured = try await refused(first)
            #expect(notHonoured.count == 1 && notHonoured.first?["source"] as? String == "logind"
                    && notHonoured.first?["reason"] as? String == "it runs in logind session \(other), not in this agent's session \(first); --logind-inhibitors own",
                    "\(notHonoured)")
            let doctor = try await t.client(first, "doctor").stdout
            #expect(doctor.contains("raid-check") && doctor.contains("it runs in logind session \(other)"), "\(doctor)")

            // One of the owner's session: held there only.
            let ownHolder = try t.s.startBackground("sleep", ["600"], output: "holder-\(first).out", environment: t.environment(first))
            try await t.s.bus("idle-inhibitor-add", "backup", "copying", uid, String(ownHolder.processIdentifier))
            try await t.s.bus("block-inhibited", "idle:sleep")
            try await t.s.waitUntil("the owner's agent to hold its own") { try await !logind(t.inhibitors(first)).isEmpty }
            try await t.s.waitUntil("the second agent to refuse the owner's session's") { try await refused(other).count == 1 }
            let (heldOther, heldFirst) = (try await logind(t.inhibitors(other)), try await logind(t.inhibitors(first)))
            #expect(heldOther.count == 1 && heldFirst.count == 1, "\(heldOther) \(heldFirst)")
            #expect(try await refused(other).first?["reason"] as? String
                    == "it runs in logind session \(first), not in this agent's session \(other); --logind-inhibitors own")

            // Its end ends the hold.
            try await t.s.bus("idle-inhibitor-remove", "raid-check")
            try await t.s.bus("block-inhibited", "idle")
            try await t.s.waitUntil("the second session's hold to end") { try await logind(t.inhibitors(other)).isEmpty }
            #expect(try await logind(t.inhibitors(first)).count == 1)
        }
    }
}

extension SessionsOfOneUserTests {
    // Issue #40, what was left: --not-when-audio.
    @Test("--not-when-audio with two sessions of one user and their one sound server: a stream playing in one session holds that session's agent only (the stream's application.process.id placed by logind)")
    func audioHoldsItsOwnSession() async throws {
        try await TwoSessions.with { t in
            let (first, other) = (TwoSessions.first, TwoSessions.other)
            let pulse = try PulseServer(in: t.s)
            try await pulse.start()
            var agents: [String: AgentProcess] = [:]
            for session in [first, other] {
                agents[session] = try await t.startAgent(session, ["--lock-after", "1h", "--locker", Script.locker, "--not-when-audio"],
                                                         environment: pulse.environment)
                try await agents[session]!.waitForLog(containing: "following the sound server")
            }
            func audio(_ session: String) async throws -> [String] {
                try await t.inhibitors(session).filter { $0["source"] as? String == "audio" }.compactMap { $0["who"] as? String }
            }

            // A player in the second session: its agent holds, the first's does not.
            let player = try await Player("FilmOfC4", on: pulse, in: t.s, environment: t.environment(other))
            try await agents[other]!.waitForLog(containing: "inhibited by FilmOfC4 (pid \(player.pid)) while it plays")
            // A player in the first session, started after: once the first agent holds it, it
            // has placed the second's stream too (logind answers in order).
            let own = try await Player("MusicOfC3", on: pulse, in: t.s, environment: t.environment(first))
            try await agents[first]!.waitForLog(containing: "inhibited by MusicOfC3 (pid \(own.pid)) while it plays")
            let (heldFirst, heldOther) = (try await audio(first), try await audio(other))
            #expect(heldFirst == ["MusicOfC3 (pid \(own.pid))"], "the first session's agent: \(heldFirst)\n\(agents[first]!.log)")
            #expect(heldOther == ["FilmOfC4 (pid \(player.pid))"], "the second session's agent: \(heldOther)\n\(agents[other]!.log)")

            // Its end ends the hold there; the other session's stays.
            try await player.send("stop")
            try await t.s.waitUntil("the second session's audio hold to end") { try await audio(other).isEmpty }
            #expect(try await audio(first) == ["MusicOfC3 (pid \(own.pid))"])
            try await own.send("stop")
        }
    }
}
