import Foundation
import Glibc
import Testing

/// Issue #35, "the guard vouches only for what it verified": the session's own user
/// (`nobody`) against `xidlelock guard`, each attack as DESIGN.md's "What the kernel lets
/// that user do" measured it. Each test asserts the outcome the product must give, not
/// how it gets there: the session is **covered** — a locker (the agent's or the guard's)
/// holds the keyboard (the test locker records its pid once it holds it) or logind was
/// asked to end the session (the mock's TerminateSession) — within agent-grace + 2 s of
/// the attack (or of the lock's due time), and root's `doctor --policy` never exits 0
/// while the screen is open. See `GuardSession` for the machine each test builds.
///
/// Every wait is on a thing (the locker's pid file, a process, logind's mock, a line an
/// attacker prints, an exit status) with a deadline; each test prints a `guard figure:`
/// line with what it measured.
@Suite(.serialized, .enabled(if: getuid() == 0, "the guard runs as root and the session's user is nobody"))
struct GuardAttackTests {
    // MARK: What the tests measure

    /// What happened in a watched window after an attack.
    struct Watch {
        /// When the session was covered, after the window's start (nil: not within it).
        var coveredAfter: Duration?
        /// What covered it.
        var how = ""
        /// Root's doctor runs in the window, and those that exited 0 (met) or did not
        /// answer within 5 s (after the window's start, what they said).
        var doctorRuns = 0
        var doctorMet: [Duration] = []
        var doctorSilent: [Duration] = []
    }

    /// Watches the session from now until `since + window`: ends once it is covered (a
    /// locker's pid beyond the first `lockersBefore`, or a TerminateSession), asking
    /// root's doctor (5 s at most each) all along while it is not.
    func watchCover(_ g: GuardSession, since: ContinuousClock.Instant, window: Duration = guardGrace + guardActWindow,
                    lockersBefore: Int) async throws -> Watch {
        var watch = Watch()
        let end = since + window
        let sinceEpoch = Date().timeIntervalSince1970 - Double((ContinuousClock.now - since).milliseconds) / 1000
        func covered() -> Bool {
            if g.lockerPids.count > lockersBefore {
                watch.how = "locker \(g.lockerPids[lockersBefore])"
                return true
            }
            if let at = g.terminateTimes.first, at >= sinceEpoch - 1 {
                watch.how = "TerminateSession"
                return true
            }
            return false
        }
        while true {
            if covered() {
                watch.coveredAfter = ContinuousClock.now - since
                return watch
            }
            guard ContinuousClock.now < end else { return watch }
            let asked = ContinuousClock.now - since
            watch.doctorRuns += 1
            switch try await doctor(g) {
            case nil: watch.doctorSilent.append(asked)
            case let result? where result.exit == .exited(0): watch.doctorMet.append(asked)
            default: break
            }
            try await Task.sleep(for: .milliseconds(25))
        }
    }

    /// Root's `doctor --policy` (JSON when asked), nil when it did not answer within 5 s.
    func doctor(_ g: GuardSession, json: Bool = false) async throws -> CommandResult? {
        do {
            return try await g.s.run(agentBinary, ["doctor", "--policy", g.metProfile] + (json ? ["--json"] : []),
                                     environment: g.guardEnvironment, timeout: .seconds(5))
        } catch is WaitTimedOut {
            return nil
        }
    }

    /// The session as the guard reports it to root (what root's doctor asks the guard:
    /// the `sessions` line on guard.sock, answered as JSON), nil when it gives none.
    /// Root's doctor prints no lock of its own, so the guard's word is the one checked.
    func guardReport(_ g: GuardSession) -> [String: Any]? {
        guard let reader = try? LineReader(RawSocketClient(g.guardSocket)) else { return nil }
        _ = reader.client.send(Array("sessions\n".utf8))
        guard let line = reader.next(timeout: .seconds(5)), let report = jsonObject(line),
              let sessions = report["sessions"] as? [[String: Any]] else { return nil }
        return sessions.first { $0["id"] as? String == guardSessionID }
    }

