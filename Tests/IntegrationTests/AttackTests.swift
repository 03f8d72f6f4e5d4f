import Foundation
import Glibc
import Testing

/// The doors of DESIGN.md's "Who can reach the agent", each opened by whoever can open
/// it: a second local user (`nobody`) on a system bus with Debian's own rules, a client
/// of the session bus, a client of the X server, the socket's user under the admin's
/// policy. None of them may keep the screen unlocked, make the lock late, or grow the
/// agent; the agent must lock at its time whatever they send.
///
/// Timing: lock times of 3–4 s; a lock is due at the lock time, within the harness's
/// usual window (`latestLock`), or as the test says under a flood; "no lock" is watched
/// over a bounded window. Each test prints an `attack figure:` line with what it measured.
/// Under `--secure` the harness's input (XTest) is not activity: there the last input
/// is the key before the agent's start, which the agent reads off the server's counter.
extension Sandbox {
    /// bus.py as another local user (`nobody`), as any user of the machine could run it:
    /// it reaches the system bus (the sandbox is open to it) and writes no file.
    func attackerCommand(_ arguments: [String]) -> (program: String, arguments: [String], environment: [String: String?]) {
        ("setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", systemPython, busScript] + arguments,
         ["HOME": "/nonexistent"])
    }

    /// Runs one forgery of `nobody` against `agent` (bus.py forge) to its end: once it
    /// returns, the bus has routed every forged signal to the agent.
    @discardableResult
    func forge(_ agent: AgentProcess, _ kind: String, _ extra: String...) async throws -> String {
        let (program, arguments, env) = attackerCommand(["forge", "\(agent.pid)", kind] + extra)
        let result = try await run(program, arguments, environment: env)
        guard result.exit == .exited(0), result.stdout.contains("sent ") else {
            throw CommandFailed(command: [program] + arguments, result: result)
        }
        return result.stdout
    }

    /// Checks that the system bus holds `nobody` to Debian's rules: it connects, and a
    /// method of logind's name that systemd's rules do not open to every user is refused
    /// (the mock's EmitSignal; logind's own Session.Lock is open on the bus, polkit
    /// decides, which the mock does not).
    func expectDebianPolicyForNobody() async throws {
        let (program, arguments, env) = attackerCommand(["emit-sleep", "true"])
        let result = try await run(program, arguments, environment: env)
        #expect(result.exit == .exited(1) && result.stderr.contains("org.freedesktop.DBus.Error.AccessDenied"),
                "nobody's method call to logind was not refused: \(result.exit) \(result.stderr)")
    }

    /// A forgery of `nobody` in the background (pulses, a flood); its output into `output`.
    func startForgery(_ agent: AgentProcess, _ kind: String, _ extra: [String], output: String) throws -> Process {
        let (program, arguments, env) = attackerCommand(["forge", "\(agent.pid)", kind] + extra)
        return try startBackground(program, arguments, output: output, environment: env)
    }

    /// A real signal of logind's after the forged ones: the session's Unlock, which the
    /// agent logs and does not honour. Once its line is in the log, the agent has read
    /// every message the bus routed to it before (a connection's messages arrive in order).
    func logindBarrier(_ agent: AgentProcess) async throws {
        let seen = agent.count(of: "asked to unlock the session")
        try await bus("session", "Unlock")
        try await agent.waitForLog(containing: "asked to unlock the session", count: seen + 1)
    }

    /// Waits for the locker's record of the server's idle time (`lock.idle`); nil when
    /// none came within `timeout` (the attack held the lock off).
    func waitForLock(within timeout: Duration, _ name: String = "lock.idle") async throws -> Int? {
        do {
            return try await waitForNumber(in: name, timeout: timeout)
        } catch is WaitTimedOut {
            return nil
        }
    }

    /// Watches `condition` for `window`: true if it ever held (a locker started, a hook ran).
    func happens(within window: Duration, _ condition: () -> Bool) async throws -> Bool {
        let end = ContinuousClock.now + window
        while ContinuousClock.now < end {
            if condition() { return true }
            try await Task.sleep(for: .milliseconds(25))
        }
        return condition()
    }

    /// A shell loop in the background that runs `command` every `every` for `seconds`,
    /// writing `started` to `output` after its first run.
    func startRepeating(_ command: String, every: String, seconds: Int, output: String) throws -> Process {
        try startBackground("/bin/sh", ["-c", """
            end=$(( $(date +%s) + \(seconds) )); n=0
            while [ "$(date +%s)" -lt "$end" ]; do
                \(command); n=$((n + 1)); [ "$n" = 1 ] && echo started
                sleep \(every)
            done
            echo "runs $n"
            """], output: output)
    }
}

extension ProcInfo {
    /// A field of /proc/PID/status in kB (VmRSS, VmHWM), or nil once the process is gone.
    static func memoryKB(_ pid: Int32, _ field: String = "VmRSS") -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") })
        else { return nil }
        return Int(line.dropFirst(field.count + 1).trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "")
    }
}

