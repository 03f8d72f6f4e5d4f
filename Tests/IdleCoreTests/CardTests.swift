import IdleCore
import Testing

/// The ATR of vsmartcard's vicc, the tests' card.
let viccATR = "3b951381018073ff01000b"
let otherATR = "3b8f8001804f0ca000000306030001000000006a"

func reader(_ name: String = "Virtual PCD 00 00", atr: String? = viccATR, events: Int = 1) -> CardReader {
    CardReader(name: name, atr: atr.map { try! CardATR(hex: $0) }, events: events)
}

extension Array where Element == Action {
    var cardRemovals: [String] {
        compactMap { if case .announce(.cardRemoved(let reader, _, true)) = $0 { reader } else { nil } }
    }
}

extension Story {
    var cardStatus: JSONValue {
        JSONValue.object(machine.statusFields(at: Instant(monotonic: .zero, boottime: now), lockerPid: nil))["card"] ?? .null
    }
}

@Suite("Lock on smart card removal")
struct CardTests {
    @Test("a card present at start, taken out, locks at once; status counts the removal lock")
    func removalLocks() {
        var s = Story(flags: "--lock-after", "1h", "--lock-on-card-removal")
        #expect(s.send(.cards(.readers([reader()]))).lockerStarts == 0)
        #expect(s.cardStatus["readers"]?[0]?["card"]?.string == "present")
        #expect(s.cardStatus["readers"]?[0]?["counts"]?.bool == true)
        s.wait(for: .seconds(30))
        let removed = s.send(.cards(.readers([reader(atr: nil, events: 2)])))
        #expect(removed.lockerStarts == 1)
        #expect(removed.cardRemovals == ["Virtual PCD 00 00"])
        #expect(removed.logs(.info).contains { $0.contains("the removal of the card from Virtual PCD 00 00") })
        #expect(s.cardStatus["removal_locks"]?.integer == 1)
        #expect(s.cardStatus["lock_on_removal"]?.bool == true)
        #expect(s.cardStatus["error"] == .null)
        #expect(s.cardStatus["readers"]?[0]?["card"]?.string == "absent")
    }

    @Test("a removal of a card that was never there is nothing; a card inserted since the start counts")
    func neverThere() {
        var s = Story(flags: "--lock-after", "1h", "--lock-on-card-removal")
        s.send(.cards(.readers([reader(atr: nil, events: 0), reader("Virtual PCD 00 01", atr: nil, events: 0)])))
        #expect(s.send(.cards(.readers([reader(atr: nil, events: 0)]))).lockerStarts == 0, "a reader without a card went: nothing")
        #expect(s.send(.cards(.readers([reader(events: 1)]))).lockerStarts == 0)
        #expect(s.send(.cards(.readers([reader(atr: nil, events: 2)]))).lockerStarts == 1)
    }

    @Test("with --card-atr only the cards listed count")
    func atrList() {
        var s = Story(flags: "--lock-after", "1h", "--lock-on-card-removal", "--card-atr", "3B:95:13:81:01:80:73:FF:01:00:0B, 3b00")
        s.send(.cards(.readers([reader(atr: otherATR), reader("Virtual PCD 00 01")])))
        #expect(s.cardStatus["readers"]?[0]?["counts"]?.bool == false)
        #expect(s.cardStatus["readers"]?[1]?["counts"]?.bool == true)
        let other = s.send(.cards(.readers([reader(atr: nil, events: 2), reader("Virtual PCD 00 01")])))
        #expect(other.lockerStarts == 0, "a card not listed was taken out")
        #expect(other.contains(.announce(.cardRemoved(reader: "Virtual PCD 00 00", atr: otherATR, locks: false))))
        #expect(s.send(.cards(.readers([reader(atr: nil, events: 2), reader("Virtual PCD 00 01", atr: nil, events: 2)]))).lockerStarts == 1)
    }

