import IdleCore
import Testing

extension Array where Element == Action {
    var cornerChecks: Int { filter { $0 == .checkPointerCorner }.count }
    var cornerHolds: [Inhibitor] {
        compactMap { if case .announce(.inhibited(let i)) = $0, i.source == .corner { i } else { nil } }
    }
}

@Suite("Hot corners: --corners, --corner-delay")
struct HotCornerTests {
    @Test("a + corner locks once the pointer has rested there for the corner delay, not a millisecond before")
    func plusCornerLocks() {
        var s = Story(flags: "--lock-after", "1h", "--corners", "000+", "--corner-delay", "2s")
        s.wait(for: .seconds(30))
        s.movePointer(to: .bottomRight, x: 639, y: 479)
        let stopped = s.now
        s.expectLock(1, exactlyAt: stopped + .seconds(2))
        #expect(s.actions.logs(containing: "lock requested by the pointer in the bottom-right corner").count == 1)
    }

    @Test("the pointer is asked once a rest: a moving pointer costs one check per corner delay, a resting one none")
    func oneCheckPerRest() {
        var s = Story(flags: "--lock-after", "1h", "--corners", "+000", "--corner-delay", "5s")
        // Moving for a minute, an event every 100 ms: the edge wakes at each check only.
        for _ in 0..<600 {
            s.advance(by: .ms(100))
            s.movePointer(to: nil, x: 300, y: 200)
        }
        let whileMoving = s.actions.cornerChecks
        #expect(whileMoving <= 12, "\(whileMoving) checks in a minute of motion")
        s.wait(for: .minutes(10))
        #expect(s.actions.cornerChecks == whileMoving + 1, "a rest is checked once")
        #expect(s.actions.lockerStarts == 0)
    }

    @Test("a - corner holds every stage off while the pointer rests there; moving it out lets the lock come a lock time later")
    func minusCornerHolds() {
        var s = Story(flags: "--lock-after", "10s", "--stage", "dim=6s:dim", "--corners", "-000", "--corner-delay", "1s")
        s.movePointer(to: .topLeft, x: 0, y: 0)
        s.wait(for: .minutes(5))
        #expect(s.actions.lockerStarts == 0)
        #expect(s.actions.commands(.stage(0)).isEmpty, "the dim stage fired while held")
        #expect(s.actions.cornerHolds.map(\.who) == ["the pointer in the top-left corner"])
        #expect(s.machine.stateName == "inhibited")
        s.movePointer(to: nil, x: 200, y: 200)
        s.wake()
        #expect(s.machine.inhibitors.isEmpty, "the hold outlived the pointer's rest")
        s.expectLock(1, exactlyAt: s.now + .seconds(10))
    }

    @Test("a - corner is seen before a stage sooner than the corner delay")
    func minusCornerBeforeEarlyStage() {
        var s = Story(flags: "--lock-after", "4s", "--corners", "0-00", "--corner-delay", "5s")
        s.movePointer(to: .topRight, x: 639, y: 0)
        s.wait(for: .minutes(1))
        #expect(s.actions.lockerStarts == 0)
    }

    @Test("after an unlock the same rest does not lock again; a new rest in the corner does")
    func noRelockLoop() {
        var s = Story(flags: "--lock-after", "1h", "--corners", "00+0", "--corner-delay", "1s")
        s.movePointer(to: .bottomLeft, x: 0, y: 479)
        s.wait(for: .seconds(2))
        #expect(s.actions.lockerStarts == 1)
        // The password is typed, the pointer untouched.
        s.wait(for: .seconds(5))
        s.input()
        s.lockerExits(.exited(0))
        s.wait(for: .minutes(1))
        #expect(s.actions.lockerStarts == 1, "locked again while the pointer rested where it was")
        // Moved away and back (another pixel of the corner): a new rest.
        s.movePointer(to: nil, x: 300, y: 300)
        s.wait(for: .seconds(2))
        s.movePointer(to: .bottomLeft, x: 1, y: 478)
        s.wait(for: .seconds(2))
        #expect(s.actions.lockerStarts == 2)
    }

    @Test("without --corners the pointer is never asked")
    func offCostsNothing() {
        var s = Story(flags: "--lock-after", "1m")
        for _ in 0..<100 {
            s.advance(by: .seconds(1))
            s.movePointer(to: .topLeft)
        }
        s.wait(for: .minutes(5))
        #expect(s.actions.cornerChecks == 0)
        #expect(s.actions.lockerStarts == 1)
    }

    @Test("--secure drops the - corners (nothing may hold the lock off) and keeps the + ones")
    func secureDropsHolds() throws {
        guard case .agent(let options) = try Invocation.parse(["--secure", "--corners", "+-0-", "--not-when-audio"]) else {
            Issue.record("not an agent invocation")
            return
        }
        #expect(options.config(locker: "x").corners?.corners.description == "+000")
        #expect(options.refusedBySecure == ["--not-when-audio", "the - corners of --corners +-0-"])
        var s = Story(flags: "--secure", "--lock-after", "10s", "--corners", "-000")
        s.movePointer(to: .topLeft)
        s.expectLock(1, exactlyAt: s.now + .seconds(10))
    }

    @Test("bad corner flags are usage errors that name the flag", arguments: [
        (["--corners", "00+"], "--corners: '00+' is not four of +, - and 0"),
        (["--corners", "00x+"], "--corners: '00x+' is not four of +, - and 0"),
        (["--corner-delay", "2s"], "--corner-delay needs --corners XXXX"),
        (["--corners", "+000", "--corner-size", "0"], "--corner-size: '0' is not a number of pixels from 1 to 4096"),
        (["--corners", "+000", "--corner-size", "ten"], "--corner-size: 'ten' is not a number of pixels"),
        (["--corners", "+000", "--corner-delay", "0"], "--corner-delay: the duration must be above zero"),
    ])
    func badFlags(_ flags: [String], _ message: String) {
        #expect {
            try Invocation.parse(flags)
        } throws: { error in
            (error as? UsageError)?.message.hasPrefix(message) == true
        }
    }
}