/// What a flood test watched: the agent's largest VmRSS, and when the locker started.
struct FloodWatch {
    var maxRSS = 0
    var lockSeenAfter: Duration?
}

extension Sandbox {
    /// Samples the agent's VmRSS every 50 ms while the floods run and until the locker's
    /// `lock.idle` appears, for at most `timeout` after `since`.
    func watchFlood(_ agent: AgentProcess, floods: [Process], since: ContinuousClock.Instant,
                    timeout: Duration) async throws -> FloodWatch {
        var watch = FloodWatch()
        while ContinuousClock.now - since < timeout {
            if let rss = ProcInfo.memoryKB(agent.pid) { watch.maxRSS = max(watch.maxRSS, rss) }
            if watch.lockSeenAfter == nil, !lines("lock.idle").isEmpty { watch.lockSeenAfter = ContinuousClock.now - since }
            if watch.lockSeenAfter != nil, floods.allSatisfy({ !$0.isRunning }) { break }
            if !agent.process.isRunning { throw AgentExited(waitingFor: "the flood to end", exit: Exit(agent.process), log: agent.log.suffix(3000).description) }
            try await Task.sleep(for: .milliseconds(50))
        }
        return watch
    }
}

/// The largest VmRSS allowed to the agent under a flood (the debug build idles at about 14 MB with both buses).
let floodRSSLimitKB = 16 * 1024

func kB(_ value: Int?) -> String { value.map { String(format: "%.1f MB", Double($0) / 1024) } ?? "?" }

/// One at a time: each test runs an X server, two dbus-daemons and logind's mock, and
/// the floods take both cores for seconds.
@Suite(.serialized) struct AttackTests {
    static let screenSaver = "/org/freedesktop/ScreenSaver"

    // MARK: A second local user on the system bus

