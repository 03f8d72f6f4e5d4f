import Foundation
import Testing

let testWindowBinary: String = URL(fileURLWithPath: agentBinary).deletingLastPathComponent().appending(path: "TestWindow").path

extension Sandbox {
    /// Runs TestWindow (EWMH properties as a window manager sets them; XTest motion).
    @discardableResult
    func window(_ command: String, _ argument: String) async throws -> String {
        try await x(testWindowBinary, command, argument)
    }
}

/// `--not-when-fullscreen` on a real Xvfb: windows given `_NET_WM_STATE` and the root's
/// `_NET_ACTIVE_WINDOW` with XChangeProperty, as a window manager would.
@Suite struct FullscreenTests {
    static let holdingLocker = "echo $$ >> lockers.pids; exec sleep 60"

    @Test("the active window going fullscreen holds every stage off, named in status; leaving fullscreen lets the due stages come at once")
    func fullscreenHolds() async throws {
        try await Sandbox.with { s in
            let film = try await s.window("create", "Big Buck Bunny – mpv")
            try await s.window("activate", film)
            try await s.x("xdotool", "key", "shift")
            let agent = try await s.startControlledAgent(["--lock-after", "3s", "--stage", "dim=2s:echo dim >> dims",
                                                          "--not-when-fullscreen", "--locker", Self.holdingLocker])
            try await s.window("fullscreen", film)
            try await agent.waitForLog(containing: "inhibited by \"Big Buck Bunny – mpv\"")
            let held = try await s.inhibitors()
            #expect(held.count == 1)
            #expect(held.first?["source"] as? String == "fullscreen")
            #expect((held.first?["who"] as? String)?.contains("Big Buck Bunny – mpv") == true, "\(held)")
            try await s.waitUntil("the server idle to pass 4.5 s", every: .milliseconds(200)) { try await s.serverIdle() >= 4500 }
            #expect(!s.exists("lockers.pids"), "locked during the film\n\(agent.log)")
            #expect(!s.exists("dims"), "dimmed during the film\n\(agent.log)")
            try await s.window("normal", film)
            _ = try await s.waitForLines("lockers.pids")
            _ = try await s.waitForLines("dims")
            #expect(agent.log.contains("inhibitor of \"Big Buck Bunny – mpv\""), "\(agent.log)")
        }
    }

    @Test("a fullscreen window that is not the active one holds nothing: the lock comes on time")
    func onlyTheActiveWindow() async throws {
        try await Sandbox.with { s in
            let film = try await s.window("create", "film")
            let editor = try await s.window("create", "editor")
            try await s.window("fullscreen", film)
            try await s.window("activate", editor)
            try await s.x("xdotool", "key", "shift")
            let agent = try s.startAgent(["--lock-after", "2s", "--not-when-fullscreen", "--locker", Script.locker])
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: 2000)
            #expect(!agent.log.contains("inhibited"), "\(agent.log)")
        }
    }

    @Test("the fullscreen window closing ends its hold")
    func windowCloses() async throws {
        try await Sandbox.with { s in
            let game = try await s.window("create", "game")
            try await s.window("fullscreen", game)
            try await s.window("activate", game)
            let agent = try s.startAgent(["--lock-after", "2s", "--not-when-fullscreen", "--locker", Self.holdingLocker])
            try await agent.waitForLog(containing: "inhibited by \"game\"")
            try await s.waitUntil("the server idle to pass 2.5 s", every: .milliseconds(200)) { try await s.serverIdle() >= 2500 }
            #expect(!s.exists("lockers.pids"), "\(agent.log)")
            try await s.window("destroy", game)
            _ = try await s.waitForLines("lockers.pids")
            #expect(agent.log.contains("inhibitor of \"game\""), "\(agent.log)")
        }
    }

    @Test("--secure: --not-when-fullscreen is refused at start, and a fullscreen window holds nothing")
    func secureRefuses() async throws {
        try await Sandbox.with { s in
            let film = try await s.window("create", "film")
            try await s.window("fullscreen", film)
            try await s.window("activate", film)
            try await s.x("xdotool", "key", "shift")
            let agent = try s.startAgent(["--secure", "--lock-after", "2s", "--not-when-fullscreen", "--locker", Script.locker])
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: 2000)
            #expect(agent.log.contains("--not-when-fullscreen: not followed, the agent runs with --secure"), "\(agent.log)")
        }
    }
}

/// `--corners` on a real Xvfb (640x480): the pointer moved with XTest, monitors made
/// with `xrandr --setmonitor`.
@Suite struct HotCornerIntegrationTests {
    @Test("the pointer resting in a + corner locks after the corner delay")
    func plusCornerLocks() async throws {
        try await Sandbox.with { s in
            try await s.window("pointer", "320,240")
            let agent = try s.startAgent(["--lock-after", "1h", "--corners", "000+", "--corner-delay", "1s", "--locker", Script.locker])
            try await agent.waitForLog(containing: "hot corners 000+")
            try await s.window("pointer", "639,479")
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: 1000)
            #expect(agent.log.contains("lock requested by the pointer in the bottom-right corner"), "\(agent.log)")
        }
    }

    @Test("a - corner holds the lock off while the pointer rests there, named in status; moved out, the lock comes a lock time later")
    func minusCornerHolds() async throws {
        try await Sandbox.with { s in
            try await s.window("pointer", "320,240")
            let agent = try await s.startControlledAgent(["--lock-after", "2s", "--corners", "-000", "--corner-delay", "500ms",
                                                          "--locker", Script.locker])
            try await s.window("pointer", "0,0")
            try await agent.waitForLog(containing: "inhibited by the pointer in the top-left corner")
            let held = try await s.inhibitors()
            #expect(held.first?["source"] as? String == "corner", "\(held)")
            try await s.waitUntil("the server idle to pass 3 s", every: .milliseconds(200)) { try await s.serverIdle() >= 3000 }
            #expect(!s.exists("lock.idle"), "locked with the pointer in a - corner\n\(agent.log)")
            try await s.window("pointer", "300,300")
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: 2000)
        }
    }

    @Test("two monitors side by side: the corner of each monitor counts, not only the whole screen's")
    func eachMonitorsCorners() async throws {
        try await Sandbox.with { s in
            try await s.x("xrandr", "--setmonitor", "left", "320/100x480/100+0+0", "none")
            try await s.x("xrandr", "--setmonitor", "right", "320/100x480/100+320+0", "none")
            try await s.window("pointer", "100,100")
            let agent = try s.startAgent(["--lock-after", "1h", "--corners", "000+", "--corner-delay", "1s", "--locker", Script.locker])
            try await agent.waitForLog(containing: "the corners of each monitor")
            // The left monitor's bottom-right corner, in the middle of the screen's bottom edge.
            try await s.window("pointer", "319,479")
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: 1000)
        }
    }
}
