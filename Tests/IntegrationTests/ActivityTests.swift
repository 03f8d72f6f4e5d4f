import Foundation
import Testing

/// Input a user makes with XTest.
enum Input: String, CaseIterable, Sendable {
    case key, click, relativeMotion

    var command: [String] {
        switch self {
        case .key: ["xdotool", "key", "shift"]
        case .click: ["xdotool", "click", "1"]
        case .relativeMotion: ["xdotool", "mousemove_relative", "5", "5"]
        }
    }
}

/// What resets the server's idle counter without a raw input event.
enum ServerReset: String, CaseIterable, Sendable {
    case screensaverReset, pointerWarp

    func command(_ i: Int) -> [String] {
        switch self {
        case .screensaverReset: ["xset", "s", "reset"]
        case .pointerWarp: ["xdotool", "mousemove", "\(100 + i % 2 * 100)", "100"]
        }
    }
}

extension Sandbox {
    /// Acts like a user at work: runs `command(i)` every `interval` for `duration`, or
    /// until `stop` holds. Sleeping between inputs is the user's pace, not a wait.
    func keepBusy(for duration: Duration, every interval: Duration = .milliseconds(200),
                  until stop: () -> Bool = { false }, _ command: (Int) -> [String]) async throws {
        let end = ContinuousClock.now + duration
        var i = 0
        while ContinuousClock.now < end, !stop() {
            let argv = command(i)
            try await x(argv[0], argv.dropFirst().map { $0 })
            i += 1
            try await Task.sleep(for: interval)
        }
    }
}

@Suite struct ActivityTests {
    static let lockAfter = 1500

