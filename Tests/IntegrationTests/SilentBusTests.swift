import Foundation
import Testing

/// Buses that are there but do not answer, and buses that come later (issue #29, row 1):
/// no connection, handshake or call on a bus ever holds the agent's loop, and a bus
/// that appears after the start is joined.
extension Sandbox {
    /// A listener at `socket` that accepts every connection and never answers (bus.py silent).
    func startSilentBus(at socket: String) async throws {
        let output = "silent-\(URL(fileURLWithPath: socket).lastPathComponent).out"
        _ = try startBusHelper(["silent", socket], output: output)
        _ = try await waitForLines(output)
    }

    /// `status --json` answers within `within`, however the buses behave.
    func expectStatusAnswers(within: Duration = .seconds(3), _ what: String) async throws -> [String: Any] {
        let clock = ContinuousClock()
        let start = clock.now
        let result = try await client("status", "--json")
        let took = clock.now - start
        print("figure: \(what): status answered in \(took.milliseconds) ms (exit \(result.exit))")
        #expect(result.exit == .exited(0), "status did not answer: \(result.stderr)\n\(agentLogs())")
        #expect(took < within, "status took \(took)")
        return (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]) ?? [:]
    }
}

extension DesktopTests {
    @Suite struct SilentBus {
        enum Which: String, CaseIterable, CustomTestStringConvertible {
            case session, system
            var testDescription: String { "the \(rawValue) bus" }
            var addressVariable: String { self == .session ? "DBUS_SESSION_BUS_ADDRESS" : "DBUS_SYSTEM_BUS_ADDRESS" }
            func daemon(_ buses: Buses) -> DBusDaemon { self == .session ? buses.session : buses.system }
            /// The line that says the agent joined this bus.
            var joined: String { self == .session ? "serving org.freedesktop.ScreenSaver" : "logind session:" }
        }

        /// The lock comes on time (or the test says how late, or that it never came).
        static func expectLock(in s: Sandbox, lockAfter: Int, _ what: String) async throws {
            do {
                let idle = try await s.waitForNumber(in: "lock.idle", timeout: .milliseconds(lockAfter + 10_000))
                print("figure: \(what): lock after \(lockAfter) ms, locked at \(idle) ms idle")
                await expectLockOnTime(idleAtLock: idle, lockAfter: lockAfter)
            } catch let error as WaitTimedOut {
                print("figure: \(what): lock after \(lockAfter) ms, no lock within \(lockAfter + 10_000) ms")
                throw error
            }
        }

