import Foundation
import Testing

/// The desktop's buses with real components: a private session bus, a second dbus-daemon
/// as the system bus with python3-dbusmock's logind template on it, clients in other
/// processes (Harness/bus.py), real lockers (TestLocker, i3lock).
extension Sandbox {
    /// `xidlelock events --json` in the background, its lines into `events`; returns once
    /// it is connected.
    func startEvents() async throws -> Process {
        let events = try startBackground(agentBinary, ["events", "--json", "--socket", socket], output: "events")
        try await waitUntil("the events client to connect") {
            let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(events.processIdentifier)/fd")) ?? []
            return fds.count >= 4
        }
        return events
    }

    /// The kinds of the events received so far.
    func eventKinds() -> [String] {
        lines("events").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["event"] as? String
        }
    }

    func events(_ kind: String) -> [[String: Any]] {
        lines("events").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }.filter { $0["event"] as? String == kind }
    }

    /// Starts an agent that answers on this test's socket and is disabled before its
    /// (short) lock time, so that the test can set up a hold however loaded the machine is.
    func startDisabledBusAgent(_ arguments: [String]) async throws -> AgentProcess {
        try await x("xdotool", "key", "shift")
        let agent = try await startControlledAgent(arguments)
        #expect(try await client("disable").exit == .exited(0))
        guard !exists("lockers.pids"), !exists("lock.idle") else {
            throw WaitTimedOut(what: "the agent to answer before its lock time (the machine is too loaded)", timeout: .zero, context: agent.log)
        }
        return agent
    }

    func desktopStatus() async throws -> [String: Any] {
        try await status()["desktop"] as? [String: Any] ?? [:]
    }

    /// Enables a disabled agent, waits for the server's idle time to pass the lock time
    /// by 1.5 s, and expects no lock meanwhile (a hold keeps it off).
    func enableAndExpectHeld(lockAfter: Int, agent: AgentProcess) async throws {
        #expect(try await client("enable").exit == .exited(0))
        try await waitUntil("the server idle to pass the lock time by 1.5 s", every: .milliseconds(200)) {
            try await serverIdle() >= lockAfter + 1500
        }
        #expect(!exists("lockers.pids"), "locked while inhibited\n\(agent.log)")
    }

    func inhibitors() async throws -> [[String: Any]] {
        try await status()["inhibitors"] as? [[String: Any]] ?? []
    }
}

/// What `bus.py sleep-cycle` measured, in ms after PrepareForSleep(true).
struct SleepCycle {
    var lockerUp: Int?
    var released: Int?
    var upAtRelease: Bool
    var keyboardGrabbedAtRelease: Bool?

    init(_ json: String) throws {
        guard let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else {
            throw CommandFailed(command: ["bus.py", "sleep-cycle"], result: CommandResult(exit: .exited(0), stdout: json, stderr: "not JSON"))
        }
        lockerUp = (object["locker_up_ms"] as? Double).map { Int($0.rounded()) }
        released = (object["released_ms"] as? Double).map { Int($0.rounded()) }
        upAtRelease = object["up_at_release"] as? Bool ?? false
        keyboardGrabbedAtRelease = object["keyboard_grabbed_at_release"] as? Bool
    }
}

/// logind's InhibitDelayMaxSec by default, and what the agent keeps for itself.
let logindDelay = 5000
let agentDelay = logindDelay - 500

enum SleepLocker: String, CaseIterable, CustomTestStringConvertible {
    case testLocker = "TestLocker"
    case i3lock = "i3lock -n"
    var testDescription: String { rawValue }

    var command: String {
        switch self {
        case .testLocker: Script.grabbingLocker()
        case .i3lock: "echo $$ > locker.pid; exec i3lock -n"
        }
    }

    /// How bus.py sees the locker come up: its pid in lockers.pids, or (i3lock) its window.
    var upArguments: [String] {
        switch self {
        case .testLocker: ["--pids", "lockers.pids"]
        case .i3lock: ["--window"]
        }
    }
}

/// One desktop test at a time: each runs an X server, two dbus-daemons and logind's mock
/// (python), which on a 2-core machine would otherwise crowd the timing tests that run
/// beside them.
@Suite(.serialized) struct DesktopTests {}