    @Test("keys, clicks and relative motion defer the lock until one lock time after the last input",
          arguments: Input.allCases, [false, true])
    func inputDefersTheLock(input: Input, ignoreScreensaverReset: Bool) async throws {
        let lockAfter = Self.lockAfter
        try await Sandbox.with { s in
            try await s.x("xdotool", "key", "shift")
            let agent = try s.startAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.locker]
                                         + (ignoreScreensaverReset ? ["--ignore-screensaver-reset"] : []))
            try await agent.waitForLog(containing: "started")
            try await s.keepBusy(for: .milliseconds(lockAfter * 5 / 2)) { _ in input.command }
            #expect(!s.exists("lock.idle"), "locked while the user was busy\n\(agent.log)")
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: lockAfter,
                                   case: "\(input)\(ignoreScreensaverReset ? ", --ignore-screensaver-reset" : "")")
        }
    }

    /// A key pressed and released back to back: the release reaches the agent while it
    /// switches listening off, and Xlib reads it into its queue during that request's
    /// flush, after the agent's drain. Nothing wakes the agent for it; it is drained at
    /// the next deadline and counted as input *then*, a whole pause after it happened.
    /// A race: it shows in most trials on a quiet machine (`swift test --filter
    /// eventArrivingAsListeningPauses`), in few while the rest of the suite loads the CPU.
    @Test("an event that arrives as the agent stops listening does not postpone the lock")
    func eventArrivingAsListeningPauses() async throws {
        let lockAfter = 2000
        var lateLocks: [Int] = []
        // Trials one after another, not in parallel: the race needs a quiet CPU. Stops at
        // the first late lock.
        for _ in 1...5 where lateLocks.isEmpty {
            try await Sandbox.with { s in
                try await s.x("xdotool", "key", "shift")
                let agent = try s.startAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.locker])
                try await agent.waitForLog(containing: "started")
                // More input 300 ms later (beyond the cross-check tolerance), then idleness.
                try await s.x("xdotool", "key", "--delay", "0", "a", "sleep", "0.3", "key", "shift")
                let idle = try await s.waitForNumber(in: "lock.idle")
                print("lock timing (stale event case): lock after \(lockAfter) ms, server idle at lock \(idle) ms")
                #expect(idle >= lockAfter + earliestLock, "locked early: server idle \(idle) ms")
                if idle > lockAfter + latestLock { lateLocks.append(idle - lockAfter) }
            }
        }
        // An XI2 event read by the flush of XISelectEvents was once left in Xlib's queue
        // and counted as input at the next deadline, postponing the lock by a lock time.
        #expect(lateLocks.isEmpty, "locks late by \(lateLocks) ms")
    }

    /// Listening pauses at the first input and later input is read off the server's
    /// counter at the next deadline, at the server's exact time, even within the 100 ms
    /// cross-check tolerance: the lock never comes before the idle time.
    @Test("input 80 ms after the input that paused listening still counts: the lock is not early")
    func inputJustAfterListeningPaused() async throws {
        let lockAfter = 2000
        try await Sandbox.with { s in
            try await s.x("xdotool", "key", "shift")
            let agent = try s.startAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.locker])
            try await agent.waitForLog(containing: "started")
            try await s.x("xdotool", "key", "shift", "sleep", "0.08", "key", "shift")
            let idle = try await s.waitForNumber(in: "lock.idle")
            print("lock timing (input within 100 ms case): lock after \(lockAfter) ms, server idle at lock \(idle) ms")
            #expect(idle <= lockAfter + latestLock, "\(agent.log)")
            #expect(idle >= lockAfter + earliestLock, "locked \(lockAfter - idle) ms before the idle time")
        }
    }

    @Test("screensaver resets and pointer warps count as activity by default", arguments: ServerReset.allCases)
    func serverResetsDeferTheLock(reset: ServerReset) async throws {
        let lockAfter = Self.lockAfter
        try await Sandbox.with { s in
            try await s.x("xdotool", "key", "shift")
            let agent = try s.startAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.locker])
            try await agent.waitForLog(containing: "started")
            try await s.keepBusy(for: .milliseconds(lockAfter * 5 / 2), reset.command)
            #expect(!s.exists("lock.idle"), "locked while a video player kept the screen on\n\(agent.log)")
            let idle = try await s.waitForNumber(in: "lock.idle")
            await expectLockOnTime(idleAtLock: idle, lockAfter: lockAfter, case: "\(reset)")
            // Once, not once per reset: a video player resets every few seconds.
            #expect(agent.count(of: "counting that as activity") == 1, "\(agent.log)")
        }
    }

    @Test("with --ignore-screensaver-reset, resets and warps do not defer the lock", arguments: ServerReset.allCases)
    func ignoredServerResets(reset: ServerReset) async throws {
        let lockAfter = Self.lockAfter
        try await Sandbox.with { s in
            let idleStart = ContinuousClock.now
            try await s.x("xdotool", "key", "shift")
            let agent = try s.startAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.locker,
                                          "--ignore-screensaver-reset"])
            try await agent.waitForLog(containing: "started")
            try await s.keepBusy(for: .milliseconds(lockAfter * 3), until: { s.exists("lock.idle") }, reset.command)
            let lockSeen = ContinuousClock.now - idleStart
            #expect(s.exists("lock.idle"), "the resets deferred the lock\n\(agent.log)")
            let idle = try await s.waitForNumber(in: "lock.idle")
            // The server's counter had just been reset: the agent did not wait for it.
            #expect(idle < lockAfter, "server idle \(idle) ms at the lock\n\(agent.log)")
            // Seen at most one reset interval (200 ms and the command) after it happened.
            #expect(lockSeen.milliseconds >= lockAfter + earliestLock
                    && lockSeen.milliseconds <= lockAfter + latestLock + 400,
                    "lock seen \(lockSeen.milliseconds) ms after the last input\n\(agent.log)")
            #expect(agent.count(of: "ignoring it (--ignore-screensaver-reset)") == 1, "\(agent.log)")
        }
    }

    @Test("notify, then input: the notifier is ended and the lock waits for a new idle period")
    func inputAfterNotifyCancelsTheLock() async throws {
        let lockAfter = 3000
        try await Sandbox.with { s in
            try await s.x("xdotool", "key", "shift")
            let agent = try s.startAgent(["--lock-after", "\(lockAfter)ms", "--locker", Script.locker,
                                          "--notify-before", "1s", "--notifier", "echo $$ >> notifier.pids; exec sleep 30"])
            let notifier = Int32(try await s.waitForNumber(in: "notifier.pids"))
            #expect(!s.exists("lock.idle"), "locked before the warning was over\n\(agent.log)")
            let inputAt = ContinuousClock.now
            try await s.x("xdotool", "key", "shift")
            try await s.waitUntil("the notifier (pid \(notifier)) to be ended") { !isAlive(notifier) }
            let idle = try await s.waitForNumber(in: "lock.idle")
            let lockSeen = (ContinuousClock.now - inputAt).milliseconds
            // A full lock time after the input, not at the time the warning announced.
            #expect(lockSeen >= lockAfter + earliestLock, "locked \(lockSeen) ms after the input\n\(agent.log)")
            await expectLockOnTime(idleAtLock: idle, lockAfter: lockAfter)
            #expect(s.lines("notifier.pids").count == 2, "the new idle period warns again\n\(agent.log)")
            #expect(agent.log.contains("activity after"), "\(agent.log)")
        }
    }
}