        @Test("a bus that accepts the connection and never answers, at the start: the lock comes on time, status answers and says the bus is not connected",
              arguments: Which.allCases)
        func silentAtStart(which: Which) async throws {
            try await Sandbox.with(buses: true) { s in
                let silent = s.path("silent.bus")
                try await s.startSilentBus(at: silent)
                try await s.x("xdotool", "key", "shift")
                let lockAfter = 5000
                let agent = try s.startAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.locker, "--socket", s.socket],
                                             environment: [which.addressVariable: "unix:path=\(silent)"])
                try await s.waitUntil("the agent's socket") { FileManager.default.fileExists(atPath: s.socket) }
                _ = try await s.expectStatusAnswers("silent \(which.rawValue) bus at the start")
                try await Self.expectLock(in: s, lockAfter: lockAfter, "silent \(which.rawValue) bus at the start")
                try await agent.waitForLog(containing: "no \(which.rawValue) bus")
                let desktop = try await s.expectStatusAnswers("silent \(which.rawValue) bus, after the lock")["desktop"] as? [String: Any] ?? [:]
                #expect(desktop["\(which.rawValue)_bus"] as? Bool == false, "\(desktop)")
                #expect((desktop["\(which.rawValue)_bus_state"] as? String)?.contains("did not answer") == true, "\(desktop)")
                #expect(agent.count(of: "no \(which.rawValue) bus") == 1, "said once\n\(agent.log)")
                let doctor = try await s.doctor()
                #expect(doctor.stdout.contains("did not answer within"), "\(doctor.stdout)")
                // The other bus is joined as usual.
                let other: Which = which == .session ? .system : .session
                #expect(agent.log.contains(other.joined), "\(agent.log)")
            }
        }

        @Test("a bus that goes silent on reconnection (crashed, a listener that never answers at its address): the lock comes on time",
              arguments: Which.allCases)
        func silentOnReconnection(which: Which) async throws {
            try await Sandbox.with(buses: true) { s in
                try await s.x("xdotool", "key", "shift")
                let lockAfter = 10_000
                let agent = try await s.startControlledAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.locker])
                try await agent.waitForLog(containing: which.joined)
                let buses = try #require(s.buses)
                let daemon = which.daemon(buses)
                try await daemon.crash()
                try await agent.waitForLog(containing: "lost the \(which.rawValue) bus")
                try await s.startSilentBus(at: daemon.socketPath)
                _ = try await s.expectStatusAnswers("\(which.rawValue) bus silent on reconnection")
                try await Self.expectLock(in: s, lockAfter: lockAfter, "\(which.rawValue) bus silent on reconnection")
                _ = try await s.expectStatusAnswers("\(which.rawValue) bus silent on reconnection, after the lock")
            }
        }

        @Test("an idle agent whose buses are not there does not wake up: their sockets are watched, not polled")
        func absentBusesCostNoWakeUps() async throws {
            try await Sandbox.with { s in
                try await s.x("xdotool", "key", "shift")
                // A directory of their own, as /run/user/UID and /run/dbus: the sandbox itself
                // sees a file made for each of the test's commands, and a file made beside
                // the socket wakes the agent (one read, the name compared).
                try FileManager.default.createDirectory(atPath: s.path("run"), withIntermediateDirectories: true)
                let agent = try s.startAgent(["--lock-after", "1h", "--locker", Script.locker, "--socket", s.socket], environment: [
                    "DBUS_SESSION_BUS_ADDRESS": "unix:path=\(s.path("run/session.bus"))",
                    "DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(s.path("run/system.bus"))",
                ])
                try await agent.waitForLog(containing: "no system bus")
                try await agent.waitForLog(containing: "no session bus")
                let before = try #require(wakeUps(of: agent.pid))
                let idleAtStart = try await s.serverIdle()
                // Past the 5 s of a first retry, had there been one.
                try await s.waitUntil("six more seconds of idleness", every: .milliseconds(250)) {
                    try await s.serverIdle() >= idleAtStart + 6000
                }
                let after = try #require(wakeUps(of: agent.pid))
                print("figure: wake-ups with both buses absent: \(after - before) over \(try await s.serverIdle() - idleAtStart) ms idle")
                #expect(after - before == 0, "the agent woke \(after - before) times while nothing happened\n\(agent.log)")
            }
        }

        @Test("a bus that appears after the start (startx before the bus) is joined within a few seconds",
              arguments: Which.allCases)
        func appearsAfterStart(which: Which) async throws {
            try await Sandbox.with(buses: true) { s in
                let buses = try #require(s.buses)
                let daemon = which.daemon(buses)
                await daemon.stop()
                try? FileManager.default.removeItem(atPath: daemon.socketPath)
                try await s.x("xdotool", "key", "shift")
                let agent = try await s.startControlledAgent(["--lock-after", "1h", "--locker", Script.locker])
                try await agent.waitForLog(containing: "no \(which.rawValue) bus")
                #expect(try await s.desktopStatus()["\(which.rawValue)_bus"] as? Bool == false)
                let clock = ContinuousClock()
                let appeared = clock.now
                if which == .session {
                    try await daemon.restart()
                } else {
                    try await buses.restartSystem()
                }
                do {
                    try await agent.waitForLog(containing: which.joined, timeout: .seconds(10))
                    print("figure: \(which.rawValue) bus that appears after the start: joined \((clock.now - appeared).milliseconds) ms after it was started")
                } catch {
                    print("figure: \(which.rawValue) bus that appears after the start: not joined within 10 s")
                    throw error
                }
                if which == .session {
                    #expect(try await s.bus("ss", "/ScreenSaver", "GetActive") == "false", "\(agent.log)")
                } else {
                    try await s.waitUntil("the sleep delay taken") { try await s.sleepInhibitors().count == 1 }
                }
                #expect(try await s.desktopStatus()["\(which.rawValue)_bus"] as? Bool == true)
            }
        }
    }
}
