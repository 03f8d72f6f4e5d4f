import IdleCore
import Testing

/// Issue #20, item 4: a keyboard grab is the locker's proof only when it cannot be
/// another client's. X tells that some client holds the keyboard, never which one.
@Suite("A keyboard grab that is not the locker's: never locked")
struct ForeignGrabTests {
    static let start = LockerSupervisorTests.start
    static func at(_ t: Millis) -> Instant { LockerSupervisorTests.at(start + t) }

    /// A supervisor whose locker started at `start`, with the reading made just before.
    static func started(grabbedBefore: Bool) -> LockerSupervisor {
        var supervisor = LockerSupervisor()
        _ = supervisor.starting(at: at(.zero))
        let verdict = supervisor.handle(.grabs(GrabReading(grabbed: grabbedBefore, lockerRuns: false)), at: at(.zero))
        #expect(verdict == (grabbedBefore ? .grabHeldByOther([.keyboard], beforeStart: true) : LockerVerdict.none))
        return supervisor
    }

    /// The probe at `t` after the start, and its verdict.
    static func probe(_ supervisor: inout LockerSupervisor, at t: Millis, grabbed: Bool?, window: Bool? = nil) -> LockerVerdict {
        supervisor.probed(at: at(t))
        return supervisor.handle(.grabs(GrabReading(grabbed: grabbed, lockerWindowShown: window)), at: at(t))
    }

    @Test("a grab held before the locker started is never its cover, whatever the probes see; after the deadline only the 5 s re-probe")
    func grabBeforeStart() {
        var supervisor = ForeignGrabTests.started(grabbedBefore: true)
        #expect(supervisor.stateName == "locker-not-covering")
        #expect(!supervisor.covers)
        #expect(supervisor.keyboardHeldByOther)
        // Grabbed all along, a window of the locker showing or not (i3lock maps its window
        // before it tries to grab).
        for (t, window) in [(Millis.ms(10), Bool?.none), (.ms(20), true), (.ms(640), true), (.seconds(3), nil)] {
            #expect(ForeignGrabTests.probe(&supervisor, at: t, grabbed: true, window: window) == .none)
            #expect(!supervisor.covers)
        }
        #expect(supervisor.nextProbe == ForeignGrabTests.start + .seconds(8), "probing faster than every 5 s past the deadline")
        // i3lock gives up 2.3 s in: a failure, retried; the status keeps the cause.
        guard case .failed = supervisor.handle(.exited(1), at: ForeignGrabTests.at(.ms(2300))) else {
            Issue.record("\(supervisor.state)")
            return
        }
        #expect(supervisor.keyboardHeldByOther)
        #expect(supervisor.stateName == "locker-failing")
    }

    @Test("an exit 0 while another client held the keyboard: at once a failure, after the deadline an unlock (not covered)")
    func exitWhileHeldByOther() {
        var early = ForeignGrabTests.started(grabbedBefore: true)
        guard case .failed(.returnedAtOnce, _, _) = early.handle(.exited(0), at: ForeignGrabTests.at(.ms(1500))) else {
            Issue.record("\(early.state)")
            return
        }
        var late = ForeignGrabTests.started(grabbedBefore: true)
        _ = ForeignGrabTests.probe(&late, at: .seconds(3), grabbed: true)
        #expect(late.handle(.exited(0), at: ForeignGrabTests.at(.seconds(30))) == .unlocked(lockedFor: .seconds(30), covered: false))
        #expect(!late.keyboardHeldByOther)
    }

    @Test("once the other client lets go (the keyboard seen free), a grab is the locker's")
    func otherLetsGo() {
        var supervisor = ForeignGrabTests.started(grabbedBefore: true)
        #expect(ForeignGrabTests.probe(&supervisor, at: .ms(10), grabbed: true) == .none)
        #expect(ForeignGrabTests.probe(&supervisor, at: .ms(20), grabbed: false) == .none)
        #expect(!supervisor.keyboardHeldByOther)
        #expect(supervisor.stateName == "locking")
        #expect(ForeignGrabTests.probe(&supervisor, at: .ms(40), grabbed: true, window: true) == .covered(after: .ms(40)))
        #expect(supervisor.covers)
    }

    @Test("a free keyboard before the start: the grab seen is the locker's where its window shows, or where X cannot tell",
          arguments: [Bool?.none, true])
    func freeBeforeStart(window: Bool?) {
        var supervisor = ForeignGrabTests.started(grabbedBefore: false)
        #expect(supervisor.stateName == "locking")
        #expect(ForeignGrabTests.probe(&supervisor, at: .ms(10), grabbed: true, window: window) == .covered(after: .ms(10)))
        #expect(supervisor.stateName == "locked")
    }