extension DesktopTests {
    @Suite struct Sleep {
        @Test("PrepareForSleep locks first and lets the system sleep only once the locker holds the keyboard; resume takes a new delay",
              arguments: SleepLocker.allCases)
        func lockBeforeSleep(locker: SleepLocker) async throws {
            try await Sandbox.with(buses: true) { s in
                let agent = try await s.startControlledAgent([
                    "--lock-after", "1h", "--locker", locker.command,
                    "--before-sleep", "echo $XIDLELOCK_EVENT >> hooks.log",
                    "--after-resume", "echo $XIDLELOCK_EVENT gap=$XIDLELOCK_SUSPEND_GAP_MS >> hooks.log",
                ])
                _ = try await s.startEvents()
                #expect(try await s.sleepInhibitors().count == 1, "\(agent.log)")
                #expect(try await s.desktopStatus()["sleep_delay_held"] as? Bool == true)

                let cycle = try SleepCycle(await s.bus(["sleep-cycle", "--timeout", "15"] + locker.upArguments))
                print("desktop figure (\(locker.rawValue)): PrepareForSleep to locker up \(cycle.lockerUp.map(String.init) ?? "never") ms, to delay released \(cycle.released.map(String.init) ?? "never") ms")
                let released = try #require(cycle.released, "the sleep delay was never released\n\(agent.log)")
                #expect(cycle.lockerUp != nil, "the locker never came up\n\(agent.log)")
                #expect(cycle.upAtRelease, "the delay was released before the locker was up\n\(agent.log)")
                #expect(cycle.keyboardGrabbedAtRelease == true, "the keyboard was free when the delay was released\n\(agent.log)")
                #expect(released < agentDelay, "released only by the bounded wait\n\(agent.log)")
                #expect(agent.log.contains("the system is going to sleep: locking first"), "\(agent.log)")
                #expect(!agent.log.contains("did not cover the screen"), "\(agent.log)")
                #expect(try await s.waitForLines("hooks.log").first == "before-sleep")

                try await s.bus("emit-sleep", "false")
                try await s.waitUntil("a new sleep delay inhibitor") { try await s.sleepInhibitors().count == 1 }
                let hooks = try await s.waitForLines("hooks.log", count: 2)
                #expect(hooks[1].hasPrefix("after-resume gap="), "\(hooks)")
                try await s.waitUntil("the resumed event") { s.eventKinds().contains("resumed") }
                let kinds = s.eventKinds()
                #expect(kinds == ["locking", "locked", "sleeping", "resumed"], "\(kinds)")
                #expect(s.events("sleeping").first?["covered"] as? Bool == true)
                #expect(try await s.status()["state"] as? String == "locked")
                if locker == .testLocker {
                    s.touch("unlock")
                    try await agent.waitForLog(containing: "unlocked after")
                }
            }
        }

        @Test("the sleep delay reaches a locker that knows the protocol, only while the sleep is pending, at XSS_SLEEP_LOCK_FD; never others",
              arguments: [true, false])
        func sleepLockHandOff(transfer: Bool) async throws {
            // The locker writes what it got (checked with the builtin `[`, before any
            // command substitution opens a pipe at fd 3), closes the delay (as xsecurelock
            // does once it covers the screen) and holds the screen.
            let locker = """
                if [ -e /proc/self/fd/3 ]; then o=yes; else o=no; fi; \
                echo "fd=${XSS_SLEEP_LOCK_FD:-none} open=$o" >> handoff.log; \
                exec 3>&-; \(Script.grabbingLocker())
                """
            try await Sandbox.with(buses: true) { s in
                let agent = try await s.startControlledAgent(["--lock-after", "1h", "--locker", locker]
                                                             + (transfer ? ["--transfer-sleep-lock"] : []))
                let cycle = try SleepCycle(await s.bus(["sleep-cycle", "--timeout", "15", "--pids", "lockers.pids"]))
                #expect(cycle.released != nil, "\(agent.log)")
                let got = try await s.waitForLines("handoff.log")
                #expect(got == [transfer ? "fd=3 open=yes" : "fd=none open=no"], "\(got)")
                // Not in a sleep: a lock on request never gets the delay.
                s.touch("unlock")
                try await agent.waitForLog(containing: "unlocked after")
                try FileManager.default.removeItem(atPath: s.path("unlock"))
                #expect(try await s.client("lock").exit == .exited(0))
                let second = try await s.waitForLines("handoff.log", count: 2)
                #expect(second.last == "fd=none open=no", "\(second)")
                s.touch("unlock")
            }
        }

        @Test("a locker that never covers the screen: the delay is released at the bounded wait, with an error")
        func lockerThatNeverCovers() async throws {
            try await Sandbox.with(buses: true) { s in
                let agent = try await s.startControlledAgent(["--lock-after", "1h", "--locker", Script.locker])
                _ = try await s.startEvents()
                let cycle = try SleepCycle(await s.bus("sleep-cycle", "--pids", "locker.pid", "--timeout", "15"))
                print("desktop figure (a locker that never grabs): PrepareForSleep to locker up \(cycle.lockerUp.map(String.init) ?? "never") ms, to delay released \(cycle.released.map(String.init) ?? "never") ms")
                let released = try #require(cycle.released, "the sleep delay was never released\n\(agent.log)")
                #expect(released >= agentDelay - 100, "released \(released) ms after PrepareForSleep, before the bounded wait\n\(agent.log)")
                #expect(released < logindDelay, "released \(released) ms after PrepareForSleep: logind stopped waiting first\n\(agent.log)")
                #expect(cycle.keyboardGrabbedAtRelease == false)
                try await agent.waitForLog(containing: "did not cover the screen before the system had to sleep")
                #expect(agent.log.contains("xidlelock: error: the locker did not cover the screen"), "\(agent.log)")
                try await s.waitUntil("the sleeping event") { !s.events("sleeping").isEmpty }
                #expect(s.events("sleeping").first?["covered"] as? Bool == false)
            }
        }