    func expectCovered(_ watch: Watch, _ g: GuardSession, what: String, window: Duration = guardGrace + guardActWindow,
                       sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(watch.coveredAfter != nil,
                "\(what): no locker held the keyboard and the session was not logged off within \(window.milliseconds) ms (lockers recorded \(g.lockerPids))\n\(g.logs)",
                sourceLocation: sourceLocation)
        // Before the window's start (a lock not due yet) the session may well be met.
        let met = watch.doctorMet.filter { $0 >= .zero }
        #expect(met.isEmpty,
                "\(what): root's doctor --policy exited 0 (met) while the screen was open, \(met.count) of \(watch.doctorRuns) times (first \(met.first?.milliseconds ?? 0) ms after)",
                sourceLocation: sourceLocation)
        #expect(watch.doctorSilent.isEmpty,
                "\(what): root's doctor --policy did not answer within 5 s, \(watch.doctorSilent.count) of \(watch.doctorRuns) times",
                sourceLocation: sourceLocation)
    }

    func figure(_ name: String, _ watch: Watch) -> String {
        "guard figure (\(name)): " + (watch.coveredAfter.map { "covered (\(watch.how)) \($0.milliseconds) ms after" } ?? "NOT covered")
            + "; root's doctor met \(watch.doctorMet.filter { $0 >= .zero }.count) of \(watch.doctorRuns) runs"
            + (watch.doctorMet.contains { $0 < .zero } ? " (and \(watch.doctorMet.filter { $0 < .zero }.count) before the window)" : "")
            + ", silent \(watch.doctorSilent.count)"
    }

    /// A /proc file read to its end (a read(2) of /proc/PID/maps gives about a page).
    static func wholeFile(_ path: String) -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return "" }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { break }
            bytes += chunk[..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    // MARK: The attacker's tools

    /// attack.py (beside bus.py), which the user runs.
    static let attackScript = URL(fileURLWithPath: busScript).deletingLastPathComponent().appending(path: "attack.py").path

    /// Starts attack.py as the session's user, with the session's environment; its output
    /// into `output` in the sandbox.
    func startAttack(_ g: GuardSession, _ arguments: [String], output: String) throws -> Process {
        let (program, args) = g.asUser(guardUserID, systemPython, [GuardAttackTests.attackScript] + arguments)
        return try g.s.startBackground(program, args, output: output, environment: g.userEnvironment(g.user))
    }

    /// Waits for a line of an attacker's output that starts with `prefix`, failing at once
    /// if the attacker exited; returns the line.
    func waitForLine(_ g: GuardSession, _ output: String, _ prefix: String, of process: Process,
                     timeout: Duration = generousTimeout) async throws -> String {
        var line = ""
        try await g.wait("`\(prefix)` from the attacker (\(output))", timeout: timeout, extra: { g.s.contents(output) }) {
            line = g.s.contents(output).split(separator: "\n").map(String.init).first { $0.hasPrefix(prefix) } ?? ""
            if line.isEmpty && !process.isRunning {
                throw CommandFailed(command: [output], result: CommandResult(exit: Exit(process), stdout: g.s.contents(output), stderr: ""))
            }
            return !line.isEmpty
        }
        return line
    }

    /// A small X client, compiled at test time against libX11 (into the sandbox, which
    /// every user may read): `grab-server` (XGrabServer, XSync, prints `grabbed`, then
    /// waits for ever) and `keyboard` (prints `free` if it could grab the keyboard, which
    /// it lets go at once, else `held N`).
    static let xClientSource = """
        #include <X11/Xlib.h>
        #include <stdio.h>
        #include <string.h>
        #include <unistd.h>
        int main(int argc, char **argv) {
            Display *d = XOpenDisplay(NULL);
            if (!d) { fprintf(stderr, "cannot open the display\\n"); return 2; }
            if (argc > 1 && strcmp(argv[1], "grab-server") == 0) {
                XGrabServer(d);
                XSync(d, False);
                printf("grabbed\\n");
                fflush(stdout);
                for (;;) pause();
            }
            if (argc > 1 && strcmp(argv[1], "keyboard") == 0) {
                int r = XGrabKeyboard(d, DefaultRootWindow(d), False, GrabModeAsync, GrabModeAsync, CurrentTime);
                if (r == GrabSuccess) {
                    XUngrabKeyboard(d, CurrentTime);
                    XSync(d, False);
                    printf("free\\n");
                } else {
                    printf("held %d\\n", r);
                }
                return 0;
            }
            return 64;
        }

        """

    func compileXClient(_ g: GuardSession) async throws -> String {
        try g.s.write(GuardAttackTests.xClientSource, to: "xclient.c")
        let program = g.s.path("xclient")
        let built = try await g.s.run("cc", ["-O1", "-o", program, g.s.path("xclient.c"), "-lX11"])
        try #require(built.exit == .exited(0), "cc xclient.c: \(built.stderr)")
        return program
    }

    /// Kills the verified agent (SIGKILL) and waits for the guard's locker: its pid.
    func guardLocker(_ g: GuardSession, figure name: String) async throws -> Int32 {
        let agent = try await g.startVerifiedAgent()
        agent.send(SIGKILL)
        let killedAt = ContinuousClock.now
        _ = try await agent.waitForExit()
        let (pid, after) = try await g.waitForLocker(since: killedAt)
        print("guard figure (\(name)): the guard's locker \(pid) held the keyboard \(after.milliseconds) ms after the kill")
        return pid
    }

    // MARK: 1. Registration by proxy

    @Test("1. registration by proxy: the verified agent killed, a process of the user connects to guard.sock, hands the socket to a helper and execs the real `xidlelock --help` (blocked for ever on a full pipe); the helper registers, sends a real agent's status and `locked`: covered within agent-grace + 2 s of the kill, root's doctor never met")
    func registrationByProxy() async throws {
        try await GuardSession.with { g in
            let agent = try await g.startVerifiedAgent()
            let saved = try await g.runAsUser(agentBinary, ["status", "--json"])
            try #require(saved.exit == .exited(0), "status as the user: \(saved.stderr)")
            try g.s.write(saved.stdout, to: "user/agent-status.json")
            agent.send(SIGKILL)
            let killedAt = ContinuousClock.now
            _ = try await agent.waitForExit()
            let proxy = try startAttack(g, ["proxy-register", g.guardSocket, g.binary, g.display, g.s.path("user/agent-status.json")],
                                        output: "proxy.out")
            let execd = try await waitForLine(g, "proxy.out", "exec'd ", of: proxy)
            _ = try await waitForLine(g, "proxy.out", "sent", of: proxy)
            let sentAfter = ContinuousClock.now - killedAt
            // The process the guard sees: the real executable, asleep in write(2).
            let pid = try #require(Int32(execd.dropFirst("exec'd ".count)))
            let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")
            let watch = try await watchCover(g, since: killedAt, lockersBefore: 0)
            let answer = g.s.contents("proxy.out").split(separator: "\n").filter { $0.hasPrefix("guard") }.joined(separator: " | ")
            print(figure("1. registration by proxy, sent \(sentAfter.milliseconds) ms after the kill from pid \(pid) (\(exe ?? "gone")); the guard: \(answer.isEmpty ? "nothing yet" : answer)", watch))
            expectCovered(watch, g, what: "a helper registered under `xidlelock --help`'s pid \(pid) (the guard said: \(answer))")
        }
    }

    // MARK: 2, 3. A handle on the agent's memory

    /// How the binary the guard and the agents run is installed.
    enum Installed: String, CaseIterable, CustomTestStringConvertible {
        /// With the mode the product's `make install` gives it (the Makefile's rule).
        case asMakeInstall = "as `make install` installs it"
        /// Unreadable to users (root's, 0711): the kernel starts it non-dumpable.
        case mode0711 = "root's, mode 0711"
        var testDescription: String { rawValue }

        func binary() throws -> GuardBinary {
            switch self {
            case .asMakeInstall:
                let mode = try #require(InstalledBinary.makeInstallMode, "no `install -m MODE $(RELEASE_BIN)` rule in the Makefile")
                return .installed(mode: mode)
            case .mode0711: return .installed(mode: 0o711)
            }
        }
    }

    @Test("2. a handle on the agent's memory before it is non-dumpable: the agent started as the user's traced child (PTRACE_TRACEME), at its exec stop the user opens /proc/PID/mem for writing: the open fails, or (it opened, the user detaches and patches nothing, keeping the descriptor) the guard refuses that agent and the session is covered within agent-grace + 2 s",
          arguments: Installed.allCases)
    func memoryHandleAtExec(installed: Installed) async throws {
        let binary = try installed.binary()
        try await GuardSession.with(binary: binary) { g in
            let log = g.user.base + "/traced-agent.log"
            let attacker = try startAttack(g, ["traced-agent", log, g.binary, "--verbose", "--lock-after", "5m"], output: "traced.out")
            let agentLine = try await waitForLine(g, "traced.out", "agent ", of: attacker)
            let opened = try await waitForLine(g, "traced.out", "open ", of: attacker)
            _ = try await waitForLine(g, "traced.out", "detached", of: attacker)
            let detachedAt = ContinuousClock.now
            let pid = Int32(agentLine.dropFirst("agent ".count)) ?? 0
            let mode = String((try? FileManager.default.attributesOfItem(atPath: g.binary)[.posixPermissions] as? Int) ?? 0, radix: 8)
            guard opened == "open ok" else {
                print("guard figure (2. /proc/\(pid)/mem at the exec stop, binary \(installed.rawValue), mode \(mode)): \(opened)")
                #expect(["open failed EACCES", "open failed EPERM"].contains(opened), "the open failed, but not for want of permission: \(opened)")
                return
            }
            // Opened: the user holds a descriptor that writes the agent's memory.
            let watch = try await watchCover(g, since: detachedAt, lockersBefore: 0)
            let verdict = (try? String(contentsOfFile: log, encoding: .utf8))?.split(separator: "\n")
                .first { $0.contains("the guard verified") || $0.contains("the guard refused") }.map(String.init) ?? "no word from the guard"
            print(figure("2. /proc/\(pid)/mem opened for writing at the exec stop, binary \(installed.rawValue), mode \(mode); the agent: \(verdict)", watch))
            expectCovered(watch, g, what: "the user opened /proc/\(pid)/mem for writing at the agent's exec stop (binary mode \(mode)) and kept it; the agent: \(verdict)")
        }
    }

    @Test("3. the re-exec window: SIGUSR1 (the agent's reload executes it again in place) and the user's /proc/PID/mem opened for writing as fast as it can for 1 s after: it never opens",
          arguments: Installed.allCases)
    func memoryHandleAtReload(installed: Installed) async throws {
        let binary = try installed.binary()
        try await GuardSession.with(binary: binary) { g in
            let agent = try await g.startVerifiedAgent()
            let attacker = try startAttack(g, ["mem-window", "\(agent.pid)", "1.0"], output: "window.out")
            let before = try await waitForLine(g, "window.out", "before: ", of: attacker)
            let after = try await waitForLine(g, "window.out", "after: ", of: attacker)
            // `after: attempts N opened M first T last T`
            let words = after.split(separator: " ")
            let opened = words.firstIndex(of: "opened").flatMap { Int(words[$0 + 1]) } ?? -1
            let mode = String((try? FileManager.default.attributesOfItem(atPath: g.binary)[.posixPermissions] as? Int) ?? 0, radix: 8)
            print("guard figure (3. reload, binary \(installed.rawValue), mode \(mode)): \(before); \(after) (ms after SIGUSR1)")
            #expect(!before.hasSuffix("ok"), "the user opened the verified agent's /proc/\(agent.pid)/mem before the reload: \(before)")
            #expect(opened == 0, "the user opened /proc/\(agent.pid)/mem for writing around the reload: \(after) (binary mode \(mode))\n\(agent.log)")
        }
    }

    // MARK: 4. LD_PRELOAD

    @Test("4. LD_PRELOAD of a library the user owns (it does nothing): the guard refuses that agent (root's doctor never met) and the session is covered within agent-grace + 2 s of the agent's start")
    func preloadedLibrary() async throws {
        try await GuardSession.with { g in
            let lib = g.user.base + "/lib"
            #expect(mkdir(lib, 0o755) == 0 && chown(lib, guardUserID, guardUserID) == 0)
            try g.s.write("void xidlelock_attack_nothing(void) {}\n", to: "nothing.c")
            let so = lib + "/libnothing.so"
            let built = try await g.s.run("cc", ["-shared", "-fPIC", "-o", so, g.s.path("nothing.c")])
            try #require(built.exit == .exited(0), "cc -shared: \(built.stderr)")
            #expect(chown(so, guardUserID, guardUserID) == 0)
            let agent = try g.startAgent(environment: ["LD_PRELOAD": so])
            let startedAt = ContinuousClock.now
            // The attack took: the library is mapped in the agent.
            try await g.wait("the agent to map \(so)") {
                guard agent.process.isRunning else { throw AgentExited(waitingFor: "the preload", exit: Exit(agent.process), log: agent.log) }
                return GuardAttackTests.wholeFile("/proc/\(agent.pid)/maps").contains(so)
            }
            let watch = try await watchCover(g, since: startedAt, lockersBefore: 0)
            // Where the library sits in the maps of the agent once it runs (the loader maps
            // a preloaded library first, then the others, which come before it in the file).
            let maps = GuardAttackTests.wholeFile("/proc/\(agent.pid)/maps")
            let offset = maps.range(of: so).map { maps.utf8.distance(from: maps.startIndex, to: $0.lowerBound) } ?? -1
            let verdict = agent.log.split(separator: "\n").first { $0.contains("the guard verified") || $0.contains("the guard refused") }
                .map(String.init) ?? "no word from the guard"
            print(figure("4. LD_PRELOAD (at byte \(offset) of \(maps.utf8.count) of /proc/PID/maps); the agent: \(verdict)", watch))
            expectCovered(watch, g, what: "an agent with LD_PRELOAD=\(so) (the agent: \(verdict))")
        }
    }

    // MARK: 9. Every locker killed as it starts

    @Test("9. every locker killed as it starts, the agent's and then the guard's (a loop of the user's kills them as soon as it sees them): the session is logged off within agent-grace + 2 s of the lock")
    func lockersKilledAsTheyStart() async throws {
        try await GuardSession.with { g in
            let agent = try await g.startVerifiedAgent()
            // The user's own loop: every locker of the session's user killed as soon as seen
            // ([T]: the pattern never matches the loop's own command line).
            let (program, arguments) = g.asUser(guardUserID, "sh", ["-c", "while :; do pkill -KILL -f '[T]estLocker.*\(g.lockersFile)' && echo killed; sleep 0.005; done"])
            let killer = try g.s.startBackground(program, arguments, output: "killer.log", environment: g.userEnvironment(g.user))
            let lockedAt = ContinuousClock.now
            let lock = try await g.runAsUser(agentBinary, ["lock"])
            #expect(lock.exit == .exited(0), "xidlelock lock as the user: \(lock.stderr)")
            // Nothing covers while each locker dies at once: logged off is the only cover.
            let watch = try await watchCover(g, since: lockedAt, lockersBefore: Int.max)
            killer.terminate()
            let killed = g.s.contents("killer.log").split(separator: "\n").count
            print(figure("9. lockers killed as they start (\(killed) killed)", watch))
            // Root's doctor is not judged here: until the third failure (a few ms) the
            // guard rightly counts the agent, whose lockers it has not yet seen fail, as
            // guarding; the attack is answered by the logoff.
            #expect(watch.coveredAfter.map { $0 <= guardGrace + guardActWindow } == true,
                    "every locker killed as it starts (agent \(agent.pid)): not logged off within agent-grace + 2 s\n\(g.logs)")
            #expect(watch.how == "TerminateSession", "\(watch.how)")
        }
    }

    // MARK: 6. The guard's locker stopped, its window killed

    @Test("6. the guard's locker stopped (SIGSTOP) and its X client killed (xkill -id on its window), as the user: a locker holds the keyboard again within agent-grace + 2 s, and the guard never reports the stopped locker to root as the lock")
    func stoppedLockerWindowKilled() async throws {
        try await GuardSession.with { g in
            let xclient = try await compileXClient(g)
            let locker = try await guardLocker(g, figure: "6. kill -9 before the attack")
            let window = try await lockerWindow(g)
            let stopped = try await g.runAsUser("kill", ["-STOP", "\(locker)"])
            try #require(stopped.exit == .exited(0), "kill -STOP as the user: \(stopped.stderr)")
            // The attack took (the locker stopped), or the guard, which traces its lockers,
            // dropped the signal (it says so): either way the attack goes on.
            try await g.wait("the locker to stop, or the guard to drop the stop") {
                ["T", "t"].contains(ProcInfo.state(locker) ?? "") || g.guardLog.contains("to the guard's locker (pid \(locker)) dropped")
            }
            let killed = try await g.runAsUser("xkill", ["-id", "0x" + String(window, radix: 16)])
            let attackAt = ContinuousClock.now
            try #require(killed.exit == .exited(0), "xkill as the user: \(killed.stderr)")
            let probe = try await g.s.run(xclient, ["keyboard"])
            print("guard figure (6. after SIGSTOP and xkill of 0x\(String(window, radix: 16))): the keyboard is \(probe.stdout.trimmingCharacters(in: .whitespacesAndNewlines))")

            var coveredAfter: Duration?
            var how = ""
            var reportedLocked: [Duration] = []
            var reports = 0
            while ContinuousClock.now < attackAt + guardGrace + guardActWindow {
                if let new = g.lockerPids.first(where: { $0 != locker && isAlive($0) }) {
                    coveredAfter = ContinuousClock.now - attackAt
                    how = "a new locker \(new)"
                    break
                }
                let state = ProcInfo.state(locker) ?? "gone"
                if state != "T" && state != "t" && state != "gone",
                   try await g.s.run(xclient, ["keyboard"]).stdout.hasPrefix("held") {
                    coveredAfter = ContinuousClock.now - attackAt
                    how = "the same locker, running (state \(state)), the keyboard held"
                    break
                }
                if ["T", "t"].contains(ProcInfo.state(locker) ?? ""), let report = guardReport(g) {
                    reports += 1
                    let lockerOf = (report["guard_locker"] as? NSNumber)?.int32Value
                    if report["locked"] as? Bool == true && (lockerOf == nil || lockerOf == locker) {
                        reportedLocked.append(ContinuousClock.now - attackAt)
                    }
                }
                try await Task.sleep(for: .milliseconds(25))
            }
            print("guard figure (6. stopped locker, window killed): " + (coveredAfter.map { "covered by \(how) \($0.milliseconds) ms after" } ?? "NOT covered")
                  + "; the guard's report to root said locked by the stopped locker in \(reportedLocked.count) of \(reports) reports")
            #expect(coveredAfter != nil, "no locker held the keyboard within \(((guardGrace + guardActWindow)).milliseconds) ms of the attack: the guard's locker \(locker) stays stopped (state \(ProcInfo.state(locker) ?? "gone")), its X client killed; lockers recorded \(g.lockerPids)\n\(g.logs)")
            #expect(reportedLocked.isEmpty, "the guard's report to root (what root's doctor asks) said the session locked by the stopped locker \(locker) \(reportedLocked.count) of \(reports) times (first \(reportedLocked.first?.milliseconds ?? 0) ms after the attack)")
        }
    }

    /// The locker's window: the full-screen child of the root (640x480+0+0) of the newest
    /// client (the highest id), the locker being the last client to come.
    func lockerWindow(_ g: GuardSession) async throws -> UInt {
        let tree = try await g.s.x("xwininfo", "-root", "-children")
        let windows = tree.split(separator: "\n").compactMap { line -> UInt? in
            let words = line.split(separator: " ")
            guard let id = words.first, id.hasPrefix("0x"), words.contains("640x480+0+0") else { return nil }
            return UInt(id.dropFirst(2), radix: 16)
        }
        return try #require(windows.max(), "no full-screen window of the locker's:\n\(tree)")
    }

    /// The attack of 6 and 10 on a real i3lock: started by `parent` (the guard, or the
    /// agent after `xidlelock lock`); as the user, SIGSTOP (the tracer drops it: `dropped`
    /// says so in its log), then `xkill` of its window. The next i3lock of the same parent
    /// must hold the keyboard within agent-grace + 2 s.
    func stopThenKillI3lock(_ g: GuardSession, parent: Int32, of whose: String, log: @escaping () -> String,
                            dropped: @escaping (Int32) -> String, figure name: String) async throws {
        let xclient = try await compileXClient(g)
        func i3locks() -> [Int32] {
            ProcInfo.allPids.filter { pid in
                ProcInfo.parent(pid) == parent && ProcInfo.commandLine(pid).split(separator: " ").first?.hasSuffix("i3lock") == true
            }
        }
        func keyboardHeld() async throws -> Bool { try await g.s.run(xclient, ["keyboard"]).stdout.hasPrefix("held") }
        var first: Int32 = 0
        try await g.wait("\(whose) i3lock to hold the keyboard") {
            guard let pid = i3locks().first else { return false }
            first = pid
            return try await keyboardHeld()
        }
        let stopped = try await g.runAsUser("kill", ["-STOP", "\(first)"])
        try #require(stopped.exit == .exited(0), "kill -STOP as the user: \(stopped.stderr)")
        // The stop shows as a tracing stop ("t") until the tracer has dropped it: only
        // its log line says it has.
        try await g.wait("\(whose) tracer to drop the stop of its i3lock") { log().contains(dropped(first)) }
        #expect(!["T", "t"].contains(ProcInfo.state(first) ?? ""), "\(whose) i3lock \(first) is stopped\n\(log())")
        let window = try await lockerWindow(g)
        let killed = try await g.runAsUser("xkill", ["-id", "0x" + String(window, radix: 16)])
        let attackAt = ContinuousClock.now
        try #require(killed.exit == .exited(0), "xkill as the user: \(killed.stderr)")
        var next: Int32?
        try await g.wait("another i3lock of \(whose) to hold the keyboard", timeout: guardGrace + guardActWindow + .seconds(10)) {
            guard let pid = i3locks().first(where: { $0 != first }) else { return false }
            next = pid
            return try await keyboardHeld()
        }
        let after = ContinuousClock.now - attackAt
        print("guard figure (\(name)): i3lock \(first) ended, i3lock \(next ?? 0) held the keyboard \(after.milliseconds) ms after the xkill")
        #expect(after <= guardGrace + guardActWindow, "the next i3lock held the keyboard \(after.milliseconds) ms after the xkill\n\(log())")
    }

    @Test("6b. the same with the real i3lock as the policy's locker: SIGSTOP as the user is dropped (it keeps running), and once its window is xkilled the guard's next i3lock holds the keyboard within agent-grace + 2 s")
    func stoppedI3lockWindowKilled() async throws {
        try await GuardSession.with(locker: "i3lock -n -c ff0000") { g in
            let agent = try await g.startVerifiedAgent()
            agent.send(SIGKILL)
            _ = try await agent.waitForExit()
            let guardPid = try #require(g.guardProcess?.processIdentifier)
            try await stopThenKillI3lock(g, parent: guardPid, of: "the guard's", log: { g.guardLog },
                                         dropped: { "to the guard's locker (pid \($0)) dropped" },
                                         figure: "6b. the guard's i3lock stopped, then its window killed")
        }
    }

    @Test("10. the agent's own locker (the real i3lock, the policy's) stopped and its window xkilled, as the user: the stop is dropped, and the agent's next i3lock holds the keyboard within agent-grace + 2 s")
    func agentLockerStoppedWindowKilled() async throws {
        try await GuardSession.with(locker: "i3lock -n -c ff0000") { g in
            let agent = try await g.startVerifiedAgent()
            let lock = try await g.runAsUser(agentBinary, ["lock"])
            #expect(lock.exit == .exited(0), "xidlelock lock as the user: \(lock.stderr)")
            try await stopThenKillI3lock(g, parent: agent.pid, of: "the agent's", log: { agent.log },
                                         dropped: { "(pid \($0)) was sent a stop signal" },
                                         figure: "10. the agent's i3lock stopped, then its window killed")
        }
    }

    // MARK: 7. The user's debugger on the guard's locker

    @Test("7. the user's debugger on the guard's locker, which the restarted agent adopted, past the shortest lock (`gdb -p PID -batch -ex 'call (void)exit(0)'`): the locker keeps running; or, if it exited, the session is covered again within agent-grace + 2 s and root's doctor is never met meanwhile")
    func debuggerOnGuardLocker() async throws {
        try await GuardSession.with { g in
            let locker = try await guardLocker(g, figure: "7. kill -9 before the attack")
            // The user's unit restarts the agent: it adopts the guard's locker (GuardTests a).
            let agent = try g.startAgent()
            try await g.wait("the new agent to adopt the guard's locker \(locker)") {
                guard agent.process.isRunning else { throw AgentExited(waitingFor: "adoption", exit: Exit(agent.process), log: agent.log) }
                let status = try await g.userStatus()
                return status?["state"] as? String == "locked" && status?["locker_pid"] as? Int == Int(locker)
            }
            // Past every shortest lock (its exit 0 then counts as the unlock).
            try await g.wait("the locker to have held the screen 3.5 s") { (ProcInfo.age(locker) ?? .zero) >= .milliseconds(3500) }
            let debugged = try await g.runAsUser("gdb", ["-nx", "-p", "\(locker)", "-batch", "-ex", "call (void)exit(0)"])
            let attackEnd = ContinuousClock.now
            let said = (debugged.stdout + debugged.stderr).split(separator: "\n").filter { !$0.isEmpty }.suffix(2).joined(separator: " | ")
            if isAlive(locker) {
                let state = ProcInfo.state(locker) ?? "gone"
                print("guard figure (7. gdb \(debugged.exit)): the locker \(locker) still runs (state \(state)); gdb: \(said)")
                #expect(state != "T" && state != "t", "the locker \(locker) was left stopped (state \(state)) by the user's debugger")
                #expect(g.lockerPids == [locker], "lockers recorded \(g.lockerPids)")
                return
            }
            let watch = try await watchCover(g, since: attackEnd, lockersBefore: 1)
            let agentSays = (try await g.userStatus())?["state"] as? String ?? "no answer"
            print(figure("7. gdb \(debugged.exit): the locker \(locker) exited, the agent says \(agentSays); gdb: \(said)", watch))
            expectCovered(watch, g, what: "the user's `gdb -p \(locker) -ex 'call (void)exit(0)'` ended the adopted guard's locker (the agent says \(agentSays); gdb: \(said))")
        }
    }

    // MARK: 11. XGrabServer while the lock comes due

    @Test("11. XGrabServer held by a client of the user's while the agent's lock comes due (max-lock-after 6s, --lock-after 6s): the session is logged off or covered within due + agent-grace + 2 s, and root's doctor answers within 5 s and is never met while the grab holds")
    func serverGrabbedAtLockTime() async throws {
        try await GuardSession.with(maxLockAfter: "6s") { g in
            let xclient = try await compileXClient(g)
            let agent = try await g.startVerifiedAgent(lockAfter: "6s")
            let status = try #require(try await g.userStatus(), "no status from the agent")
            let asked = ContinuousClock.now
            let dueIn = try #require(status["next_stage_in_ms"] as? Int, "no next_stage_in_ms in \(status)")
            #expect(status["next_stage"] as? String == "lock", "the next stage is \(status["next_stage"] ?? "none"), not the lock")
            let due = asked + .milliseconds(dueIn)
            let (program, arguments) = g.asUser(guardUserID, xclient, ["grab-server"])
            let grab = try g.s.startBackground(program, arguments, output: "grab.out", environment: g.userEnvironment(g.user))
            try await g.wait("the user's XGrabServer", extra: { g.s.contents("grab.out") }) {
                guard grab.isRunning else { throw CommandFailed(command: ["xclient", "grab-server"], result: CommandResult(exit: Exit(grab), stdout: g.s.contents("grab.out"), stderr: "")) }
                return g.s.contents("grab.out").contains("grabbed")
            }
            let grabbedBeforeDue = due - ContinuousClock.now
            try #require(grabbedBeforeDue > .zero, "the lock came due \((Duration.zero - grabbedBeforeDue).milliseconds) ms before the grab: the test did not test the grab")
            let watch = try await watchCover(g, since: due, lockersBefore: 0)
            let stillGrabbed = grab.isRunning
            kill(grab.processIdentifier, SIGKILL)
            _ = try await grab.waitForExit("the grabbing client")
            let lockedAfterGrab = try await g.s.happens(within: .seconds(3)) { !g.lockerPids.isEmpty }
            print(figure("11. XGrabServer from \(grabbedBeforeDue.milliseconds) ms before the lock was due, \(stillGrabbed ? "held" : "lost") to the window's end; a locker \(lockedAfterGrab ? "came" : "did not come") within 3 s of the grab's end", watch))
            expectCovered(watch, g, what: "the lock came due while a client of the user's held XGrabServer (agent \(agent.pid))")
        }
    }

    // MARK: 12. LockedHint

    @Test("12. SetLockedHint(true) on the user's own unlocked session, through the system bus as the user: the session's LockedHint reads false again within 2 s")
    func forgedLockedHint() async throws {
        try await GuardSession.with { g in
            let agent = try await g.startVerifiedAgent()
            func hint() async throws -> String {
                let result = try await g.s.run(systemPython, [busScript, "locked-hint"], environment: ["XDG_SESSION_ID": guardSessionID])
                guard result.exit == .exited(0) else { throw CommandFailed(command: ["bus.py", "locked-hint"], result: result) }
                return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            let before = try await hint()
            #expect(before == "false", "LockedHint before the attack: \(before)")
            let set = try await g.runAsUser(systemPython, [busScript, "set-locked-hint", "true"])
            let setAt = ContinuousClock.now
            try #require(set.exit == .exited(0), "the user's SetLockedHint(true): \(set.stderr)")
            let calls = try await g.s.run(systemPython, [busScript, "locked-hint-calls"], environment: ["XDG_SESSION_ID": guardSessionID])
            var readings: [String] = []
            var correctedAfter: Duration?
            while ContinuousClock.now < setAt + .seconds(2) {
                let value = try await hint()
                readings.append(value)
                if value == "false" {
                    correctedAfter = ContinuousClock.now - setAt
                    break
                }
                try await Task.sleep(for: .milliseconds(25))
            }
            print("guard figure (12. SetLockedHint(true) as the user): " + (correctedAfter.map { "false again \($0.milliseconds) ms after" } ?? "still \(readings.last ?? "?") 2 s after")
                  + " (\(readings.count) readings; SetLockedHint calls \(calls.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))")
            #expect(correctedAfter != nil, "the session's LockedHint still reads \(readings.last ?? "?") 2 s after the user's SetLockedHint(true), with the screen unlocked (agent \(agent.pid))\n\(g.logs)")
        }
    }
}