    @Test("grabbed while no window of the locker shows: probed until the deadline (it may map late), then another client's")
    func noWindowOfTheLocker() {
        var supervisor = ForeignGrabTests.started(grabbedBefore: false)
        #expect(ForeignGrabTests.probe(&supervisor, at: .ms(10), grabbed: true, window: false) == .none)
        #expect(supervisor.stateName == "locking")
        #expect(!supervisor.keyboardHeldByOther, "said before the deadline")
        #expect(ForeignGrabTests.probe(&supervisor, at: .seconds(3), grabbed: true, window: false) == .grabHeldByOther([.keyboard], beforeStart: false))
        #expect(supervisor.stateName == "locker-not-covering")
        #expect(supervisor.keyboardHeldByOther)
        #expect(supervisor.nextProbe == ForeignGrabTests.start + .seconds(8))

        var late = ForeignGrabTests.started(grabbedBefore: false)
        #expect(ForeignGrabTests.probe(&late, at: .ms(10), grabbed: true, window: false) == .none)
        #expect(ForeignGrabTests.probe(&late, at: .ms(20), grabbed: true, window: true) == .covered(after: .ms(20)),
                "a locker that grabs first and maps its window after")
    }

    @Test("an adopted locker has no reading before its start: today's rule, with the window where X tells it")
    func adopted() {
        var supervisor = LockerSupervisor()
        _ = supervisor.handle(.adopted, at: ForeignGrabTests.at(.zero))
        #expect(supervisor.handle(.keyboardGrabbed(true), at: ForeignGrabTests.at(.zero)) == .covered(after: .zero))
    }
}

@Suite("The machine with another client on the keyboard")
struct ForeignGrabMachineTests {
    @Test("the keyboard is looked at before the locker starts")
    func probedBeforeTheStart() {
        var s = Story(flags: "--lock-after", "10m")
        let start = s.wait(until: Story.at(.minutes(10)))
        let probe = start.firstIndex(of: .probeGrabs)
        let run = start.firstIndex { if case .run(.locker, _, _) = $0 { true } else { false } }
        #expect(probe != nil && run != nil && probe! < run!, "\(start)")
    }

    @Test("a menu holds the keyboard at the lock time: never locked, no LockedHint, the other client named in log, events and audit; locked once it lets go")
    func menuHoldsTheKeyboard() {
        var s = Story(flags: "--lock-after", "10m", "--on-unlock", "unlock-hook")
        s.keyboardHeldByOther = true
        s.lockerWindowShown = true  // i3lock's window shows while it tries to grab
        var all = s.wait(until: Story.at(.minutes(10)))
        #expect(s.machine.stateName == "locker-not-covering")
        #expect(all.contains(.announce(.grabHeldByOther(.keyboard, beforeStart: true))))
        #expect(all.logs(.error).contains { $0.contains("another client holds the keyboard (held when the locker started)") },
                "\(all.logs(.error))")
        #expect(AuditRecord.of(.grabHeldByOther(.keyboard, beforeStart: true))?.event == "locker-failure")
        let status = JSONValue.object(s.machine.statusFields(at: s.clock, lockerPid: 42))
        #expect(status["locker"]?["covers_screen"] == .bool(false))
        #expect(status["locker"]?["keyboard_held_by_other"] == .bool(true))
        #expect(HumanText.status(status).contains("another client holds the keyboard"), "\(HumanText.status(status))")
        // i3lock gives up; the retries meet the same grab.
        for _ in 0..<4 {
            all += s.wait(for: .ms(2300))
            all += s.lockerExits(.exited(1))
            all += s.wakeAtDeadline()
        }
        #expect(s.actions.lockerStarts == 5)
        #expect(!s.actions.contains { if case .announce(.locked) = $0 { true } else { false } }, "announced locked")
        #expect(!s.actions.contains(.setLockedHint(true)), "LockedHint set")
        #expect(!s.machine.supervisor.covers)
        let failures = s.actions.compactMap { if case .announce(.lockerFailed(_, let reason, _)) = $0 { reason } else { nil } }
        #expect(failures.count == 4 && failures.allSatisfy { $0.hasSuffix("(another client holds the keyboard)") }, "\(failures)")
        let failing = JSONValue.object(s.machine.statusFields(at: s.clock, lockerPid: nil))
        #expect(failing["state"] == .string("locker-failing") || failing["state"] == .string("locker-not-covering"))
        #expect(failing["locker"]?["keyboard_held_by_other"] == .bool(true))