        @Test("--no-lock-before-sleep takes no sleep delay and starts no locker before sleep")
        func noLockBeforeSleep() async throws {
            try await Sandbox.with(buses: true) { s in
                let agent = try await s.startControlledAgent(["--lock-after", "1h", "--locker", Script.grabbingLocker(),
                                                              "--no-lock-before-sleep"])
                _ = try await s.startEvents()
                #expect(agent.log.contains("logind session:"), "\(agent.log)")
                #expect(try await s.sleepInhibitors().isEmpty, "\(agent.log)")
                #expect(try await s.desktopStatus()["sleep_delay_held"] as? Bool == false)
                try await s.bus("emit-sleep", "true")
                try await agent.waitForLog(containing: "not locking first: --no-lock-before-sleep")
                try await s.bus("emit-sleep", "false")
                try await s.waitUntil("the resumed event") { s.eventKinds().contains("resumed") }
                #expect(try await s.sleepInhibitors().isEmpty, "\(agent.log)")
                #expect(!s.exists("lockers.pids"), "a locker started\n\(agent.log)")
                #expect(s.eventKinds() == ["sleeping", "resumed"], "\(s.eventKinds())")
            }
        }
    }
}

extension DesktopTests {
    @Suite struct Session {
        @Test("the session's Lock signal locks now; its Unlock is not honoured")
        func sessionLockSignal() async throws {
            try await Sandbox.with(buses: true) { s in
                let agent = try await s.startControlledAgent(["--lock-after", "1h", "--locker", Script.grabbingLocker()])
                try await s.bus("session", "Lock")
                // "locked" once the locker holds the keyboard, which a loaded machine can delay.
                let locker = try await s.waitForCoveringLocker()
                #expect(agent.log.contains("lock requested by logind"), "\(agent.log)")
                try await s.bus("session", "Unlock")
                try await agent.waitForLog(containing: "not honoured")
                #expect(isAlive(locker), "the locker was stopped\n\(agent.log)")
                #expect(!agent.log.contains("unlocked after"), "\(agent.log)")
                #expect(try await s.status()["state"] as? String == "locked")
                s.touch("unlock")
                try await agent.waitForLog(containing: "unlocked after")
            }
        }

        @Test("LockedHint is true once the locker holds the screen, false after the unlock")
        func lockedHint() async throws {
            try await Sandbox.with(buses: true) { s in
                let agent = try await s.startControlledAgent(["--lock-after", "1h", "--locker", Script.grabbingLocker()])
                #expect(try await s.bus("locked-hint") == "false")
                #expect(try await s.client("lock").exit == .exited(0))
                var lockerUpWhenHintSeen = false
                try await s.waitUntil("LockedHint true") {
                    let hint = try await s.bus("locked-hint") == "true"
                    if hint { lockerUpWhenHintSeen = s.exists("lockers.pids") && !s.lines("lockers.pids").isEmpty }
                    return hint
                }
                #expect(lockerUpWhenHintSeen, "LockedHint was set before the locker held the keyboard\n\(agent.log)")
                s.touch("unlock")
                try await s.waitUntil("LockedHint false") { try await s.bus("locked-hint") == "false" }
                #expect(agent.log.contains("unlocked after"), "\(agent.log)")
            }
        }

        @Test("time with another session in front is idle time: the lock comes on time while it is away; the switch back is no activity")
        func inactiveSession() async throws {
            let lockAfter = 1000
            let locker = "echo $XIDLELOCK_IDLE_MS > lock.idle; \(Script.grabbingLocker())"
            try await Sandbox.with(buses: true) { s in
                // Not active from the start: the agent reads Active when it connects.
                try await s.bus("session-active", "false")
                try await s.x("xdotool", "key", "shift")
                let agent = try await s.startControlledAgent(["--lock-after", "\(lockAfter)ms", "--locker", locker])
                // Read once the bus answers, which the agent no longer waits for at start.
                try await agent.waitForLog(containing: "another session is in front: the idle time goes on")
                let idleAtLock = try await s.waitForNumber(in: "lock.idle")
                #expect(idleAtLock >= lockAfter + earliestLock && idleAtLock <= lockAfter + latestLock,
                        "XIDLELOCK_IDLE_MS=\(idleAtLock)\n\(agent.log)")
                // "locked" once the locker holds the keyboard, which a loaded machine can delay.
                _ = try await s.waitForCoveringLocker()
                // Back to the front: still locked (the locker is the only way out).
                try await s.bus("session-active", "true")
                try await agent.waitForLog(containing: "this session is in front again")
                #expect(try await s.status()["state"] as? String == "locked")
                s.touch("unlock")
            }
        }

