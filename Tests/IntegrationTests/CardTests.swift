import Foundation
import Testing

extension Sandbox {
    /// An agent with a control socket and this test's pcscd.
    func startCardAgent(_ arguments: [String], cards: SmartCards) async throws -> AgentProcess {
        let agent = try startAgent(arguments + ["--socket", socket], environment: cards.environment)
        try await IntegrationTests.waitUntil("the agent's socket to answer", context: { agent.log }) {
            guard agent.process.isRunning else { throw AgentExited(waitingFor: "its socket", exit: Exit(agent.process), log: agent.log) }
            return (try? await self.client("status").exit) == .exited(0)
        }
        return agent
    }

    /// The `card` object of status.
    func cardStatus() async throws -> [String: Any] { try await status()["card"] as? [String: Any] ?? [:] }

    /// Waits until status shows the first reader's card `state` (present or absent).
    func waitForCard(_ state: String, counts: Bool? = nil) async throws {
        try await waitUntil("status to show the card \(state)") {
            let readers = try await self.cardStatus()["readers"] as? [[String: Any]] ?? []
            guard let first = readers.first(where: { $0["name"] as? String == "Virtual PCD 00 00" }) else { return false }
            return first["card"] as? String == state && (counts == nil || first["counts"] as? Bool == counts)
        }
    }
}

/// `--lock-on-card-removal` with a real pcscd per test, vsmartcard's virtual reader
/// (vpcd) and card (vicc). Serialized: there is one pcscd socket per machine.
@Suite(.serialized) struct SmartCardTests {
    /// A locker that writes when it started (µs of the realtime clock, to set against
    /// the removal) and holds the screen until `unlock` appears.
    static let timedLocker = "date +%s%6N >> locker.started; " + Script.grabbingLocker()

    /// pcscd, an agent that locks on card removal, and vicc's card put in after its
    /// start (the reader seen empty first), which counts.
    func agentWithCard(_ s: Sandbox) async throws -> (SmartCards, AgentProcess) {
        let cards = try SmartCards(in: s)
        try await cards.start()
        let agent = try await s.startCardAgent(["--lock-after", "1h", "--lock-on-card-removal", "--locker", Self.timedLocker], cards: cards)
        try await s.waitForCard("absent")
        try await cards.insert()
        try await s.waitForCard("present", counts: true)
        return (cards, agent)
    }

    @Test("a card inserted after the start, taken out: the screen is locked within 500 ms; status and the log show it")
    func removalLocks() async throws {
        try await Sandbox.with { s in
            let (cards, agent) = try await agentWithCard(s)
            let removed = try await cards.remove()
            let started = try await s.waitForLines("locker.started")
            let startedAt = Double(started[0].trimmingCharacters(in: .whitespaces))! / 1_000_000
            let latency = Int((startedAt - removed.timeIntervalSince1970) * 1000)
            print("card removal to locker start: \(latency) ms")
            #expect(latency <= 500, "the locker started \(latency) ms after the card was taken out\n\(agent.log)")
            #expect(agent.log.contains("lock requested by the removal of the card from Virtual PCD 00 00"), "\(agent.log)")
            try await s.waitForCard("absent")
            let card = try await s.cardStatus()
            #expect(card["removal_locks"] as? Int == 1)
            #expect(card["lock_on_removal"] as? Bool == true)
            #expect(card["error"] is NSNull)
        }
    }

    @Test("a card the ATR list does not name: taken out, nothing locks")
    func unlistedCard() async throws {
        try await Sandbox.with { s in
            let cards = try SmartCards(in: s)
            try await cards.start()
            _ = try await s.startCardAgent(["--lock-after", "1h", "--lock-on-card-removal", "--card-atr", "3b00",
                                            "--locker", Self.timedLocker], cards: cards)
            try await cards.insert()
            try await s.waitForCard("present", counts: false)
            try await cards.remove()
            try await s.waitForCard("absent")
            // The lock would have been asked for in the same turn that changed the status.
            let status = try await s.status()
            #expect(status["state"] as? String == "active")
            #expect((status["card"] as? [String: Any])?["removal_locks"] as? Int == 0)
        }
    }

    @Test("pcscd stopped: an error in status and doctor, no lock; it comes back without the reader (as unplugged): the screen locks")
    func pcscdLostAndReaderGone() async throws {
        try await Sandbox.with { s in
            let (cards, agent) = try await agentWithCard(s)
            try await cards.stop()
            try await s.waitUntil("status to show pcscd's loss") { try await s.cardStatus()["error"] is String }
            #expect(try await s.status()["state"] as? String == "active", "pcscd's loss alone locked\n\(agent.log)")
            let doctor = try await s.client("doctor")
            #expect(doctor.stdout.contains("smart cards: NOT watched: pcscd"), "\(doctor.stdout)")
            #expect(agent.log.contains("a card taken out is not seen until pcscd is back"), "\(agent.log)")
            // The reader is gone when pcscd is back: the card that counted is no longer there.
            try await cards.remove()
            try cards.readerConfig(readers: false)
            try await cards.start()
            _ = try await s.waitForLines("locker.started")
            #expect(agent.log.contains("lock requested by the removal of the card from Virtual PCD 00 00"), "\(agent.log)")
            try await s.waitUntil("status to show pcscd back") { try await s.cardStatus()["error"] is NSNull }
            #expect((try await s.cardStatus()["readers"] as? [Any])?.isEmpty == true)
        }
    }