        // The menu closes: the next start finds the keyboard free, and the lock holds.
        s.keyboardHeldByOther = false
        s.wait(for: .ms(2300))
        s.lockerExits(.exited(1))
        s.wait(for: .minutes(1))
        #expect(s.machine.supervisor.covers)
        #expect(s.actions.contains(.setLockedHint(true)))
        #expect(!s.machine.supervisor.keyboardHeldByOther)
    }

    // Issue #28, row 2: the pointer grab, as the keyboard's.
    @Test("a client holds only the pointer at the lock time: never locked, even with the keyboard grabbed (a locker that grabs only the keyboard); the pointer named in log, events, audit, status and doctor; locked once it lets go")
    func pointerHeldByOther() {
        var s = Story(flags: "--lock-after", "10m", "--on-unlock", "unlock-hook")
        s.pointerHeldByOther = true
        s.lockerWindowShown = true
        var all = s.wait(until: Story.at(.minutes(10)))
        #expect(s.machine.stateName == "locker-not-covering")
        #expect(all.contains(.announce(.grabHeldByOther(.pointer, beforeStart: true))))
        #expect(!all.contains(.announce(.grabHeldByOther(.keyboard, beforeStart: true))))
        #expect(all.logs(.error).contains { $0.contains("another client holds the pointer (held when the locker started)") },
                "\(all.logs(.error))")
        let audit = AuditRecord.of(.grabHeldByOther(.pointer, beforeStart: true))
        #expect(audit?.event == "locker-failure" && audit?.message.hasPrefix("another client holds the pointer") == true)
        #expect(Announcement.grabHeldByOther(.pointer, beforeStart: true).json["event"] == .string("pointer-held-by-other"))
        // The probes see the keyboard grabbed (the locker's): still not its cover.
        all += s.wait(for: .seconds(10))
        #expect(!all.contains { if case .announce(.locked) = $0 { true } else { false } }, "announced locked")
        #expect(!s.machine.supervisor.covers)
        let status = JSONValue.object(s.machine.statusFields(at: s.clock, lockerPid: 42))
        #expect(status["locker"]?["covers_screen"] == .bool(false))
        #expect(status["locker"]?["pointer_held_by_other"] == .bool(true))
        #expect(status["locker"]?["keyboard_held_by_other"] == .bool(false))
        #expect(HumanText.status(status).contains("NOT covering the screen: another client holds the pointer"), "\(HumanText.status(status))")
        // i3lock, which needs both grabs, gives up: the failure names the pointer.
        let failed = s.lockerExits(.exited(1))
        let reasons = failed.compactMap { if case .announce(.lockerFailed(_, let reason, _)) = $0 { reason } else { nil } }
        #expect(reasons.first?.hasSuffix("(another client holds the pointer)") == true, "\(reasons)")
        var facts = DoctorFacts()
        facts.status = JSONValue.object(s.machine.statusFields(at: s.clock, lockerPid: nil))
        let report = Doctor.diagnose(facts)
        #expect(report.text.contains("PROBLEM  pointer: another program holds the pointer grab: the locker cannot grab it"), "\(report.text)")
        #expect(report.text.contains("PROBLEM  locker: runs, but another program holds the pointer"), "\(report.text)")
        #expect(!s.actions.contains(.setLockedHint(true)), "LockedHint set")

        // The drag ends; the locker started meanwhile gives up (a grab it took would not
        // be told from the other client's); the next start finds both free, and the lock holds.
        s.pointerHeldByOther = false
        s.wait(for: .ms(2300))
        s.lockerExits(.exited(1))
        s.wait(for: .minutes(1))
        #expect(s.machine.supervisor.covers)
        #expect(s.machine.supervisor.heldByOther.isEmpty)
        #expect(s.actions.contains(.setLockedHint(true)))
    }

    @Test("doctor takes the agent's word: the keyboard named, the locker not blamed")
    func doctorNamesTheGrab() {
        var s = Story(flags: "--lock-after", "10m")
        s.keyboardHeldByOther = true
        s.wait(until: Story.at(.minutes(10) + .ms(2300)))
        s.lockerExits(.exited(1))
        var facts = DoctorFacts()
        facts.display = ":0"
        facts.lockerCommand = "i3lock -n"
        facts.lockerProgram = "i3lock"
        facts.lockerPath = "/usr/bin/i3lock"
        facts.status = JSONValue.object(s.machine.statusFields(at: s.clock, lockerPid: nil))
        let report = Doctor.diagnose(facts)
        #expect(report.text.contains("PROBLEM  keyboard: another program holds the keyboard grab: the locker cannot grab it"), "\(report.text)")
        #expect(report.text.contains("what to do: close the menu"), "\(report.text)")
        #expect(!report.text.contains("run the locker command by hand"), "\(report.text)")
        #expect(!report.lockWouldHappen)
    }
}