        @Test("--lock-on-switch locks the moment another session comes to the front")
        func lockOnSwitch() async throws {
            try await Sandbox.with(buses: true) { s in
                try await s.x("xdotool", "key", "shift")
                let agent = try await s.startControlledAgent(["--lock-after", "1h", "--lock-on-switch", "--locker", Script.grabbingLocker()])
                try await s.bus("session-active", "false")
                _ = try await s.waitForLines("lockers.pids")
                #expect(agent.log.contains("locking now (--lock-on-switch)"), "\(agent.log)")
                s.touch("unlock")
            }
        }
    }
}

extension DesktopTests {
    @Suite struct ScreenSaver {
        static let paths = ["/org/freedesktop/ScreenSaver", "/ScreenSaver"]

        @Test("Inhibit from another process holds the lock off; UnInhibit, or the caller leaving the bus, ends it",
              arguments: [(paths[0], paths[1]), (paths[1], paths[0])])
        func inhibit(uninhibitPath: String, exitPath: String) async throws {
            // Long enough for the test to set up the hold of a disabled agent on a loaded machine.
            let lockAfter = 4000
            try await Sandbox.with(buses: true) { s in
                let agent = try await s.startDisabledBusAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.grabbingLocker()])
                let first = try s.startBusHelper(["ss-inhibit", uninhibitPath, "app-one", "reason one", "--until", "release1", "--uninhibit"],
                                                 output: "holder1.out")
                let second = try s.startBusHelper(["ss-inhibit", exitPath, "app-two", "reason two", "--until", "release2"],
                                                  output: "holder2.out")
                let cookie1 = try await s.waitForNumber(in: "holder1.out")
                let cookie2 = try await s.waitForNumber(in: "holder2.out")
                #expect(cookie1 != 0 && cookie2 != 0 && cookie1 != cookie2, "cookies \(cookie1), \(cookie2)")
                let held = try await s.inhibitors()
                #expect(held.count == 2, "\(held)")
                for (app, reason, pid) in [("app-one", "reason one", first.processIdentifier),
                                           ("app-two", "reason two", second.processIdentifier)] {
                    // What the caller says of itself is its `why`; `who` is what the bus vouches for.
                    let inhibitor = held.first { ($0["why"] as? String ?? "").hasPrefix(app + ": ") }
                    #expect(inhibitor?["source"] as? String == "dbus", "\(held)")
                    let who = inhibitor?["who"] as? String ?? ""
                    #expect(who.hasPrefix("pid \(pid) (python3), :"), "\(held)")
                    #expect(inhibitor?["why"] as? String == "\(app): \(reason)", "\(held)")
                }
                try await s.enableAndExpectHeld(lockAfter: lockAfter, agent: agent)
                #expect(try await s.status()["state"] as? String == "inhibited")

                s.touch("release1")
                #expect(try await first.waitForExit("the first holder") == .exited(0))
                #expect(s.contents("holder1.out").contains("uninhibited"))
                try await s.waitUntil("one inhibitor left") { try await s.inhibitors().count == 1 }
                #expect(!s.exists("lockers.pids"), "locked while still inhibited\n\(agent.log)")

