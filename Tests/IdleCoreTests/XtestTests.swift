import IdleCore
import Testing

/// A software mouse jiggler (`xdotool mousemove_relative 1 0` every 2 s) goes through
/// XTEST. Under `--ignore-xtest` (or `--secure`) the edge drops its raw events, so the
/// machine sees what it is left with: the server's idle counter restarting without input.
@Suite("XTEST input (--ignore-xtest)")
struct XtestTests {
    /// What the machine sees of one jiggle: counted as input by default, a bare
    /// counter reset when the edge drops XTEST events.
    static func jiggle(_ s: inout Story, countsAsInput: Bool) {
        if countsAsInput { s.input() } else { s.screensaverReset() }
    }

    @Test("by default a jiggler keeps the screen unlocked (XTEST input is input)")
    func jigglerKeepsItUnlockedByDefault() {
        var s = Story(flags: "--lock-after", "5m")
        #expect(s.machine.config.xtestInputCounts)
        for _ in 0..<(15 * 30) {
            s.wait(for: .seconds(2))
            Self.jiggle(&s, countsAsInput: true)
        }
        #expect(s.actions.lockerStarts == 0)
    }

    @Test("with --ignore-xtest or --secure a jiggler does not keep it unlocked: it locks at the lock time",
          arguments: ["--ignore-xtest", "--secure"])
    func jigglerLocksAtTheLockTime(flag: String) {
        var s = Story(flags: "--lock-after", "5m", flag)
        #expect(!s.machine.config.xtestInputCounts)
        while s.now + .seconds(2) < Story.at(.minutes(5)) {
            s.wait(for: .seconds(2))
            Self.jiggle(&s, countsAsInput: false)
        }
        s.expectLock(1, exactlyAt: Story.at(.minutes(5)))
        #expect(s.machine.lastActivity == Story.origin.boottime)
        if flag == "--ignore-xtest" {
            #expect(s.actions.logs(containing: "ignoring it (--ignore-xtest").count == 1)
        }
    }

    @Test("with --ignore-xtest real input still counts; a jiggle inside the pause after it counts with it, then no more")
    func realInputStillCounts() {
        var s = Story(flags: "--lock-after", "5m", "--ignore-xtest")
        s.wait(until: Story.at(.minutes(2)))
        s.input()
        // Inside the pause after input (1 s) the server's counter is put down to input:
        // a jiggle there stretches the lock by that much at most.
        s.advance(by: .ms(500))
        Self.jiggle(&s, countsAsInput: false)
        while s.now + .seconds(2) < Story.at(.minutes(7) + .ms(500)) {
            s.wait(for: .seconds(2))
            Self.jiggle(&s, countsAsInput: false)
        }
        s.expectLock(1, exactlyAt: Story.at(.minutes(7) + .ms(500)))
    }

    @Test("--ignore-xtest refuses SimulateUserActivity as a screensaver reset, and says which flag")
    func simulateUserActivityRefused() {
        var s = Story(flags: "--lock-after", "5m", "--ignore-xtest")
        s.wait(until: Story.at(.seconds(8)))
        let answer = s.send(.reset(from: .dbus, by: "SimulateUserActivity from :1.9")).answer
        #expect(answer == .refused("only input counts as activity (--ignore-xtest)"))
        #expect(s.machine.idle(at: s.clock) == .seconds(8))
    }
}