    @Test("1. nobody's unicast PropertiesChanged {Active: false} on our session does not hold the lock off, and is counted as forged",
          .enabled(if: getuid() == 0, "the system bus with Debian's rules needs root (logind's name)"))
    func forgedInactiveSession() async throws {
        let lockAfter = 3000
        try await Sandbox.with(buses: true, systemBus: .debianSystem) { s in
            let agent = try await s.startDisabledBusAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.locker])
            try await s.expectDebianPolicyForNobody()
            try await s.forge(agent, "inactive")
            try await s.logindBarrier(agent)
            try await s.x("xdotool", "key", "shift")
            #expect(try await s.client("enable").exit == .exited(0))
            let idle = try await s.waitForLock(within: .milliseconds(lockAfter + 7000))
            let forged = try await s.desktopStatus()["forged_signals"]
            print("attack figure (1. forged Active false): " + (idle.map { "locked at \($0) ms of idle, \($0 - lockAfter) ms late" } ?? "never locked within \(lockAfter + 7000) ms")
                  + "; desktop.forged_signals \(forged.map { "\($0)" } ?? "absent")")
            #expect(idle != nil, "no lock within \(lockAfter + 7000) ms: the forged signal held it off\n\(agent.log)")
            if let idle { await expectLockOnTime(idleAtLock: idle, lockAfter: lockAfter) }
            #expect((forged as? Int ?? 0) >= 1, "desktop.forged_signals: \(forged.map { "\($0)" } ?? "absent")")
            #expect(try await s.status()["session_active"] as? Bool == true)
        }
    }

    @Test("2. nobody's Active false/true pulses every 0.5 s do not restart the idle time: the lock comes at the lock time",
          .enabled(if: getuid() == 0, "the system bus with Debian's rules needs root (logind's name)"))
    func forgedActivePulses() async throws {
        let lockAfter = 3000
        try await Sandbox.with(buses: true, systemBus: .debianSystem) { s in
            let agent = try await s.startDisabledBusAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.locker])
            let pulses = try s.startForgery(agent, "pulse", ["--every", "0.5", "--for", "8"], output: "pulses.out")
            try await s.waitUntil("the pulses to begin") { s.contents("pulses.out").contains("pulsing") }
            try await s.x("xdotool", "key", "shift")
            #expect(try await s.client("enable").exit == .exited(0))
            let idle = try await s.waitForLock(within: .seconds(16))
            print("attack figure (2. forged Active pulses): " + (idle.map { "locked at \($0) ms of idle, \($0 - lockAfter) ms late" } ?? "never locked within 16 s"))
            #expect(idle != nil, "no lock within 16 s\n\(agent.log)")
            if let idle { await expectLockOnTime(idleAtLock: idle, lockAfter: lockAfter) }
            _ = try await pulses.waitForExit("the pulses")
        }
    }

    @Test("3. nobody's PrepareForSleep(true) starts no locker and keeps the sleep delay; logind's own still locks before sleep",
          .enabled(if: getuid() == 0, "the system bus with Debian's rules needs root (logind's name)"))
    func forgedPrepareForSleep() async throws {
        try await Sandbox.with(buses: true, systemBus: .debianSystem) { s in
            let locker = "echo $$ >> started.pids; \(Script.grabbingLocker())"
            let agent = try await s.startControlledAgent(["--lock-after", "1h", "--locker", locker])
            try await s.waitUntil("the sleep delay inhibitor") { try await s.sleepInhibitors().count == 1 }
            try await s.forge(agent, "sleep-true")
            try await s.logindBarrier(agent)
            let started = try await s.happens(within: .milliseconds(1500)) { s.exists("started.pids") }
            let held = try await s.desktopStatus()["sleep_delay_held"] as? Bool
            let inhibitors = try await s.sleepInhibitors().count
            print("attack figure (3. forged PrepareForSleep(true)): locker started \(started ? "yes" : "no"), sleep_delay_held \(held.map { "\($0)" } ?? "?"), logind's sleep inhibitors \(inhibitors)")
            #expect(!started, "a forged PrepareForSleep started the locker\n\(agent.log)")
            #expect(held == true, "the agent let its sleep delay go on a forged signal\n\(agent.log)")
            try #require(inhibitors == 1, "logind holds no sleep delay of the agent's any more\n\(agent.log)")

            // logind's own: the lock before sleep still works.
            let cycle = try SleepCycle(await s.bus(["sleep-cycle", "--timeout", "15", "--pids", "lockers.pids"]))
            #expect(cycle.released != nil, "the sleep delay was never released\n\(agent.log)")
            #expect(cycle.upAtRelease, "the delay was released before the locker was up\n\(agent.log)")
            #expect(cycle.keyboardGrabbedAtRelease == true, "\(agent.log)")
            s.touch("unlock")
        }
    }

    @Test("4a. nobody's session Lock signal starts no locker",
          .enabled(if: getuid() == 0, "the system bus with Debian's rules needs root (logind's name)"))
    func forgedSessionLock() async throws {
        try await Sandbox.with(buses: true, systemBus: .debianSystem) { s in
            let locker = "echo $$ >> started.pids; \(Script.grabbingLocker())"
            let agent = try await s.startControlledAgent(["--lock-after", "1h", "--locker", locker])
            try await s.forge(agent, "lock")
            try await s.logindBarrier(agent)
            let started = try await s.happens(within: .milliseconds(1500)) { s.exists("started.pids") }
            print("attack figure (4a. forged session Lock): locker started \(started ? "yes" : "no")")
            #expect(!started, "a forged Lock started the locker\n\(agent.log)")
            #expect(!agent.log.contains("lock requested by logind"), "\(agent.log)")
            if started { s.touch("unlock") }
        }
    }

    @Test("4b. nobody's PrepareForSleep(false) does not run the after-resume hook",
          .enabled(if: getuid() == 0, "the system bus with Debian's rules needs root (logind's name)"))
    func forgedResume() async throws {
        try await Sandbox.with(buses: true, systemBus: .debianSystem) { s in
            let agent = try await s.startControlledAgent(["--lock-after", "1h", "--locker", Script.grabbingLocker(),
                                                          "--after-resume", "touch resumed"])
            try await s.waitUntil("the sleep delay inhibitor") { try await s.sleepInhibitors().count == 1 }
            try await s.forge(agent, "sleep-false")
            try await s.logindBarrier(agent)
            #expect(try await s.client("status").exit == .exited(0))
            let ran = try await s.happens(within: .milliseconds(1500)) { s.exists("resumed") }
            print("attack figure (4b. forged PrepareForSleep(false)): after-resume hook ran \(ran ? "yes" : "no")")
            #expect(!ran, "a forged PrepareForSleep(false) ran the after-resume hook\n\(agent.log)")
        }
    }

    @Test("5. a 10 s flood of nobody's PropertiesChanged: the lock comes by the lock time + 1 s; VmRSS stays under 16 MB",
          .enabled(if: getuid() == 0, "the system bus with Debian's rules needs root (logind's name)"))
    func forgedSignalFlood() async throws {
        let lockAfter = 3000
        try await Sandbox.with(buses: true, systemBus: .debianSystem) { s in
            // Not disabled first: a flooded agent may not even answer `enable`.
            try await s.x("xdotool", "key", "shift")
            let agent = try await s.startControlledAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.locker])
            let baseline = ProcInfo.memoryKB(agent.pid)
            let flood = try s.startForgery(agent, "flood", ["--for", "10"], output: "flood.out")
            try await s.waitUntil("the flood to begin") { s.contents("flood.out").contains("flooding") }
            try await s.x("xdotool", "key", "shift")
            let keyAt = ContinuousClock.now
            // The user's own commands still reach the agent during the flood.
            let status = try await s.client("status")
            let statusTook = (ContinuousClock.now - keyAt).milliseconds
            let watch = try await s.watchFlood(agent, floods: [flood], since: keyAt, timeout: .seconds(40))
            let idle = s.lines("lock.idle").first.flatMap { Int($0) }
            let hwm = ProcInfo.memoryKB(agent.pid, "VmHWM")
            let sent = s.lines("flood.out").last ?? "?"
            print("attack figure (5. forged signal flood): " + (idle.map { "locked at \($0) ms of idle, \($0 - lockAfter) ms late" } ?? "never locked within 40 s")
                  + "; VmRSS \(kB(baseline)) before, max \(kB(watch.maxRSS)) during, VmHWM \(kB(hwm)); flood: \(sent)"
                  + "; status during the flood: \(status.exit) after \(statusTook) ms \(status.stderr.trimmingCharacters(in: .whitespacesAndNewlines))")
            #expect(status.exit == .exited(0), "status during the flood: \(status.stderr)")
            #expect(idle != nil, "no lock within 40 s of the flood's start\n\(agent.log.suffix(3000))")
            if let idle { #expect(idle - lockAfter <= 1000, "locked \(idle - lockAfter) ms late under the flood") }
            #expect(watch.maxRSS < floodRSSLimitKB, "VmRSS reached \(kB(watch.maxRSS))")
        }
    }

    // MARK: Clients of the session bus

    @Test("6. --secure, two clients flooding Inhibit for 10 s without reading answers: the lock comes by the lock time + 1 s, VmRSS under 16 MB, a few hundred log lines at most")
    func inhibitFloodSecure() async throws {
        let lockAfter = 3000
        try await Sandbox.with(buses: true) { s in
            try await s.x("xdotool", "key", "shift")
            let keyAt = ContinuousClock.now
            let agent = try await s.startControlledAgent(["--lock-after", "\(lockAfter)ms", "--secure", "--locker", Script.locker])
            let linesBefore = agent.log.split(separator: "\n").count
            let baseline = ProcInfo.memoryKB(agent.pid)
            let floods = try (1...2).map { k in
                try s.startBusHelper(["ss-flood", k == 1 ? Self.screenSaver : "/ScreenSaver", "10"], output: "flood\(k).out")
            }
            try await s.waitUntil("both floods to begin") { (1...2).allSatisfy { s.contents("flood\($0).out").contains("flooding") } }
            #expect(!s.exists("lock.idle"), "locked before the floods began: the test measured nothing\n\(agent.log)")
            // The user's own commands still reach the agent during the flood.
            let statusAsked = ContinuousClock.now
            let status = try await s.client("status")
            let statusTook = (ContinuousClock.now - statusAsked).milliseconds
            let watch = try await s.watchFlood(agent, floods: floods, since: keyAt, timeout: .seconds(40))
            let idle = s.lines("lock.idle").first.flatMap { Int($0) }
            // The log once the agent has caught up: it answers, and no line came for a second.
            _ = try? await s.client("status")
            var lines = agent.log.split(separator: "\n").count
            try await s.waitUntil("the agent's log to settle", timeout: .seconds(30), every: .seconds(1)) {
                let now = agent.log.split(separator: "\n").count
                defer { lines = now }
                return now == lines
            }
            let grown = lines - linesBefore
            let sent = (1...2).map { s.lines("flood\($0).out").last ?? "?" }.joined(separator: ", ")
            print("attack figure (6. Inhibit flood, --secure): " + (idle.map { "locked at \($0) ms of idle, \($0 - lockAfter) ms late" } ?? "never locked within 40 s")
                  + "; VmRSS \(kB(baseline)) before, max \(kB(watch.maxRSS)) during; log grew by \(grown) lines (\(agent.log.utf8.count) bytes); floods: \(sent)"
                  + "; status during the floods: \(status.exit) after \(statusTook) ms \(status.stderr.trimmingCharacters(in: .whitespacesAndNewlines))")
            #expect(status.exit == .exited(0), "status during the floods: \(status.stderr)")
            #expect(idle != nil, "no lock within 40 s of the floods' start")
            if let idle { #expect(idle - lockAfter <= 1000, "locked \(idle - lockAfter) ms late under the flood") }
            #expect(watch.maxRSS < floodRSSLimitKB, "VmRSS reached \(kB(watch.maxRSS))")
            #expect(grown <= 300, "the log grew by \(grown) lines:\n\(agent.log.suffix(1500))")
        }
    }

    @Test("6b. --secure, a 10 s flood of short-lived session-bus connections, 5 Inhibits each: the lock comes by the lock time + 1 s, VmRSS under 16 MB, at most 30 warnings")
    func connectionFloodSecure() async throws {
        let lockAfter = 3000
        try await Sandbox.with(buses: true) { s in
            try await s.x("xdotool", "key", "shift")
            let agent = try await s.startControlledAgent(["--lock-after", "\(lockAfter)ms", "--secure", "--locker", Script.locker])
            let warningsBefore = agent.count(of: "warning: ")
            let baseline = ProcInfo.memoryKB(agent.pid)
            let flood = try s.startBusHelper(["ss-connect-flood", Self.screenSaver, "10"], output: "flood.out")
            try await s.waitUntil("the flood to begin") { s.contents("flood.out").contains("flooding") }
            try await s.x("xdotool", "key", "shift")
            let keyAt = ContinuousClock.now
            let status = try await s.client("status")
            let statusTook = (ContinuousClock.now - keyAt).milliseconds
            let watch = try await s.watchFlood(agent, floods: [flood], since: keyAt, timeout: .seconds(40))
            let idle = s.lines("lock.idle").first.flatMap { Int($0) }
            // What a backlog would still log once the flood is over.
            try await Task.sleep(for: .seconds(2))
            let rssAfter = ProcInfo.memoryKB(agent.pid)
            let warnings = agent.count(of: "warning: ") - warningsBefore
            let sent = s.lines("flood.out").last ?? "?"
            print("figure: (6b. short-lived connections flood, --secure): " + (idle.map { "locked at \($0) ms of idle, \($0 - lockAfter) ms late" } ?? "never locked within 40 s")
                  + "; VmRSS \(kB(baseline)) before, max \(kB(watch.maxRSS)) during, \(kB(rssAfter)) 2 s after; \(warnings) warnings; flood: \(sent)"
                  + "; status during the flood: \(status.exit) after \(statusTook) ms")
            #expect(status.exit == .exited(0), "status during the flood: \(status.stderr)")
            #expect(idle != nil, "no lock within 40 s of the flood's start")
            if let idle { #expect(idle - lockAfter <= 1000, "locked \(idle - lockAfter) ms late under the flood") }
            #expect(watch.maxRSS < floodRSSLimitKB, "VmRSS reached \(kB(watch.maxRSS))")
            #expect(warnings <= 30, "\(warnings) warnings:\n\(agent.log.suffix(1500))")
        }
    }

    @Test("7. one connection asking for 5,000 inhibitors gets at most 64, then D-Bus errors; status still answers")
    func inhibitorsPerConnection() async throws {
        try await Sandbox.with(buses: true) { s in
            let agent = try await s.startControlledAgent(["--lock-after", "1h", "--locker", "true"])
            _ = try s.startBusHelper(["ss-inhibit-many", Self.screenSaver, "5000", "--until", "release", "--window", "16"], output: "many.out")
            let line = try await s.waitForLines("many.out", timeout: .seconds(150)).first ?? ""
            let answer = try #require(jsonObject(line), "ss-inhibit-many said: \(s.contents("many.out"))")
            let granted = answer["granted"] as? Int ?? -1
            let refused = answer["refused"] as? Int ?? -1
            let asked = ContinuousClock.now
            let status = try await s.client("status", "--json")
            let took = (ContinuousClock.now - asked).milliseconds
            let parsed = jsonObject(status.stdout)
            print("attack figure (7. 5,000 Inhibits on one connection): \(line); status \(status.exit) in \(took) ms, \(status.stdout.utf8.count) bytes, " +
                  (parsed == nil ? "not JSON: \(status.stderr.prefix(200))" : "\((parsed?["inhibitors"] as? [Any])?.count ?? -1) inhibitors listed"))
            #expect(granted <= 64, "\(granted) inhibitors granted to one connection")
            #expect(refused == 5000 - granted && refused > 0, "\(line)")
            #expect((answer["errors"] as? [String] ?? []).allSatisfy { $0.hasPrefix("org.freedesktop.DBus.Error.") }, "\(line)")
            // The burst is granted first; after it, one a second may still be (the rate
            // refills), so later grants are few: never more than the flood's seconds.
            if let firstRefused = answer["first_refused"] as? Int {
                #expect(firstRefused >= 20, "refused within the burst: \(line)")
            }
            #expect(status.exit == .exited(0), "status: \(status.stderr)\n\(agent.log.suffix(1500))")
            #expect(parsed != nil, "status --json is not JSON")
            s.touch("release")
        }
    }

    @Test("8. UnInhibit of another connection's cookie is refused with a D-Bus error; the first caller's hold still holds")
    func uninhibitOthersCookie() async throws {
        let lockAfter = 4000
        try await Sandbox.with(buses: true) { s in
            let agent = try await s.startDisabledBusAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.locker])
            _ = try s.startBusHelper(["ss-inhibit", Self.screenSaver, "player", "film", "--until", "release"], output: "a.out")
            let cookie = try await s.waitForNumber(in: "a.out")
            let b = try await s.busResult("ss", Self.screenSaver, "UnInhibit", "\(cookie)")
            #expect(try await s.client("enable").exit == .exited(0))
            try await s.waitUntil("the server idle to pass the lock time by 1.5 s", every: .milliseconds(200)) {
                try await s.serverIdle() >= lockAfter + 1500
            }
            let locked = s.exists("lock.idle")
            let held = try await s.inhibitors().count
            print("attack figure (8. UnInhibit of another's cookie): B's call \(b.exit) \(b.stderr.trimmingCharacters(in: .whitespacesAndNewlines)); A's inhibitors held \(held); locked \(locked ? "yes" : "no") at lock time + 1.5 s")
            #expect(b.exit == .exited(1), "B's UnInhibit of A's cookie \(cookie) succeeded")
            #expect(b.stderr.contains("org.freedesktop.DBus.Error."), "\(b.stderr)")
            #expect(held == 1, "\(agent.log)")
            #expect(!locked, "locked while A still held its inhibitor\n\(agent.log)")
            s.touch("release")
        }
    }

    @Test("9. an application name of 320 bytes does not push the caller's pid and unique name out of status's `who`")
    func longApplicationName() async throws {
        try await Sandbox.with(buses: true) { s in
            _ = try await s.startControlledAgent(["--lock-after", "1h", "--locker", "true"])
            let app = String(repeating: "Tab ", count: 80)
            let holder = try s.startBusHelper(["ss-inhibit", Self.screenSaver, app, "video", "--until", "release", "--name"], output: "holder.out")
            let lines = try await s.waitForLines("holder.out", count: 2)
            let name = try #require(lines[1].hasPrefix("name :") ? String(lines[1].dropFirst(5)) : nil, "\(lines)")
            let who = try await s.inhibitors().first?["who"] as? String ?? ""
            print("attack figure (9. a 320-byte application name): who is \(who.utf8.count) bytes, ends \"\(who.suffix(40))\"; caller pid \(holder.processIdentifier), \(name)")
            #expect(who.contains("pid \(holder.processIdentifier)"), "who: \(who)")
            #expect(who.contains(name), "who: \(who) (the caller is \(name))")
            s.touch("release")
        }
    }

    // MARK: Resets: D-Bus's SimulateUserActivity, the X server's XResetScreenSaver

    @Test("10a. --secure --ignore-screensaver-reset: SimulateUserActivity every 0.5 s does not hold the lock off")
    func simulateUserActivitySecure() async throws {
        let lockAfter = 3000
        try await Sandbox.with(buses: true) { s in
            try await s.x("xdotool", "key", "shift")
            let agent = try await s.startControlledAgent(["--lock-after", "\(lockAfter)ms", "--secure", "--ignore-screensaver-reset",
                                                          "--locker", Script.locker])
            _ = try s.startBusHelper(["ss-repeat", Self.screenSaver, "SimulateUserActivity", "0.5", "8"], output: "simulate.out")
            try await s.waitUntil("the first SimulateUserActivity") { s.contents("simulate.out").contains("called") }
            #expect(!s.exists("lock.idle"), "locked before the first SimulateUserActivity: the test measured nothing\n\(agent.log)")
            let idle = try await s.waitForLock(within: .seconds(16))
            print("attack figure (10a. SimulateUserActivity every 0.5 s, --secure --ignore-screensaver-reset): "
                  + (idle.map { "locked at \($0) ms of idle, \($0 - lockAfter) ms late" } ?? "never locked within 16 s"))
            #expect(idle != nil, "no lock within 16 s\n\(agent.log)")
            if let idle { await expectLockOnTime(idleAtLock: idle, lockAfter: lockAfter) }
        }
    }

    /// The locker starts `lockAfter` after the key, though resets keep the server's own
    /// idle counter near zero: measured on the test's clock from the key press. Under
    /// `--secure` the key is not input: give the one before the agent's start as `lastKey`.
    func expectLockDespiteResets(_ s: Sandbox, _ agent: AgentProcess, lockAfter: Int, figure: String,
                                 lastKey: ContinuousClock.Instant? = nil) async throws {
        if lastKey == nil { try await s.x("xdotool", "key", "shift") }
        let keyAt = lastKey ?? ContinuousClock.now
        let seen = try await s.waitForLock(within: .seconds(16))
        let after = (ContinuousClock.now - keyAt).milliseconds
        print("attack figure (\(figure)): " + (seen != nil ? "locked \(after) ms after the last key, \(after - lockAfter) ms late" : "never locked within 16 s"))
        #expect(seen != nil, "no lock within 16 s\n\(agent.log)")
        if seen != nil {
            #expect(after >= lockAfter + earliestLock && after <= lockAfter + latestLock, "locked \(after) ms after the last key\n\(agent.log)")
        }
    }

    @Test("10b. --secure: `xset s reset` every 100 ms does not hold the lock off")
    func screenSaverResetsSecure() async throws {
        let lockAfter = 3000
        try await Sandbox.with { s in
            try await s.x("xdotool", "key", "shift")
            let keyAt = ContinuousClock.now
            let agent = try await s.startControlledAgent(["--lock-after", "\(lockAfter)ms", "--secure", "--locker", Script.locker])
            _ = try s.startRepeating("xset s reset", every: "0.1", seconds: 10, output: "resets.out")
            try await s.waitUntil("the first reset") { s.contents("resets.out").contains("started") }
            #expect(!s.exists("lock.idle"), "locked before the first reset: the test measured nothing\n\(agent.log)")
            try await expectLockDespiteResets(s, agent, lockAfter: lockAfter, figure: "10b. xset s reset every 100 ms, --secure", lastKey: keyAt)
        }
    }

    // MARK: The admin's policy

    /// Today the policy refuses the line and falls back to `secure`: the test also asks
    /// that the line be understood, so that it cannot pass by --secure alone.
    @Test("11. the policy's ignore-screensaver-reset: `xset s reset` every 200 ms does not hold the lock off; the policy's line is understood")
    func policyIgnoresResets() async throws {
        let lockAfter = 3000
        try await Sandbox.with { s in
            try s.writePolicy("ignore-screensaver-reset\n")
            try await s.x("xdotool", "key", "shift")
            let agent = try await s.startControlledAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.locker])
            let status = try await s.status()
            let policy = status["policy"] as? [String: Any] ?? [:]
            let settings = status["settings"] as? [[String: Any]] ?? []
            print("attack figure (11. policy ignore-screensaver-reset): policy errors \(policy["errors"] ?? "none"); changes \(policy["changes"] ?? "none"); secure from \(settings.first { $0["name"] as? String == "secure" }?["from"] ?? "?")")
            _ = try s.startRepeating("xset s reset", every: "0.2", seconds: 10, output: "resets.out")
            try await s.waitUntil("the first reset") { s.contents("resets.out").contains("started") }
            try await expectLockDespiteResets(s, agent, lockAfter: lockAfter, figure: "11. xset s reset every 200 ms, policy ignore-screensaver-reset")
            #expect((policy["errors"] as? [Any])?.isEmpty == true, "the policy's line was not understood: \(policy)")
        }
    }

    @Test("12. the policy's max-inhibit 3s: `xidlelock inhibit --for 3s` taken anew every 2 s holds the lock off 3 s at most")
    func chainedShortInhibits() async throws {
        let lockAfter = 3000
        try await Sandbox.with { s in
            try s.writePolicy("max-inhibit 3s\n")
            try await s.x("xdotool", "key", "shift")
            let agent = try await s.startControlledAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.locker])
            let inhibit = "'\(agentBinary)' inhibit --for 3s --why chained --socket '\(s.socket)' >/dev/null 2>&1"
            _ = try s.startRepeating(inhibit, every: "2", seconds: 14, output: "inhibits.out")
            try await s.waitUntil("the first inhibit") { s.contents("inhibits.out").contains("started") }
            let idle = try await s.waitForLock(within: .seconds(18))
            print("attack figure (12. inhibit --for 3s every 2 s, policy max-inhibit 3s): "
                  + (idle.map { "locked at \($0) ms of idle, \($0 - lockAfter) ms after the lock time" } ?? "never locked within 18 s"))
            #expect(idle != nil, "no lock within 18 s\n\(agent.log)")
            if let idle { #expect(idle <= lockAfter + 3000 + latestLock, "locked at \(idle) ms of idle\n\(agent.log)") }
        }
    }

    @Test("12b. the policy's max-inhibit 6s across a restart: a player's ScreenSaver inhibitor, taken again as the agent comes back 5 s into the idle time; the restart is no fresh budget")
    func maxInhibitAcrossRestart() async throws {
        let lockAfter = 3000
        try await Sandbox.with(buses: true) { s in
            try s.writePolicy("max-inhibit 6s\n")
            _ = try s.startBusHelper(["ss-follow", Self.screenSaver, "chromium", "Video Wake Lock", "--until", "release"], output: "player.out")
            _ = try await s.waitForLines("player.out")
            try await s.x("xdotool", "key", "shift")
            let arguments = ["--lock-after", "\(lockAfter)ms", "--locker", Script.locker]
            let first = try await s.startControlledAgent(arguments)
            try await s.waitUntil("the player's inhibitor in status") { try await s.inhibitors().count == 1 }
            try await s.waitUntil("the server idle to pass 5 s", every: .milliseconds(100)) { try await s.serverIdle() >= 5000 }
            first.send(SIGTERM)
            _ = try await first.waitForExit()
            #expect(!s.exists("lock.idle"), "locked before the restart\n\(first.log)")
            let second = try s.startAgent(arguments + ["--socket", s.socket])
            let idle = try await s.waitForLock(within: .seconds(18))
            print("attack figure (12b. max-inhibit 6s, restarted at 5 s of idle, the inhibitor taken again): "
                  + (idle.map { "locked at \($0) ms of idle" } ?? "never locked within 18 s"))
            #expect(idle != nil, "no lock within 18 s\n\(second.log)")
            if let idle { #expect(idle <= 6000 + latestLock, "locked at \(idle) ms of idle: the restart was a fresh budget\n\(second.log)") }
        }
    }

    // MARK: The control socket

    @Test("14. a connect storm on the control socket (2,000 connections that never send a line, and clients that reconnect again and again) does not keep the user's status and lock out; the log stays short")
    func connectStorm() async throws {
        try await Sandbox.with { s in
            let agent = try await s.startControlledAgent(["--lock-after", "1h", "--locker", Script.locker])
            let linesBefore = agent.log.split(separator: "\n").count
            let storm = try s.startBusHelper(["connect-storm", s.socket, "10", "--workers", "1"], output: "storm.out")
            try await s.waitUntil("the storm to begin") { s.contents("storm.out").contains("storming") }
            var asked: [(command: String, result: CommandResult, ms: Int)] = []
            for command in ["status", "status", "lock", "status"] {
                let started = ContinuousClock.now
                let result = try await s.client(command)
                asked.append((command, result, (ContinuousClock.now - started).milliseconds))
                try await Task.sleep(for: .milliseconds(500))
            }
            _ = try await storm.waitForExit("the storm", timeout: .seconds(60))
            let grown = agent.log.split(separator: "\n").count - linesBefore
            print("attack figure (14. control socket connect storm): " + asked.map { "\($0.command) \($0.result.exit) in \($0.ms) ms" }.joined(separator: ", ")
                  + "; log grew by \(grown) lines; storm: \(s.lines("storm.out").last ?? "?")")
            for (command, result, ms) in asked {
                #expect(result.exit == .exited(0), "\(command) during the storm: \(result.stderr)")
                #expect(ms <= 2000, "\(command) took \(ms) ms")
            }
            #expect(s.exists("lock.idle"), "the user's lock did not start the locker")
            #expect(grown <= 30, "the log grew by \(grown) lines:\n\(agent.log.suffix(1500))")
        }
    }

    // MARK: A restart during a film

    /// Waits until the server has been idle past `lockAfter` (the agent restarts while the user watches).
    func idlePastLockTime(_ s: Sandbox, _ lockAfter: Int) async throws {
        try await s.x("xdotool", "key", "shift")
        try await s.waitUntil("the server idle to pass the lock time", every: .milliseconds(100)) {
            try await s.serverIdle() >= lockAfter + 500
        }
    }

    @Test("13a. restarted while idle past the lock time, with a player that re-takes its ScreenSaver inhibitor when the name appears: no locker in the first 4 s")
    func restartDuringFilmInhibitor() async throws {
        let lockAfter = 2000
        try await Sandbox.with(buses: true) { s in
            _ = try s.startBusHelper(["ss-follow", Self.screenSaver, "chromium", "Video Wake Lock", "--until", "release"], output: "player.out")
            _ = try await s.waitForLines("player.out")
            try await idlePastLockTime(s, lockAfter)
            let agent = try s.startAgent(["--lock-after", "\(lockAfter)ms", "--locker", "echo $$ >> started.pids; exec sleep 60", "--socket", s.socket])
            let startedAt = ContinuousClock.now
            var lockedAfter: Int?
            let started = try await s.happens(within: .seconds(4)) {
                if s.exists("started.pids") && lockedAfter == nil { lockedAfter = (ContinuousClock.now - startedAt).milliseconds }
                return s.exists("started.pids")
            }
            let player = s.lines("player.out").dropFirst().joined(separator: "; ")
            print("attack figure (13a. restart during a film, ScreenSaver inhibitor re-taken): "
                  + (lockedAfter.map { "locker started \($0) ms after the agent" } ?? "no locker in 4 s") + "; player: \(player)")
            #expect(!started, "a locker started \(lockedAfter ?? -1) ms after the agent, before the player's inhibitor could come back\n\(agent.log)")
            #expect(player.contains("inhibited"), "the player never got its inhibitor back: \(player)\n\(agent.log)")
            s.touch("release")
        }
    }

    @Test("13b. restarted while idle past the lock time, --not-when-fullscreen with a fullscreen active window: no locker in the first 4 s")
    func restartDuringFilmFullscreen() async throws {
        let lockAfter = 2000
        try await Sandbox.with { s in
            let film = try await s.window("create", "film – mpv")
            try await s.window("fullscreen", film)
            try await s.window("activate", film)
            try await idlePastLockTime(s, lockAfter)
            let agent = try s.startAgent(["--lock-after", "\(lockAfter)ms", "--not-when-fullscreen",
                                          "--locker", "echo $$ >> started.pids; exec sleep 60", "--socket", s.socket])
            let startedAt = ContinuousClock.now
            var lockedAfter: Int?
            let started = try await s.happens(within: .seconds(4)) {
                if s.exists("started.pids") && lockedAfter == nil { lockedAfter = (ContinuousClock.now - startedAt).milliseconds }
                return s.exists("started.pids")
            }
            print("attack figure (13b. restart during a film, fullscreen): " + (lockedAfter.map { "locker started \($0) ms after the agent" } ?? "no locker in 4 s"))
            #expect(!started, "a locker started \(lockedAfter ?? -1) ms after the agent, with a fullscreen window active\n\(agent.log)")
        }
    }
}