                s.touch("release2")
                #expect(try await second.waitForExit("the second holder") == .exited(0))
                try await agent.waitForLog(containing: "inhibitor of pid \(second.processIdentifier) (python3)")
                _ = try await s.waitForLines("lockers.pids")
                #expect(try await s.inhibitors().isEmpty)
                s.touch("unlock")
            }
        }

        @Test("GetActive and ActiveChanged follow the lock; SimulateUserActivity resets the idle time; Lock locks now")
        func calls() async throws {
            try await Sandbox.with(buses: true) { s in
                let agent = try await s.startControlledAgent(["--lock-after", "1h", "--locker", Script.grabbingLocker()])
                _ = try s.startBusHelper(["watch-active"], output: "active.out")
                _ = try await s.waitForLines("active.out")
                for path in DesktopTests.ScreenSaver.paths {
                    #expect(try await s.bus("ss", path, "GetActive") == "false")
                }
                try await s.waitUntil("a second and a half of idleness", every: .milliseconds(100)) {
                    try await s.serverIdle() >= 1500
                }
                #expect((try await s.status()["idle_ms"] as? Int ?? 0) >= 1000)
                try await s.bus("ss", DesktopTests.ScreenSaver.paths[0], "SimulateUserActivity")
                let idle = try #require(try await s.status()["idle_ms"] as? Int)
                #expect(idle < 1000, "idle \(idle) ms after SimulateUserActivity\n\(agent.log)")
                #expect(Int(try await s.bus("ss", DesktopTests.ScreenSaver.paths[1], "GetSessionIdleTime")) ?? -1 < 2)

                try await s.bus("ss", DesktopTests.ScreenSaver.paths[1], "Lock")
                _ = try await s.waitForLines("lockers.pids")
                #expect(agent.log.contains("lock requested by org.freedesktop.ScreenSaver.Lock"), "\(agent.log)")
                try await agent.waitForLog(containing: "locked: the locker holds the keyboard")
                for path in DesktopTests.ScreenSaver.paths {
                    #expect(try await s.bus("ss", path, "GetActive") == "true")
                }
                #expect(Int(try await s.bus("ss", DesktopTests.ScreenSaver.paths[0], "GetActiveTime")) != nil)
                _ = try await s.waitForLines("active.out", count: 3)
                s.touch("unlock")
                try await agent.waitForLog(containing: "unlocked after")
                for path in DesktopTests.ScreenSaver.paths {
                    #expect(try await s.bus("ss", path, "GetActive") == "false")
                }
                let signals = try await s.waitForLines("active.out", count: 5)
                #expect(Set(signals[1...2]) == Set(DesktopTests.ScreenSaver.paths.map { "ActiveChanged true \($0)" }), "\(signals)")
                #expect(Set(signals[3...4]) == Set(DesktopTests.ScreenSaver.paths.map { "ActiveChanged false \($0)" }), "\(signals)")
            }
        }

        @Test("with --secure, Inhibit is refused with a D-Bus error and holds nothing")
        func secureRefusesInhibit() async throws {
            try await Sandbox.with(buses: true) { s in
                let agent = try await s.startControlledAgent(["--lock-after", "1h", "--locker", Script.grabbingLocker(), "--secure"])
                for path in DesktopTests.ScreenSaver.paths {
                    let result = try await s.busResult("ss-inhibit", path, "app", "reason", "--until", "never")
                    #expect(result.exit == .exited(1), "\(path): \(result)")
                    #expect(result.stderr.contains("org.freedesktop.DBus.Error.AccessDenied"), "\(path): \(result.stderr)")
                }
                #expect(try await s.inhibitors().isEmpty)
                #expect(agent.count(of: "not honoured: a hold of pid ") == 2, "\(agent.log)")
            }
        }

        @Test("when another program owns org.freedesktop.ScreenSaver, the agent says which and goes on locking")
        func nameOwnedByAnother() async throws {
            try await Sandbox.with(buses: true) { s in
                let owner = try s.startBusHelper(["own-screensaver", "--until", "release"], output: "owner.out")
                _ = try await s.waitForLines("owner.out")
                try await s.x("xdotool", "key", "shift")
                let agent = try s.startAgent(["--lock-after", "1000ms", "--locker", Script.locker, "--socket", s.socket])
                let idle = try await s.waitForNumber(in: "lock.idle")
                await expectLockOnTime(idleAtLock: idle, lockAfter: 1000)
                #expect(agent.log.contains("org.freedesktop.ScreenSaver is owned by another program (pid \(owner.processIdentifier), python3)"),
                        "\(agent.log)")
                #expect(try await s.desktopStatus()["screensaver_service"] as? Bool == false)
                // Doctor says whose it is and what is then not seen; the other services are served.
                let doctor = try await s.doctor()
                #expect(doctor.stdout.contains("org.freedesktop.ScreenSaver: owned by another program (pid \(owner.processIdentifier), python3): its inhibitors are not seen by xidlelock"),
                        "\(doctor.stdout)")
                #expect(doctor.stdout.contains("serving org.freedesktop.PowerManagement, org.freedesktop.PowerManagement.Inhibit"), "\(doctor.stdout)")
            }
        }
    }
}

extension DesktopTests {
    @Suite struct LogindInhibitors {
        @Test("a logind idle inhibitor of another user is shown, not honoured, by default; honoured with --logind-inhibitors all",
              arguments: ["own", "all"])
        func idleInhibitor(policy: String) async throws {
            // The mock records every inhibitor with uid 1000.
            let foreign = getuid() != 1000
            let honoured = policy == "all" || !foreign
            let lockAfter = 1000
            try await Sandbox.with(buses: true) { s in
                // Held before the agent starts: it lists logind's inhibitors when it connects,
                // before any stage can be due; the change signal is the way out, below.
                let holder = try s.startBusHelper(["idle-inhibit", "raid-check", "checking the array", "--until", "release"], output: "idle.out")
                _ = try await s.waitForLines("idle.out")
                try await s.bus("block-inhibited", "idle")
                try await s.x("xdotool", "key", "shift")
                let locker = "xprintidle > lock.idle; \(Script.grabbingLocker())"
                let agent = try await s.startControlledAgent(["--lock-after", "\(lockAfter)ms", "--locker", locker]
                                                             + (policy == "own" ? [] : ["--logind-inhibitors", policy]))
                if honoured {
                    try await s.waitUntil("the logind inhibitor in status") {
                        try await s.inhibitors().contains { $0["source"] as? String == "logind" }
                    }
                    let inhibitor = try #require(try await s.inhibitors().first)
                    #expect((inhibitor["who"] as? String ?? "").contains("raid-check"), "\(inhibitor)")
                    #expect(inhibitor["why"] as? String == "checking the array")
                } else {
                    try await s.waitUntil("the refused inhibitor in status") {
                        !(try await s.status()["refused_holds"] as? [Any] ?? []).isEmpty
                    }
                    let refused = try #require((try await s.status()["refused_holds"] as? [[String: Any]])?.first)
                    #expect(refused["source"] as? String == "logind")
                    #expect(refused["who"] as? String == "raid-check (pid 123456, uid 1000, logind)")
                    #expect(refused["why"] as? String == "checking the array")
                    #expect(refused["reason"] as? String == "it belongs to another user (uid 1000); --logind-inhibitors own")
                    #expect(try await s.inhibitors().isEmpty)
                    #expect(agent.log.contains("xidlelock: warning: not honoured: a hold of raid-check (pid 123456, uid 1000, logind) (logind) for checking the array: it belongs to another user (uid 1000); --logind-inhibitors own"),
                            "\(agent.log)")
                }
                if !honoured {
                    let idle = try await s.waitForNumber(in: "lock.idle")
                    await expectLockOnTime(idleAtLock: idle, lockAfter: lockAfter)
                    s.touch("unlock")
                    return
                }
                try await s.waitUntil("the server idle to pass the lock time by 1.5 s", every: .milliseconds(200)) {
                    try await s.serverIdle() >= lockAfter + 1500
                }
                #expect(!s.exists("lock.idle"), "locked while logind's idle inhibitor was held\n\(agent.log)")
                s.touch("release")
                #expect(try await holder.waitForExit("the idle inhibitor's holder") == .exited(0))
                try await s.bus("block-inhibited", "")
                _ = try await s.waitForLines("lockers.pids")
                #expect(try await s.inhibitors().isEmpty)
                s.touch("unlock")
            }
        }
    }
}