    @Test("the policy's lock-on-card-removal: no pcscd at the start is an error in the log; the user's --card-atr does not narrow it")
    func policy() async throws {
        try await Sandbox.with { s in
            try s.writePolicy("lock-on-card-removal\n")
            let cards = try SmartCards(in: s)
            // The user names a card that is never there, so that no removal would count.
            let agent = try await s.startCardAgent(["--lock-after", "1h", "--lock-on-card-removal", "--card-atr", "3b00",
                                                    "--locker", Self.timedLocker], cards: cards)
            try await agent.waitForLog(containing: "error: smart cards: pcscd is not running")
            try await cards.start()
            try await cards.insert()
            try await s.waitForCard("present", counts: true)
            try await cards.remove()
            _ = try await s.waitForLines("locker.started")
            let settings = try await s.status()["settings"] as? [[String: Any]] ?? []
            #expect(settings.contains { $0["name"] as? String == "lock-on-card-removal" && ($0["from"] as? String ?? "").hasPrefix("policy") }, "\(settings)")
        }
    }

    /// Another client of pcscd that takes every context it gives (pcscd 1.9.9 serves 200).
    static let contextHog = """
        import ctypes, time
        lib = ctypes.CDLL("libpcsclite.so.1")
        held = []
        while len(held) < 1000:
            context = ctypes.c_ulong()
            rv = lib.SCardEstablishContext(2, None, None, ctypes.byref(context))
            if rv != 0:
                break
            held.append(context)
        print("held", len(held), hex(rv & 0xffffffff), flush=True)
        time.sleep(600)
        """

    @Test("another client holds all of pcscd's contexts: status says pcscd refused a context, not that it is not running; under the policy's lock-on-card-removal the screen locks (fail closed)")
    func contextsTakenByAnother() async throws {
        try await Sandbox.with { s in
            try s.writePolicy("lock-on-card-removal\n")
            let cards = try SmartCards(in: s)
            try await cards.start()
            try s.write(Self.contextHog, to: "hog.py")
            _ = try s.startBackground("/usr/bin/python3", [s.path("hog.py")], output: "hog.out")
            try await IntegrationTests.waitUntil("the other client to hold pcscd's contexts", context: { s.contents("hog.out") }) { s.contents("hog.out").contains("held") }
            let agent = try s.startAgent(["--lock-after", "1h", "--locker", Self.timedLocker, "--socket", s.socket])
            let started = try await s.waitForLines("locker.started")
            let card = try await s.cardStatus()
            print("figure: \(s.contents("hog.out").trimmingCharacters(in: .whitespacesAndNewlines)); the agent's card watch: \(card["error"] ?? "none"); locked: \(started.count == 1)")
            #expect((card["error"] as? String ?? "").contains("refused a context"), "\(card)\n\(agent.log)")
            #expect(agent.log.contains("lock requested by the policy's lock-on-card-removal, as the card watch cannot run"), "\(agent.log)")
        }
    }

    @Test("the policy's lock-on-card-removal reads the system's pcscd: PCSCLITE_CSOCK_NAME pointing at the user's own daemon is ignored and said; the real card's removal locks")
    func policyIgnoresTheUsersPcscd() async throws {
        try await Sandbox.with { s in
            try s.writePolicy("lock-on-card-removal\n")
            let cards = try SmartCards(in: s)
            try await cards.start()
            // The user's own daemon, where a virtual card never leaves.
            let usersSocket = s.path("users-pcscd.comm")
            let agent = try s.startAgent(["--lock-after", "1h", "--locker", Self.timedLocker, "--socket", s.socket],
                                         environment: ["PCSCLITE_CSOCK_NAME": usersSocket])
            try await IntegrationTests.waitUntil("the agent's socket to answer", context: { agent.log }) { (try? await s.client("status").exit) == .exited(0) }
            try await s.waitForCard("absent")
            try await cards.insert()
            try await s.waitForCard("present", counts: true)
            let removed = try await cards.remove()
            let started = try await s.waitForLines("locker.started")
            let latency = Int((Double(started[0].trimmingCharacters(in: .whitespaces))! / 1_000_000 - removed.timeIntervalSince1970) * 1000)
            print("figure: the real card taken out under the policy, PCSCLITE_CSOCK_NAME the user's: locker after \(latency) ms")
            let changes = (try await s.status()["policy"] as? [String: Any])?["changes"] as? [String] ?? []
            #expect(changes.contains { $0.contains("PCSCLITE_CSOCK_NAME=\(usersSocket) ignored") }, "\(changes)\n\(agent.log)")
        }
    }
}
