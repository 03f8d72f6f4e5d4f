import Foundation
import Testing

/// The tests' XTEST jiggler through another master's devices (Harness/jiggler.py).
let jigglerScript: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .appending(path: "Harness/jiggler.py").path

/// How the agent was told not to count XTEST input, if at all.
enum XtestSetting: String, CaseIterable, Sendable {
    case none, flag, policyIgnoreXtest, policySecure

    var arguments: [String] { self == .flag ? ["--ignore-xtest"] : [] }
    var policy: String? {
        switch self {
        case .policyIgnoreXtest: "ignore-xtest\n"
        case .policySecure: "secure\n"
        case .none, .flag: nil
        }
    }
}

/// A software mouse jiggler (`xdotool mousemove_relative 1 0` and `xdotool key shift`
/// every second) against the agent. Every input the harness can make is XTEST input:
/// Xvfb's own devices ("Xvfb mouse", "Xvfb keyboard") never send any. So "real input"
/// under --ignore-xtest is Xephyr's: see `realInputStillCounts`.
@Suite struct JigglerTests {
    static let lockAfter = 3000

    @Test("a jiggler keeps the screen unlocked, unless XTEST input is ignored (--ignore-xtest, the policy's ignore-xtest or secure): then it locks at the lock time",
          arguments: XtestSetting.allCases)
    func jiggler(setting: XtestSetting) async throws {
        let lockAfter = Self.lockAfter
        try await Sandbox.with { s in
            if let policy = setting.policy { try s.writePolicy(policy) }
            // Read before the key goes out: xdotool returns late on a loaded machine (220 ms
            // under the whole suite), and a reading after it made the lock look early.
            let lastKey = ContinuousClock.now
            try await s.x("xdotool", "key", "shift")
            let agent = try s.startAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.locker] + setting.arguments)
            try await agent.waitForLog(containing: "started")
            _ = try s.startRepeating("xdotool mousemove_relative 1 0; xdotool key shift", every: "1", seconds: 12, output: "jiggles.out")
            try await s.waitUntil("the first jiggle") { s.contents("jiggles.out").contains("started") }
            let seen = try await s.waitForLock(within: .seconds(3 * lockAfter / 1000 + 1))
            let after = (ContinuousClock.now - lastKey).milliseconds
            print("figure (jiggler every 1 s, \(setting)): lock time \(lockAfter) ms; "
                  + (seen != nil ? "locked \(after) ms after the last key, \(after - lockAfter) ms late" : "never locked within \(after) ms"))
            if setting == .none {
                #expect(seen == nil, "XTEST input is input by default\n\(agent.log)")
            } else {
                #expect(seen != nil, "the jiggler kept the screen unlocked\n\(agent.log)")
                #expect(after >= lockAfter + earliestLock && after <= lockAfter + latestLock, "locked \(after) ms after the last key\n\(agent.log)")
                // Its events are never sent to the agent (raw input is selected from the real
                // devices only): the server's counter, reset by them, tells it once.
                #expect(agent.count(of: "or XTEST input such as xdotool's); ignoring it") == 1, "\(agent.log)")
            }
        }
    }

    /// Under --ignore-xtest raw input is selected from the real devices only: the server
    /// sends none of an XTEST flood's events, where the agent read (and looked up) each.
    @Test("under --ignore-xtest an XTEST flood reaches the agent not at all: it reads none of its events", arguments: [XtestSetting.flag, .policySecure])
    func xtestFloodIsNotSent(setting: XtestSetting) async throws {
        try await Sandbox.with { s in
            if let policy = setting.policy { try s.writePolicy(policy) }
            _ = try await s.startControlledAgent(["--lock-after", "1h", "--locker", "true"] + setting.arguments)
            // 400 XTEST motions (and 20 key taps) in a few requests' time, as a jiggler or x11vnc sends them.
            try await s.x("xdotool", Array(repeating: ["mousemove_relative", "--", "1", "0", "mousemove_relative", "--", "-1", "0"], count: 200).flatMap { $0 }
                + Array(repeating: ["key", "shift"], count: 20).flatMap { $0 })
            // Status after the flood, twice: events the first one's round trip read are
            // counted by the second.
            _ = try await s.status()
            let counts = try #require(try await s.status()["x_input"] as? [String: Any], "status has no x_input")
            #expect(counts["raw_events_read"] as? Int == 0, "the agent read XTEST events: \(counts)")
            #expect(counts["selections"] as? Int == 1, "listening changed after the start's selection: \(counts)")
        }
    }

    /// Real input on Xvfb: an Xephyr server in a window of the test's Xvfb turns XTEST
    /// input sent to that window into input of its own devices ("Xephyr virtual mouse"),
    /// as a real mouse would be. The agent watches Xephyr.
    @Test("with --ignore-xtest real input (Xephyr's own devices) still keeps the screen unlocked; a jiggler in the same server does not")
    func realInputStillCounts() async throws {
        let lockAfter = Self.lockAfter
        try await Sandbox.with { s in
            _ = try s.startBackground("/bin/sh", ["-c", "exec Xephyr -displayfd 3 -noreset -nolisten tcp -screen 320x240 3>xephyr.display"],
                                      output: "xephyr.log")
            try await s.waitUntil("Xephyr's display number") { s.contents("xephyr.display").hasSuffix("\n") }
            let nested = ":" + s.contents("xephyr.display").trimmingCharacters(in: .whitespacesAndNewlines)
            // The pointer over Xephyr's window (at the corner: there is no window manager).
            try await s.x("xdotool", "mousemove", "100", "100")
            let agent = try s.startAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.locker, "--ignore-xtest"],
                                         environment: ["DISPLAY": nested])
            try await agent.waitForLog(containing: "started")
            // A new master, and the mouse moved to it while the agent runs: raw input is
            // selected per device, and the selection follows the hierarchy (the new
            // master's XTEST devices stay unselected). (`xinput float` and a reattach
            // crash Xephyr 21.1.7.)
            for step in [["create-master", "second"], ["reattach", "Xephyr virtual mouse", "second pointer"]] {
                let result = try await s.run("xinput", step, environment: ["DISPLAY": nested])
                #expect(result.exit == .exited(0), "xinput \(step): \(result.stderr)")
            }
            _ = try s.startBackground("/bin/sh", ["-c", "for i in $(seq 12); do xdotool mousemove_relative 1 0; xdotool key shift; echo jiggle; sleep 1; done"],
                                      output: "jiggles.out", environment: ["DISPLAY": nested])
            // Two lock times of a user's real input, then none.
            var lastInput = ContinuousClock.now
            try await s.keepBusy(for: .milliseconds(2 * lockAfter), every: .milliseconds(300)) { i in
                lastInput = ContinuousClock.now
                return ["xdotool", "mousemove_relative", "--", i % 2 == 0 ? "3" : "-3", "0"]
            }
            #expect(!s.exists("lock.idle"), "locked while the user was at the mouse\n\(agent.log)")
            #expect(s.contents("jiggles.out").contains("jiggle"), "the jiggler did not run: \(s.contents("jiggles.out"))")
            let seen = try await s.waitForLock(within: .seconds(3 * lockAfter / 1000))
            let after = (ContinuousClock.now - lastInput).milliseconds
            print("figure (real input through Xephyr for \(2 * lockAfter) ms, then a jiggler alone, --ignore-xtest): lock time \(lockAfter) ms; "
                  + (seen != nil ? "locked \(after) ms after the last real input, \(after - lockAfter) ms late" : "never locked within \(after) ms"))
            #expect(seen != nil, "the jiggler kept the screen unlocked\n\(agent.log)")
            #expect(after >= lockAfter + earliestLock && after <= lockAfter + latestLock, "locked \(after) ms after the last real input\n\(agent.log)")
        }
    }

    /// `xinput create-master` after the agent's start: the new master's XTEST devices are
    /// not in the set the agent read at its start, only in the hierarchy's change.
    @Test("a master made after the start brings XTEST devices of its own: a jiggler through them does not keep it unlocked either")
    func newMastersXtestDevices() async throws {
        let lockAfter = Self.lockAfter
        try await Sandbox.with { s in
            // Read before the key goes out: xdotool returns late on a loaded machine (220 ms
            // under the whole suite), and a reading after it made the lock look early.
            let lastKey = ContinuousClock.now
            try await s.x("xdotool", "key", "shift")
            let agent = try s.startAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.locker, "--ignore-xtest", "--verbose"])
            try await agent.waitForLog(containing: "started")
            try await s.x("xinput", "create-master", "jiggle")
            let list = try await s.x("xinput", "list")
            let master = try #require(list.split(separator: "\n").first { $0.contains("jiggle pointer") }
                .flatMap { $0.split(separator: "=").last?.split(separator: "\t").first }.flatMap { Int($0) }, "\(list)")
            _ = try s.startBackground("python3", [jigglerScript, "\(master)", "1", "12"], output: "jiggles.out")
            try await s.waitUntil("the first jiggle") { s.contents("jiggles.out").contains("started") }
            let seen = try await s.waitForLock(within: .seconds(3 * lockAfter / 1000 + 1))
            let after = (ContinuousClock.now - lastKey).milliseconds
            print("figure (jiggler through a new master's XTEST devices, --ignore-xtest): lock time \(lockAfter) ms; "
                  + (seen != nil ? "locked \(after) ms after the last key, \(after - lockAfter) ms late" : "never locked within \(after) ms"))
            #expect(seen != nil, "the new master's jiggler kept the screen unlocked\n\(list)\n\(agent.log)")
            #expect(after >= lockAfter + earliestLock && after <= lockAfter + latestLock, "locked \(after) ms after the last key\n\(agent.log)")
        }
    }
}