extension DesktopTests {
    @Suite struct BusLoss {
        @Test("without any bus the agent locks on time and says so once per bus")
        func noBuses() async throws {
            try await Sandbox.with { s in
                try await s.x("xdotool", "key", "shift")
                let agent = try s.startAgent(["--lock-after", "1000ms", "--locker", Script.locker, "--socket", s.socket], environment: [
                    "DBUS_SESSION_BUS_ADDRESS": "unix:path=\(s.path("no-session.bus"))",
                    "DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(s.path("no-system.bus"))",
                    "XDG_SESSION_ID": testSessionID,
                ])
                let idle = try await s.waitForNumber(in: "lock.idle")
                await expectLockOnTime(idleAtLock: idle, lockAfter: 1000)
                // Past the first reconnection attempt (5 s after the start).
                try await s.waitUntil("the server idle to pass 6.5 s", every: .milliseconds(250)) {
                    try await s.serverIdle() >= 6500
                }
                #expect(agent.count(of: "no session bus") == 1, "\(agent.log)")
                #expect(agent.count(of: "no system bus") == 1, "\(agent.log)")
                #expect(agent.count(of: "warning") == 2, "\(agent.log)")
            }
        }

        @Test("a bus that goes away is logged once; the agent goes on locking and reconnects",
              arguments: ["session", "system"])
        func busGoesAway(which: String) async throws {
            try await Sandbox.with(buses: true) { s in
                try await s.x("xdotool", "key", "shift")
                let locker = "xprintidle > lock.idle; \(Script.grabbingLocker())"
                // Connected to the bus before it goes (the agent connects without waiting: a
                // bus that goes away in the middle of the set-up gets a line for each call).
                let agent = try await s.startControlledAgent(["--lock-after", "1500ms", "--locker", locker])
                let connected = which == "session" ? "serving org.freedesktop.ScreenSaver" : "logind session:"
                try await agent.waitForLog(containing: connected)
                let buses = try #require(s.buses)
                try await (which == "session" ? buses.session : buses.system).crash()
                try await agent.waitForLog(containing: "lost the \(which) bus")
                let idle = try await s.waitForNumber(in: "lock.idle")
                await expectLockOnTime(idleAtLock: idle, lockAfter: 1500)
                if which == "session" {
                    try await buses.session.restart()
                } else {
                    try await buses.restartSystem()
                }
                try await agent.waitForLog(containing: connected, count: 2)
                if which == "session" {
                    // Served again, and it knows the screen is locked.
                    #expect(try await s.bus("ss", "/ScreenSaver", "GetActive") == "true", "\(agent.log)")
                } else {
                    try await s.waitUntil("the sleep delay taken again") { try await s.sleepInhibitors().count == 1 }
                }
                #expect(agent.count(of: "lost the \(which) bus") == 1, "\(agent.log)")
                #expect(agent.count(of: "warning") == 1, "one line for one loss\n\(agent.log)")
                #expect(try await s.desktopStatus()["\(which)_bus"] as? Bool == true)
            }
        }
    }
}

extension DesktopTests.BusLoss {
    enum BusHold: String, CaseIterable, CustomTestStringConvertible {
        case screenSaverInhibitor = "a ScreenSaver inhibitor"
        case logindIdleInhibitor = "a logind idle inhibitor"
        var testDescription: String { rawValue }
    }

