import IdleCore
import Testing

@Suite("The locker rule, in one place: facts in, a verdict out")
struct LockerSupervisorTests {
    static let start = BoottimeInstant.hours(1)

    /// Both clocks at boottime `t`, with no suspend since `start` (monotonic 100 s behind).
    static func at(_ t: BoottimeInstant) -> Instant {
        Instant(monotonic: MonotonicInstant(t.sinceZero - .seconds(100)), boottime: t)
    }

    /// A supervisor whose locker started at `start`, the grab seen (or not) 10 ms later.
    static func running(covered: Bool?) -> LockerSupervisor {
        var supervisor = LockerSupervisor()
        _ = supervisor.starting(at: LockerSupervisorTests.at(start))
        if let covered {
            let probe = start + .ms(10)
            supervisor.probed(at: LockerSupervisorTests.at(probe))
            _ = supervisor.handle(.keyboardGrabbed(covered), at: LockerSupervisorTests.at(covered ? probe : start + .seconds(3)))
        }
        return supervisor
    }

    @Test("every way a locker can end, and what it means", arguments: [
        // (covered: true = grab seen, false = never seen in 3 s, nil = not yet known), fact, after, unlock?
        (Bool?.some(true), LockerFact.exited(0), Millis.seconds(30), true),
        (true, .exited(0), .ms(500), false),          // held, but returned within a second
        (nil, .exited(0), .ms(40), false),            // forked and returned (i3lock without -n)
        (false, .exited(0), .seconds(30), true),      // never grabbed, ran through the deadline: a custom locker
        (true, .exited(1), .seconds(2), false),       // i3lock that lost its grab
        (true, .exited(1), .hours(3), false),         // a crashed xsecurelock, hours later
        (true, .killed(signal: 9), .hours(1), false), // the OOM killer
        (true, .killed(signal: 15), .seconds(5), false),
        (nil, .failedToStart("not found"), .zero, false),
        (true, .endedUnseen, .minutes(5), false),      // adopted: its status cannot be read
    ])
    func verdicts(covered: Bool?, fact: LockerFact, after: Millis, unlock: Bool) {
        var supervisor = LockerSupervisorTests.running(covered: covered)
        let verdict = supervisor.handle(fact, at: LockerSupervisorTests.at(LockerSupervisorTests.start + after))
        if unlock {
            guard case .unlocked = verdict else { Issue.record("\(fact) after \(after): \(verdict)"); return }
            #expect(supervisor.state == .unlocked)
        } else {
            guard case .failed(_, let retryAt, _) = verdict else { Issue.record("\(fact) after \(after): \(verdict)"); return }
            #expect(retryAt == LockerSupervisorTests.start + after, "the first failure is retried at once")
            #expect(supervisor.isRetrying)
            #expect(supervisor.lastFailure != nil)
        }
    }

    @Test("retries after 1, 2, 4 … 60 s while the locker keeps failing")
    func backoff() {
        var supervisor = LockerSupervisor()
        var now = LockerSupervisorTests.start
        _ = supervisor.starting(at: LockerSupervisorTests.at(now))
        var delays: [Millis] = []
        for _ in 0..<10 {
            now += .ms(100)
            guard case .failed(_, let retryAt, _) = supervisor.handle(.exited(1), at: LockerSupervisorTests.at(now)) else { return }
            delays.append(retryAt - now)
            now = retryAt
            _ = supervisor.starting(at: LockerSupervisorTests.at(now))
        }
        #expect(delays == [0, 1, 2, 4, 8, 16, 32, 60, 60, 60].map { Millis.seconds($0) })
    }

    @Test("the count of attempts restarts once the locker has held the screen for 3 s; a probe past the deadline means not covering",
          arguments: [(Millis.seconds(1), Millis.seconds(1)), (.seconds(3), .zero), (.hours(1), .zero)])
    func coverAndCount(heldFor: Millis, retryIn: Millis) {
        var supervisor = LockerSupervisor()
        let t0 = LockerSupervisorTests.start
        _ = supervisor.starting(at: LockerSupervisorTests.at(t0))
        _ = supervisor.handle(.exited(1), at: LockerSupervisorTests.at(t0 + .ms(100)))
        #expect(supervisor.starting(at: LockerSupervisorTests.at(t0 + .ms(100))) == 2)
        #expect(supervisor.handle(.keyboardGrabbed(false), at: LockerSupervisorTests.at(t0 + .ms(110))) == .none)
        #expect(supervisor.handle(.keyboardGrabbed(true), at: LockerSupervisorTests.at(t0 + .ms(130))) == .covered(after: .ms(30)))
        // A grab seen may be another client's: i3lock that could not grab fails 2.3 s in,
        // and is retried with the growing delay; one that held for 3 s is retried at once.
        guard case .failed(_, let retryAt, _) = supervisor.handle(.exited(1), at: LockerSupervisorTests.at(t0 + .ms(130)) + heldFor) else {
            Issue.record("\(supervisor.state)")
            return
        }
        #expect(retryAt - (t0 + .ms(130) + heldFor) == retryIn)
    }

    @Test("a locker that never grabs is not covering once the deadline passes; then probed every 5 s")
    func notCovering() {
        var never = LockerSupervisor()
        _ = never.starting(at: LockerSupervisorTests.at(LockerSupervisorTests.start))
        never.probed(at: LockerSupervisorTests.at(LockerSupervisorTests.start + .seconds(3)))
        #expect(never.handle(.keyboardGrabbed(false), at: LockerSupervisorTests.at(LockerSupervisorTests.start + .seconds(3))) == .notCovering)
        #expect(never.nextProbe == LockerSupervisorTests.start + .seconds(8))
    }

    @Test("while a sleep waits on it, the probe runs every 10 ms")
    func hurriedProbe() {
        var supervisor = LockerSupervisor()
        _ = supervisor.starting(at: LockerSupervisorTests.at(LockerSupervisorTests.start))
        supervisor.probed(at: LockerSupervisorTests.at(LockerSupervisorTests.start + .ms(320)))
        #expect(supervisor.nextProbe(hurry: false) == LockerSupervisorTests.start + .ms(640))
        #expect(supervisor.nextProbe(hurry: true) == LockerSupervisorTests.start + .ms(330))
    }
}

@Suite("With no input at all the machine never sees activity")
struct NoPhantomActivityTests {
    @Test("server readings a millisecond or two off (both are cut to whole ms) are not activity")
    func roundingIsNotActivity() {
        // A dim stage with a resume command: phantom activity would run the resume
        // command and fire the dim stage again.
        var s = Story(flags: "--lock-after", "10m", "--stage", "dim=1m:dim", "--resume", "undim")
        s.wait(until: Story.at(.minutes(1)))
        #expect(s.actions.commands(.stage(0)) == ["dim"])
        for offset: Int64 in [1, 2, 1, 2] {
            s.advance(by: .seconds(20))
            // The counter read a millisecond or two short of the true idle time.
            s.wake(serverIdle: s.serverIdle - .ms(offset))
        }
        s.wait(until: Story.at(.minutes(10)))
        #expect(s.actions.logs(containing: "activity after").isEmpty, "\(s.actions.logs(containing: "activity after"))")
        #expect(s.actions.commands(.resume(0)).isEmpty)
        #expect(s.actions.commands(.stage(0)).count == 1, "dim fired once")
        #expect(s.actions.lockerStarts == 1, "the lock came at its time")
    }
}
