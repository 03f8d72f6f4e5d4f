import Foundation
import Testing

/// Stages users shape, with the real agent: a stage that fires through a hold (the
/// socket's `xidlelock inhibit`), the lock time on battery from UPower (python3-dbusmock's
/// upower template on the test's system bus; a forger on another connection), and
/// `--screen-off-after-lock` on a server without DPMS (Xvfb: said, and the lock unharmed).
/// The monitor really going off is checked on Xorg by `make test-desktop`.
@Suite("Shaped stages, with the real agent", .serialized)
struct ShapedStageIntegrationTests {
    /// The stage called `name` in status.
    static func stage(_ status: [String: Any], _ name: String) -> [String: Any]? {
        (status["stages"] as? [[String: Any]])?.first { $0["name"] as? String == name }
    }

    @Test("a stage with ignore=socket fires while `xidlelock inhibit` holds the lock off; status says what holds each")
    func stageFiresThroughAHold() async throws {
        try await Sandbox.with { s in
            try await s.x("xdotool", "key", "shift")
            let agent = try await s.startControlledAgent(["--lock-after", "3s", "--locker", Script.locker,
                                                          "--stage", "mark=2s ignore=socket:touch marked"])
            #expect(try await s.client("inhibit", "--why", "a talk", "--for", "1h").exit == .exited(0))
            try await s.waitUntil("the stage that ignores the socket's hold") { s.exists("marked") }
            let status = try await s.status()
            #expect(Self.stage(status, "lock")?["held_by"] as? [String] == ["socket"], "\(status)")
            #expect(Self.stage(status, "mark")?["held_by"] as? [String] == [], "\(status)")
            #expect(Self.stage(status, "mark")?["ignores"] as? [String] == ["socket"], "\(status)")
            #expect(!s.exists("lock.idle"), "the lock obeys the hold\n\(agent.log)")
        }
    }

    // The bus runs the session policy: Debian's system rules let only the names of
    // installed services be owned, and UPower (its rule file) is not installed here.
    // Whoever sends the forgery, the agent tells it from UPower's own connection.
    @Test("on battery, from UPower's own signal: the battery's lock time, at once; a forged signal from another connection changes nothing; no UPower: AC")
    func lockTimeOnBattery() async throws {
        try await Sandbox.with(buses: true) { s in
            let buses = try #require(s.buses)
            try await buses.startUPower()
            try await s.x("xdotool", "key", "shift")
            let agent = try await s.startControlledAgent(["--lock-after", "1h", "--lock-after-on-battery", "4s",
                                                          "--locker", Script.locker])
            try await s.waitUntil("UPower's word (AC)") {
                (try await s.desktopStatus()["upower_owner"] as? String)?.isEmpty == false
            }
            #expect(try await s.status()["power_source"] as? String == "ac")
            // Another connection claims the machine is on battery: dropped and counted.
            #expect(try await s.bus("forge", "\(agent.pid)", "on-battery").contains("sent 1"))
            try await s.logindBarrier(agent)
            #expect(try await s.status()["power_source"] as? String == "ac", "\(agent.log)")
            #expect(try await s.desktopStatus()["forged_signals"] as? Int ?? 0 >= 1)
            // UPower itself says so once the idle time is past the 4 s lock time on battery.
            try await s.waitUntil("the server idle to pass 4 s", every: .milliseconds(100)) { try await s.serverIdle() >= 4000 }
            try await s.bus("on-battery", "true")
            let idle = try #require(await s.waitForLock(within: generousTimeout), "no lock on battery\n\(agent.log)")
            print("battery figure: locked at X idle \(idle) ms once UPower said OnBattery (lock time on battery 4000 ms)")
            #expect(try await s.status()["power_source"] as? String == "battery")
            #expect(agent.log.contains("on battery: lock at 4s"), "\(agent.log)")
            // UPower goes away: the times on AC.
            await buses.stopUPower()
            try await s.waitUntil("the times on AC again") {
                try await s.status()["power_source"] as? String == "ac"
            }
        }
    }

    @Test("--screen-off-after-lock on a server without DPMS: said at start and in status; the lock is unharmed")
    func screenOffWithoutDPMS() async throws {
        try await Sandbox.with { s in
            try await s.x("xdotool", "key", "shift")
            let agent = try await s.startControlledAgent(["--lock-after", "1h", "--screen-off-after-lock", "1s",
                                                          "--locker", Script.grabbingLocker()])
            try await agent.waitForLog(containing: "--screen-off-after-lock: the X server has no DPMS extension")
            #expect(try await s.client("lock").exit == .exited(0))
            _ = try await s.waitForLines("lockers.pids")
            try await agent.waitForLog(containing: "turning the monitor off")
            let status = try await s.status()
            #expect(status["state"] as? String == "locked", "\(status)")
            let monitor = try #require(status["monitor"] as? [String: Any])
            #expect((monitor["dpms"] as? String)?.hasPrefix("unavailable") == true, "\(monitor)")
            let off = try #require(status["screen_off"] as? [String: Any])
            #expect(off["after_ms"] as? Int == 1000)
            s.touch("unlock")
            try await agent.waitForLog(containing: "unlocked after")
        }
    }
}