    @Test("a hold that came over a bus ends when that bus goes away: the lock comes (fail closed)",
          arguments: BusHold.allCases)
    func holdEndsWithItsBus(hold: BusHold) async throws {
        // Long enough for the test to set up the hold of a disabled agent on a loaded machine.
        let lockAfter = 4000
        try await Sandbox.with(buses: true) { s in
            let agent = try await s.startDisabledBusAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.grabbingLocker(),
                                                          "--logind-inhibitors", "all"])
            switch hold {
            case .screenSaverInhibitor:
                _ = try s.startBusHelper(["ss-inhibit", "/ScreenSaver", "player", "video", "--until", "release"], output: "holder.out")
                _ = try await s.waitForNumber(in: "holder.out")
                try await s.waitUntil("the inhibitor in status") { try await s.inhibitors().count == 1 }
            case .logindIdleInhibitor:
                _ = try s.startBusHelper(["idle-inhibit", "raid-check", "checking", "--until", "release"], output: "holder.out")
                _ = try await s.waitForLines("holder.out")
                try await s.bus("block-inhibited", "idle")
                try await s.waitUntil("the inhibitor in status") { try await s.inhibitors().count == 1 }
            }
            #expect(try await s.client("enable").exit == .exited(0))
            try await s.waitUntil("the server idle to pass the lock time by 1 s", every: .milliseconds(200)) {
                try await s.serverIdle() >= lockAfter + 1000
            }
            #expect(!s.exists("lockers.pids"), "locked while held\n\(agent.log)")
            let buses = try #require(s.buses)
            try await (hold == .screenSaverInhibitor ? buses.session : buses.system).crash()
            try await agent.waitForLog(containing: "lost the \(hold == .screenSaverInhibitor ? "session" : "system") bus")
            _ = try await s.waitForLines("lockers.pids")
            #expect(try await s.inhibitors().isEmpty, "\(agent.log)")
            #expect(agent.count(of: "warning") == 1, "one line for one loss\n\(agent.log)")
            s.touch("unlock")
        }
    }
}

extension DesktopTests {
    @Suite struct WakeUps {
        @Test("an idle agent connected to both buses does not wake up between deadlines")
        func idleWithBuses() async throws {
            try await Sandbox.with(buses: true) { s in
                try await s.x("xdotool", "key", "shift")
                let agent = try s.startAgent(["--lock-after", "1h", "--locker", "true", "--socket", s.socket])
                try await agent.waitForLog(containing: "logind session:")
                try await agent.waitForLog(containing: "serving org.freedesktop.ScreenSaver")
                try await s.waitUntil("the sleep delay inhibitor") { try await s.sleepInhibitors().count == 1 }
                let before = try #require(wakeUps(of: agent.pid))
                let idleAtStart = try await s.serverIdle()
                try await s.waitUntil("five more seconds of idleness", every: .milliseconds(250)) {
                    try await s.serverIdle() >= idleAtStart + 5000
                }
                let after = try #require(wakeUps(of: agent.pid))
                let span = try await s.serverIdle() - idleAtStart
                print("desktop figure: wake-ups with both buses connected: \(after - before) over \(span) ms idle")
                #expect(after - before == 0, "the agent woke \(after - before) times while nothing happened\n\(agent.log)")
            }
        }
    }
}

extension DesktopTests {
    @Suite struct PowerManagement {
        static let names = ["org.freedesktop.PowerManagement", "org.freedesktop.PowerManagement.Inhibit"]

        @Test("Inhibit through either name holds the lock off as source power-management; HasInhibit tells; UnInhibit, or the caller leaving the bus, ends it")
        func inhibit() async throws {
            let lockAfter = 4000
            try await Sandbox.with(buses: true) { s in
                let agent = try await s.startDisabledBusAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.grabbingLocker()])
                try await agent.waitForLog(containing: "serving org.freedesktop.PowerManagement.Inhibit on the session bus")
                #expect(try await s.bus("pm", Self.names[0], "HasInhibit") == "false")
                let first = try s.startBusHelper(["pm-inhibit", Self.names[0], "vlc", "Playing some media.", "--until", "release1", "--uninhibit"],
                                                 output: "holder1.out")
                let second = try s.startBusHelper(["pm-inhibit", Self.names[1], "", "Recording", "--until", "release2"],
                                                  output: "holder2.out")
                let cookie1 = try await s.waitForNumber(in: "holder1.out")
                let cookie2 = try await s.waitForNumber(in: "holder2.out")
                #expect(cookie1 != 0 && cookie2 != 0 && cookie1 != cookie2, "cookies \(cookie1), \(cookie2)")
                let held = try await s.inhibitors()
                #expect(held.count == 2 && held.allSatisfy { $0["source"] as? String == "power-management" }, "\(held)")
                #expect(held.contains { $0["why"] as? String == "vlc: Playing some media." }, "\(held)")
                // No app name: no empty field before the reason.
                #expect(held.contains { $0["why"] as? String == "Recording" }, "\(held)")
                #expect(held.contains { ($0["who"] as? String ?? "").hasPrefix("pid \(second.processIdentifier) (python3), :") }, "\(held)")
                for name in Self.names { #expect(try await s.bus("pm", name, "HasInhibit") == "true") }

                try await s.enableAndExpectHeld(lockAfter: lockAfter, agent: agent)

                s.touch("release1")
                #expect(try await first.waitForExit("the first holder") == .exited(0))
                #expect(s.contents("holder1.out").contains("uninhibited"))
                try await s.waitUntil("one inhibitor left") { try await s.inhibitors().count == 1 }
                #expect(!s.exists("lockers.pids"), "locked while still inhibited\n\(agent.log)")

                s.touch("release2")
                #expect(try await second.waitForExit("the second holder") == .exited(0))
                _ = try await s.waitForLines("lockers.pids")
                #expect(try await s.inhibitors().isEmpty)
                #expect(try await s.bus("pm", Self.names[1], "HasInhibit") == "false")
                s.touch("unlock")
            }
        }