    @Test("a card that goes and comes back within the merge window while locked is one removal: one lock, one announcement")
    func blipIsOneEvent() {
        var s = Story(flags: "--lock-after", "1h", "--lock-on-card-removal")
        s.lockerGrabsKeyboard = true
        s.send(.cards(.readers([reader()])))
        var all: [Action] = []
        all += s.send(.cards(.readers([reader(atr: nil, events: 2)])))
        s.advance(by: .ms(100))
        all += s.send(.cards(.readers([reader(events: 3)])))
        s.advance(by: .ms(100))
        all += s.send(.cards(.readers([reader(atr: nil, events: 4)])))
        s.advance(by: .ms(100))
        all += s.send(.cards(.readers([reader(events: 5)])))
        #expect(all.cardRemovals.count == 1)
        #expect(all.lockerStarts == 1)
        #expect(s.cardStatus["removal_locks"]?.integer == 1)
        // Unlocked with the card in: a removal now is a new one, however soon.
        s.advance(by: .seconds(2))
        s.lockerExits(.exited(0))
        let again = s.send(.cards(.readers([reader(atr: nil, events: 6)])))
        #expect(again.lockerStarts == 1, "a removal after the unlock must lock")
        #expect(s.cardStatus["removal_locks"]?.integer == 2)
    }

    @Test("a removal the locker's failure left unlocked is never merged away")
    func blipWhileUnlockedLocks() {
        var s = Story(flags: "--lock-after", "1h", "--lock-on-card-removal")
        s.send(.cards(.readers([reader()])))
        #expect(s.send(.cards(.readers([reader(atr: nil, events: 2)]))).lockerStarts == 1)
        s.advance(by: .ms(50))
        s.lockerExits(.exited(0))  // too soon to have held the screen: a failure, retried with backoff
        s.send(.cards(.readers([reader(events: 3)])))
        s.advance(by: .ms(50))
        let second = s.send(.cards(.readers([reader(atr: nil, events: 4)])))
        // Merged (no new announcement) only because the lock of the first is still in force.
        #expect(s.machine.lockerActive)
        #expect(second.cardRemovals.isEmpty)
    }

    @Test("pcscd's event counter tells a removal and return between two reports: that locks")
    func counterJump() {
        var s = Story(flags: "--lock-after", "1h", "--lock-on-card-removal")
        s.send(.cards(.readers([reader(events: 7)])))
        #expect(s.send(.cards(.readers([reader(events: 8)]))).lockerStarts == 0, "one event, the card still there: no removal")
        #expect(s.send(.cards(.readers([reader(events: 10)]))).lockerStarts == 1)
    }

    @Test("a card swapped for another between two reports was taken out")
    func swapped() {
        var s = Story(flags: "--lock-after", "1h", "--lock-on-card-removal")
        s.send(.cards(.readers([reader(events: 1)])))
        #expect(s.send(.cards(.readers([reader(atr: otherATR, events: 1)]))).lockerStarts == 1)
    }

    @Test("a reader unplugged with a card that counts locks; one without a card does not")
    func readerUnplugged() {
        var s = Story(flags: "--lock-after", "1h", "--lock-on-card-removal")
        s.send(.cards(.readers([reader(), reader("Yubico YubiKey 00 00", atr: nil)])))
        #expect(s.send(.cards(.readers([reader()]))).lockerStarts == 0)
        let gone = s.send(.cards(.readers([])))
        #expect(gone.lockerStarts == 1)
        #expect(gone.cardRemovals == ["Virtual PCD 00 00"])
        #expect(s.cardStatus["readers"]?.array?.isEmpty == true)
    }

    @Test("pcscd lost: an error in status, no lock; back with the card gone locks, back with it there does not")
    func pcscdLost() {
        var s = Story(flags: "--lock-after", "1h", "--lock-on-card-removal")
        s.send(.cards(.readers([reader(events: 5)])))
        let lost = s.send(.cards(.unavailable("pcscd went away")))
        #expect(lost.lockerStarts == 0)
        #expect(lost.contains(.announce(.cardWatch(error: "pcscd went away"))))
        #expect(lost.logs(.warning).contains { $0.contains("pcscd went away") })
        #expect(s.cardStatus["error"]?.string == "pcscd went away")
        #expect(s.send(.cards(.unavailable("pcscd went away"))).isEmpty, "said once")
        // Back: its event counter starts again; the same card there is no removal.
        let back = s.send(.cards(.readers([reader(events: 0)])))
        #expect(back.lockerStarts == 0)
        #expect(back.contains(.announce(.cardWatch(error: nil))))
        #expect(s.cardStatus["error"] == .null)
        s.send(.cards(.unavailable("pcscd went away")))
        #expect(s.send(.cards(.readers([reader(atr: nil, events: 0)]))).lockerStarts == 1, "taken out while pcscd was away")
    }

