import Foundation
import Testing

/// How many times a process has blocked and been woken: each wake-up of the agent's
/// poll loop ends in one voluntary context switch.
func wakeUps(of pid: Int32) -> Int? {
    let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix("voluntary_ctxt_switches:") }
    return line.flatMap { Int($0.split(separator: "\t").last ?? "") }
}

extension Sandbox {
    /// The agent's wake-ups once it has settled (its start-up work done: the audit
    /// trail's first entries written to a journal busy with other tests, the buses'
    /// answers): no wake-up for 300 ms.
    func settledWakeUps(of agent: AgentProcess) async throws -> Int {
        var readings: [Int] = []
        try await waitUntil("the agent to settle", every: .milliseconds(100)) {
            readings.append(wakeUps(of: agent.pid) ?? -1)
            return readings.count >= 4 && Set(readings.suffix(4)).count == 1 && readings.last! >= 0
        }
        return try #require(wakeUps(of: agent.pid))
    }
}

/// The agent sleeps between deadlines and does not wake for every input event.
@Suite struct WakeUpTests {
    @Test("an idle agent does not wake up between deadlines")
    func idleAgentSleeps() async throws {
        try await Sandbox.with { s in
            try await s.x("xdotool", "key", "shift")
            let agent = try s.startAgent(["--lock-after", "1h", "--locker", "true"])
            try await agent.waitForLog(containing: "started")
            let before = try await s.settledWakeUps(of: agent)
            // The test's own xprintidle queries send the agent nothing.
            let idleAtStart = try await s.serverIdle()
            try await s.waitUntil("two more seconds of idleness", every: .milliseconds(200)) {
                try await s.serverIdle() >= idleAtStart + 2000
            }
            let after = try #require(wakeUps(of: agent.pid))
            #expect(after - before == 0, "the agent woke \(after - before) times while nothing happened\n\(agent.log)")
        }
    }

    @Test("a second of 100 Hz pointer motion wakes the agent only a few times", arguments: [false, true])
    func steadyMotion(ignoreScreensaverReset: Bool) async throws {
        try await Sandbox.with { s in
            let agent = try s.startAgent(["--lock-after", "1h", "--locker", "true"]
                                         + (ignoreScreensaverReset ? ["--ignore-screensaver-reset"] : []))
            try await agent.waitForLog(containing: "started")
            let before = try #require(wakeUps(of: agent.pid))
            // One xdotool: 100 motions 10 ms apart, like a mouse in use.
            let motions = Array(repeating: ["mousemove_relative", "1", "1", "sleep", "0.01"], count: 100).flatMap { $0 }
            try await s.x("xdotool", motions)
            let after = try #require(wakeUps(of: agent.pid))
            // The first event is enough: listening pauses after it (for at most 1 s with
            // --ignore-screensaver-reset) and the server's counter tells the rest. An agent
            // that woke per event batch would wake dozens of times.
            #expect(after - before <= 6, "the agent woke \(after - before) times for 100 motion events\n\(agent.log)")
        }
    }
}