        @Test("--no-power-management-service serves neither name; a policy without power-management refuses its holds")
        func offAndRefused() async throws {
            try await Sandbox.with(buses: true) { s in
                _ = try await s.startControlledAgent(["--lock-after", "1h", "--locker", Script.grabbingLocker(), "--no-power-management-service"])
                let status = try await s.status()
                #expect((status["desktop"] as? [String: Any])?["power_management_service"] as? Bool == false, "\(status)")
                #expect((try? await s.bus("pm", Self.names[0], "HasInhibit")) == nil)
            }
            try await Sandbox.with(buses: true) { s in
                try s.writePolicy("inhibit-from dbus\n")
                let agent = try await s.startControlledAgent(["--lock-after", "1h", "--locker", Script.grabbingLocker()])
                try await agent.waitForLog(containing: "serving org.freedesktop.PowerManagement.Inhibit on the session bus")
                let holder = try s.startBusHelper(["pm-inhibit", Self.names[0], "vlc", "film", "--until", "release"], output: "holder.out")
                #expect(try await holder.waitForExit("the refused holder") != .exited(0))
                #expect(s.contents("holder.out").contains("AccessDenied: refused: the policy's inhibit-from allows dbus"), "\(s.contents("holder.out"))")
                #expect(try await s.inhibitors().isEmpty)
            }
        }
    }
}

extension DesktopTests {
    /// `--session-manager-service`, with Debian's own gnome-session-inhibit as the client.
    @Suite struct SessionManager {
        static let inhibitor = "/usr/bin/gnome-session-inhibit"

        @Test("gnome-session-inhibit --inhibit idle holds the lock off while its command runs; suspend alone holds nothing",
              .enabled(if: FileManager.default.isExecutableFile(atPath: inhibitor), "gnome-session-bin is not installed"))
        func gnomeSessionInhibit() async throws {
            let lockAfter = 4000
            try await Sandbox.with(buses: true) { s in
                let agent = try await s.startDisabledBusAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.grabbingLocker(),
                                                               "--session-manager-service"])
                try await agent.waitForLog(containing: "serving org.gnome.SessionManager on the session bus")
                let waitForRelease = "while [ ! -e release ]; do sleep 0.05; done; echo released"
                let suspendOnly = try s.startBackground(Self.inhibitor, ["--inhibit", "suspend", "sh", "-c", "echo started; " + waitForRelease],
                                                        output: "suspend.out")
                let idle = try s.startBackground(Self.inhibitor, ["--inhibit", "idle", "--app-id", "org.example.Film", "--reason", "Playing",
                                                                  "sh", "-c", "echo started; " + waitForRelease], output: "idle.out")
                _ = try await s.waitForLines("suspend.out")
                _ = try await s.waitForLines("idle.out")
                try await s.waitUntil("the idle inhibitor in status") { try await s.inhibitors().count == 1 }
                let held = try await s.inhibitors()
                #expect(held.first?["source"] as? String == "session-manager", "\(held)")
                #expect(held.first?["why"] as? String == "org.example.Film: Playing", "\(held)")
                #expect((held.first?["who"] as? String ?? "").hasPrefix("pid \(idle.processIdentifier) (gnome-session-i"), "\(held)")

                try await s.enableAndExpectHeld(lockAfter: lockAfter, agent: agent)

                s.touch("release")
                #expect(try await idle.waitForExit("gnome-session-inhibit --inhibit idle") == .exited(0))
                #expect(try await suspendOnly.waitForExit("gnome-session-inhibit --inhibit suspend") == .exited(0))
                _ = try await s.waitForLines("lockers.pids")
                #expect(try await s.inhibitors().isEmpty)
                s.touch("unlock")
            }
        }

        @Test("without --session-manager-service the name is not owned (xdg-utils keeps its generic desktop)")
        func offByDefault() async throws {
            try await Sandbox.with(buses: true) { s in
                _ = try await s.startControlledAgent(["--lock-after", "1h", "--locker", Script.grabbingLocker()])
                let status = try await s.status()
                #expect((status["desktop"] as? [String: Any])?["session_manager_service"] as? Bool == false, "\(status)")
                let owner = try await s.run("/usr/bin/dbus-send", ["--session", "--print-reply", "--dest=org.freedesktop.DBus",
                                                                   "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner",
                                                                   "string:org.gnome.SessionManager"])
                #expect(owner.stdout.contains("boolean false"), "\(owner)")
            }
        }
    }
}