    @Test("the policy's lock-on-card-removal: a lost pcscd is an error in the log, and the user's ATR list does not narrow it")
    func policy() throws {
        let turnedOn = try #require(try agentOptions([], [policyFile: "lock-on-card-removal\n"]))
        #expect(turnedOn.lockOnCardRemoval)
        #expect(turnedOn.policy?.changes.contains { $0.contains("lock-on-card-removal") } == true)
        let options = try #require(try agentOptions(["--lock-on-card-removal", "--card-atr", otherATR],
                                                    [policyFile: "lock-on-card-removal\n", userConfig: "lock-after 1h\n"]))
        #expect(options.lockOnCardRemoval)
        #expect(options.cardATRs == nil)
        #expect(options.origins["--lock-on-card-removal"] == .policy(path: policyFile))
        #expect(options.policy?.changes.contains { $0.contains("card-atr") } == true)
        var s = Story(options.config(locker: "lock-screen"))
        s.send(.cards(.readers([reader()])))
        // Fail closed: the admin asked that a removal lock, and none can be seen now.
        let lost = s.send(.cards(.unavailable("no pcscd")))
        #expect(lost.logs(.error).contains { $0.contains("no pcscd") })
        #expect(lost.lockerStarts == 1, "the policy's card watch cannot run, and nothing locked")
        #expect(s.send(.cards(.unavailable("no pcscd"))).lockerStarts == 0, "once per outage")
        let pinned = try #require(try agentOptions([], [policyFile: "lock-on-card-removal\ncard-atr \(viccATR)\n"]))
        #expect(pinned.cardATRs == [try CardATR(hex: viccATR)])
    }

    @Test("bad --card-atr values are named; in the policy a bad one makes the agent secure")
    func badATR() throws {
        #expect(usageError(["--lock-on-card-removal", "--card-atr", "3b9z"], [:])?.contains("--card-atr: '3b9z'") == true)
        #expect(usageError(["--lock-on-card-removal", "--card-atr", "3b9"], [:])?.contains("--card-atr") == true)
        #expect(usageError(["--lock-on-card-removal", "--card-atr", ""], [:])?.contains("--card-atr") == true)
        #expect(usageError(["--card-atr", viccATR], [:]) == "--card-atr needs --lock-on-card-removal")
        let broken = try #require(try agentOptions([], [policyFile: "lock-on-card-removal\ncard-atr zz\n"]))
        #expect(broken.secure)
        #expect(broken.policy?.errors.first?.contains("card-atr: 'zz'") == true)
        #expect(broken.lockOnCardRemoval)
        let fromFile = try #require(try agentOptions([], [userConfig: "lock-on-card-removal\ncard-atr nope\n"]))
        #expect(fromFile.configProblems.first?.description.contains("card-atr") == true)
    }

    @Test("off: reports are ignored and status says so")
    func off() {
        var s = Story(flags: "--lock-after", "1h")
        s.send(.cards(.readers([reader()])))
        #expect(s.send(.cards(.readers([]))).lockerStarts == 0)
        #expect(s.cardStatus["lock_on_removal"]?.bool == false)
        #expect(s.cardStatus["removal_locks"]?.integer == 0)
    }
}

@Suite("Doctor on smart cards")
struct CardDoctorTests {
    @Test("a lost pcscd is a warning naming the policy; readers and cards are listed")
    func findings() {
        var s = Story(flags: "--lock-after", "1h", "--lock-on-card-removal")
        s.send(.cards(.readers([reader()])))
        var facts = DoctorFacts()
        facts.status = .object(s.machine.statusFields(at: Instant(monotonic: .zero, boottime: s.now), lockerPid: nil))
        let ok = Doctor.diagnose(facts).findings.filter { $0.check == "smart cards" }
        #expect(ok.map(\.level) == [.ok])
        #expect(ok.first?.detail.contains("Virtual PCD 00 00: card \(viccATR) (its removal locks)") == true)
        #expect(HumanText.status(facts.status!).contains("smart cards: Virtual PCD 00 00: card \(viccATR) (its removal locks); 0 removal locks so far"))
        s.send(.cards(.unavailable("pcscd is not running (no service)")))
        facts.status = .object(s.machine.statusFields(at: Instant(monotonic: .zero, boottime: s.now), lockerPid: nil))
        let lost = Doctor.diagnose(facts).findings.filter { $0.check == "smart cards" }
        #expect(lost.map(\.level) == [.warning])
        #expect(lost.first?.detail.contains("pcscd is not running") == true)
    }
}
