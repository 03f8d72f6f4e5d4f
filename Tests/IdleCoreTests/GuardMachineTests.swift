import IdleCore
import Testing

/// The guard's decisions, with time passed in: what makes a session unguarded, when the
/// guard acts, and how its locker is judged and handed over.
struct GuardStory {
    var machine: GuardMachine
    var now = MonotonicInstant.seconds(100)
    let session = GuardedSession(id: "c2", uid: 1000, userName: "alice", display: ":0", active: true)
    let agent = VerifiedAgent(pid: 4242, executable: "/usr/bin/xidlelock")
    /// The agent's loop answers the guard's questions at once (a live agent); false: it
    /// never does (its loop waits on a grabbed X server, or was patched or frozen).
    var answering = true

    init(_ settings: GuardSettings = GuardSettings(onAgentLost: .lock, agentGrace: .seconds(10))) {
        machine = GuardMachine(settings: settings)
    }

    @discardableResult
    mutating func send(_ event: GuardEvent) -> [GuardAction] { machine.handle(event, at: now) }

    /// Moves time on, telling the machine at each deadline on the way, as the edge does.
    @discardableResult
    mutating func wait(_ span: Millis) -> [GuardAction] {
        let end = now + span
        var actions: [GuardAction] = []
        while let due = machine.nextDeadline, due <= end {
            now = Swift.max(now, due)
            let tick = machine.handle(.tick, at: now)
            actions += tick
            guard answering else { continue }
            for case .askAlive(let id) in tick { actions += machine.handle(.agentAnswered(session: id), at: now) }
        }
        now = end
        return actions
    }

    /// A session seen, its agent verified.
    mutating func guarded() {
        send(.sessionSeen(session))
        send(.agentVerified(session: session.id, agent: agent))
    }

    var state: GuardSessionState? { machine.sessions[session.id] }
}

extension Array where Element == GuardAction {
    var questions: Int { filter { if case .askAlive = $0 { true } else { false } }.count }
    var displayChecks: Int { filter { if case .checkDisplay = $0 { true } else { false } }.count }
    var lockerStarts: Int { filter { if case .startLocker = $0 { true } else { false } }.count }
    var logoffs: Int { filter { if case .terminateSession = $0 { true } else { false } }.count }
    var audits: [AuditRecord] { compactMap { if case .audit(let a) = $0 { a } else { nil } } }
}

@Suite("The guard's decisions")
struct GuardMachineTests {
    @Test("a verified agent that answers guards its session: one question per 10 idle minutes, nothing else done however long")
    func guardedIsQuiet() {
        var s = GuardStory()
        s.guarded()
        #expect(s.state?.guarded == true)
        #expect(s.machine.nextDeadline == s.now + .minutes(10))
        let fiveHours = s.wait(.hours(5))
        #expect(fiveHours.questions == 30)
        #expect(fiveHours.count == 30, "\(fiveHours)")
        #expect(s.state?.guarded == true)
    }

    @Test("proof of life: the agent says its lock is due in 8 s; with no word since, the guard asks 0.5 s after; no answer within 1 s is a loss, and the guard acts agent-grace after the lock was due")
    func lockDueUnanswered() {
        var s = GuardStory(GuardSettings(onAgentLost: .lock, agentGrace: .seconds(2)))
        s.guarded()
        s.answering = false
        s.send(.agentSaysLockDue(session: "c2", in: .seconds(8)))
        let dueAt = s.now + .seconds(8)
        #expect(s.wait(.ms(8_499)).isEmpty)
        #expect(s.wait(.ms(1)).questions == 1)
        #expect(s.state?.answerPending == true)
        let lost = s.wait(.ms(1_000))
        #expect(lost.audits.map(\.event) == ["guard-agent-lost"])
        #expect(lost.audits.first?.message.contains("did not answer in 1s") == true, "\(lost)")
        #expect(s.state?.guarded == false)
        // Agent-grace from the due time (8 s + 2 s), not from the loss (9.5 s + 2 s);
        // the agent's loop did not answer, so the X server is asked first.
        #expect(s.state?.actAt == dueAt + .seconds(2))
        let acted = s.wait(.ms(500))
        #expect(acted.displayChecks == 1 && acted.lockerStarts == 0, "\(acted)")
        #expect(s.send(.displayChecked(session: "c2", answers: true, detail: "")).lockerStarts == 1)
    }

    @Test("proof of life: a locked agent or one whose lock is held is asked only every 10 minutes; its answer or any line of it is proof")
    func lockedOrHeldIsAskedRarely() {
        var s = GuardStory()
        s.guarded()
        s.send(.agentSaysLockDue(session: "c2", in: .seconds(8)))
        s.wait(.seconds(7))
        s.send(.agentReported(session: "c2", locked: true))
        #expect(s.wait(.ms(9 * 60_000)).questions == 0)
        #expect(s.wait(.minutes(1)).questions == 1)
        s.send(.agentSaysLockDue(session: "c2", in: nil))
        #expect(s.wait(.ms(9 * 60_000 + 59_999)).questions == 0)
        #expect(s.state?.guarded == true)
    }

    @Test("proof of life: an X server that does not answer (grabbed, hung) logs the session off instead of a locker that could not cover it")
    func displayDoesNotAnswer() {
        var s = GuardStory(GuardSettings(onAgentLost: .lock, agentGrace: .seconds(2)))
        s.guarded()
        s.answering = false
        s.send(.agentSaysLockDue(session: "c2", in: .seconds(1)))
        let acted = s.wait(.seconds(4))
        #expect(acted.displayChecks == 1 && acted.lockerStarts == 0, "\(acted)")
        let off = s.send(.displayChecked(session: "c2", answers: false, detail: "no answer in 1s"))
        #expect(off.logoffs == 1 && off.lockerStarts == 0, "\(off)")
        #expect(off.audits.first?.message.contains("does not answer") == true)
    }

    @Test("proof of life: an agent lost as unresponsive that speaks again guards again and adopts the guard's locker; a killed agent is never asked about the X server")
    func unresponsiveThenBack() {
        var s = GuardStory(GuardSettings(onAgentLost: .lock, agentGrace: .seconds(2)))
        s.guarded()
        s.answering = false
        s.send(.agentSaysLockDue(session: "c2", in: .seconds(1)))
        s.wait(.seconds(4))
        s.send(.displayChecked(session: "c2", answers: true, detail: ""))
        s.send(.lockerStarted(session: "c2", pid: 77))
        let back = s.send(.agentAnswered(session: "c2"))
        #expect(s.state?.guarded == true)
        #expect(back.contains(.handOverLocker(session: "c2", pid: 77)), "\(back)")

        var killed = GuardStory(GuardSettings(onAgentLost: .lock, agentGrace: .seconds(2)))
        killed.guarded()
        killed.send(.agentLost(session: "c2", loss: .ended))
        let acted = killed.wait(.seconds(2))
        #expect(acted.displayChecks == 0 && acted.lockerStarts == 1)
    }

    @Test("LockedHint true while nothing verified locks: set back to false after 1 s and logged; the agent's own hint, with its locked line within the second, is left alone")
    func lockedHintCorrected() {
        var s = GuardStory()
        s.guarded()
        var hinted = s.session
        hinted.lockedHint = true
        s.send(.sessionSeen(hinted))
        #expect(s.wait(.ms(999)).isEmpty)
        let corrected = s.wait(.ms(1))
        #expect(corrected.contains(.clearLockedHint(session: "c2")), "\(corrected)")
        #expect(corrected.audits.first?.message.contains("LockedHint was set") == true)

        var agent = GuardStory()
        agent.guarded()
        agent.send(.sessionSeen(hinted))
        agent.wait(.ms(300))
        agent.send(.agentReported(session: "c2", locked: true))
        #expect(!agent.wait(.seconds(5)).contains(.clearLockedHint(session: "c2")))
    }

    @Test("the agent's lockers failing 3 times within 10 minutes: the agent counts as lost and the guard acts at once; its locker covering again (locked) guards again")
    func agentLockersFailing() {
        var s = GuardStory()
        s.guarded()
        s.send(.agentLockerFailed(session: "c2"))
        s.wait(.minutes(10))
        s.send(.agentLockerFailed(session: "c2"))
        s.wait(.seconds(1))
        #expect(s.send(.agentLockerFailed(session: "c2")).lockerStarts == 0, "the first failure is older than 10 minutes")
        let third = s.send(.agentLockerFailed(session: "c2"))
        #expect(third.lockerStarts == 1, "\(third)")
        #expect(third.audits.first?.message.contains("lockers failed 3 times") == true, "\(third)")
        #expect(s.state?.guarded == false)
        s.send(.lockerStarted(session: "c2", pid: 90))
        let back = s.send(.agentReported(session: "c2", locked: true))
        #expect(s.state?.guarded == true)
        #expect(back.contains(.handOverLocker(session: "c2", pid: 90)), "\(back)")
    }

    @Test("an agent that said locked and is then stopped: the session no longer counts as locked (its last word proves nothing of now) until the guard's locker runs")
    func stoppedAgentsWordIsNotALock() {
        var s = GuardStory()
        s.guarded()
        s.send(.agentReported(session: "c2", locked: true))
        #expect(s.state?.locked == true)
        s.send(.agentLost(session: "c2", loss: .stopped(signal: 19)))
        #expect(s.state?.locked == false)
        let acted = s.wait(s.machine.settings.agentGrace)
        #expect(acted.lockerStarts == 1, "\(acted)")
        s.send(.lockerStarted(session: "c2", pid: 91))
        #expect(s.state?.locked == true)
    }

    @Test("root's question: every guarded agent is asked at once; the answer waits until each answered or was lost")
    func rootAsksEveryAgent() {
        var s = GuardStory()
        s.guarded()
        let asked = s.send(.proofWanted)
        #expect(asked == [.askAlive(session: "c2")])
        #expect(s.state?.answerPending == true)
        #expect(s.send(.proofWanted).isEmpty, "asked twice")
        s.send(.agentAnswered(session: "c2"))
        #expect(s.state?.answerPending == false)
        s.send(.proofWanted)
        s.answering = false
        s.wait(.seconds(1))
        #expect(s.state?.answerPending == false && s.state?.guarded == false)
    }

    @Test("an agent's death: the locker starts after agent-grace, not before; an agent back within the grace cancels it")
    func deathThenGrace() {
        var s = GuardStory()
        s.guarded()
        let lost = s.send(.agentLost(session: "c2", loss: .ended))
        #expect(lost.audits.map(\.event) == ["guard-agent-lost"])
        #expect(lost.audits.first?.priority == 3)
        #expect(s.state?.guarded == false)
        #expect(s.wait(.ms(9_999)).lockerStarts == 0)
        #expect(s.wait(.ms(1)).lockerStarts == 1)

        var back = GuardStory()
        back.guarded()
        back.send(.agentLost(session: "c2", loss: .ended))
        back.wait(.seconds(5))
        back.send(.agentVerified(session: "c2", agent: VerifiedAgent(pid: 5000, executable: "/usr/bin/xidlelock")))
        #expect(back.wait(.minutes(10)).lockerStarts == 0)
        #expect(back.state?.agent?.pid == 5000)
    }

    @Test("a stopped agent is lost; continued within the grace it guards again; stopped past it, the session locks")
    func stopped() {
        var s = GuardStory()
        s.guarded()
        s.send(.agentLost(session: "c2", loss: .stopped(signal: 19)))
        #expect(s.state?.unguarded?.reason == "the agent was stopped (signal 19)")
        s.wait(.seconds(3))
        s.send(.agentContinued(session: "c2"))
        #expect(s.state?.guarded == true)
        #expect(s.wait(.minutes(1)).lockerStarts == 0)

        s.send(.agentLost(session: "c2", loss: .stopped(signal: 19)))
        #expect(s.wait(.seconds(10)).lockerStarts == 1)
    }

    @Test("a frozen agent (its cgroup) is lost like a stopped one and stays the session's agent: thawed within the grace it guards again, frozen past it the session locks, and its death while frozen still counts")
    func frozen() {
        var s = GuardStory()
        s.guarded()
        let frozen = AgentLoss.frozen(cgroup: "/user.slice/user-1000.slice/user@1000.service/app.slice/xidlelock.service")
        s.send(.agentLost(session: "c2", loss: frozen))
        #expect(s.state?.unguarded?.reason == "the agent's control group was frozen (/user.slice/user-1000.slice/user@1000.service/app.slice/xidlelock.service)")
        #expect(s.state?.agent != nil, "a frozen agent is still the session's")
        s.wait(.seconds(3))
        s.send(.agentContinued(session: "c2"))
        #expect(s.state?.guarded == true)
        #expect(s.wait(.minutes(1)).lockerStarts == 0)

        s.send(.agentLost(session: "c2", loss: frozen))
        s.send(.agentLost(session: "c2", loss: .ended))
        #expect(s.state?.agent == nil, "killed while frozen: gone")
        #expect(s.wait(.seconds(10)).lockerStarts == 1)
    }

    @Test("a guard started again finds its predecessor's locker running: no second locker; its end, unseen, locks again at once and is no failure (three would log off)")
    func lockerFoundAfterRestart() {
        var s = GuardStory()
        s.guarded()
        s.send(.agentLost(session: "c2", loss: .ended))
        #expect(s.wait(.seconds(10)).lockerStarts == 1)
        // The edge finds the recorded locker instead of starting one.
        s.send(.lockerFound(session: "c2", pid: 77))
        #expect(s.wait(.minutes(5)).lockerStarts == 0, "a second locker on top of the first")
        for _ in 0..<4 {
            let ended = s.send(.lockerEnded(session: "c2", pid: 77, exitStatus: nil, signal: 0))
            #expect(ended.lockerStarts == 1, "when in doubt, lock: at once")
            #expect(ended.logoffs == 0 && s.state?.lockerFailuresInARow == 0)
            s.send(.lockerFound(session: "c2", pid: 77))
        }
    }

    @Test("on-agent-lost logoff: TerminateSession after the grace, with an error in the audit trail")
    func logoff() {
        var s = GuardStory(GuardSettings(onAgentLost: .logoff, agentGrace: .seconds(10)))
        s.guarded()
        s.send(.agentLost(session: "c2", loss: .ended))
        let acted = s.wait(.seconds(10))
        #expect(acted.logoffs == 1)
        #expect(acted.lockerStarts == 0)
        #expect(acted.audits.contains { $0.event == "guard-action" && $0.message.contains("logging the session off") })
        #expect(s.state?.lastAction?.what.hasPrefix("logged the session off") == true)
    }

    @Test("three losses within 10 minutes act at once; losses older than the window do not count")
    func repeatedLoss() {
        var s = GuardStory()
        s.guarded()
        for _ in 0..<2 {
            s.send(.agentLost(session: "c2", loss: .ended))
            s.wait(.seconds(2))
            s.send(.agentVerified(session: "c2", agent: s.agent))
        }
        let third = s.send(.agentLost(session: "c2", loss: .ended))
        #expect(third.lockerStarts == 1)

        var old = GuardStory()
        old.guarded()
        for _ in 0..<2 {
            old.send(.agentLost(session: "c2", loss: .ended))
            old.wait(.seconds(2))
            old.send(.agentVerified(session: "c2", agent: old.agent))
            old.wait(.minutes(6))
        }
        #expect(old.send(.agentLost(session: "c2", loss: .ended)).lockerStarts == 0)
        #expect(old.wait(.seconds(10)).lockerStarts == 1)
    }

    @Test("a session no agent registers for: the grace counts from the session coming to the front")
    func neverRegistered() {
        var s = GuardStory()
        var away = s.session
        away.active = false
        s.send(.sessionSeen(away))
        #expect(s.wait(.hours(1)).lockerStarts == 0)
        s.send(.sessionSeen(s.session))
        #expect(s.wait(.ms(9_999)).lockerStarts == 0)
        #expect(s.wait(.ms(1)).lockerStarts == 1)
    }

    @Test("the guard's locker is handed to the next agent, which judges its end; never a second locker")
    func handOver() {
        var s = GuardStory()
        s.guarded()
        s.send(.agentLost(session: "c2", loss: .ended))
        #expect(s.wait(.seconds(10)).lockerStarts == 1)
        s.send(.lockerStarted(session: "c2", pid: 777))
        #expect(s.state?.locked == true)
        let back = s.send(.agentVerified(session: "c2", agent: VerifiedAgent(pid: 5000, executable: "/usr/bin/xidlelock")))
        #expect(back.contains(.handOverLocker(session: "c2", pid: 777)))
        #expect(back.lockerStarts == 0)
        s.wait(.seconds(30))
        let ended = s.send(.lockerEnded(session: "c2", pid: 777, exitStatus: 1, signal: 0))
        #expect(ended == [.tellLockerEnded(session: "c2", pid: 777, exitStatus: 1, signal: 0)])
        #expect(s.wait(.minutes(5)).lockerStarts == 0)
    }

    @Test("the guard's own locker: exit 0 after holding is an unlock (and the grace runs again without an agent); a quick exit 0, a non-zero exit or a kill is relocked at once, three in a row log off")
    func lockerRule() {
        var s = GuardStory()
        s.send(.sessionSeen(s.session))
        #expect(s.wait(.seconds(10)).lockerStarts == 1)
        s.send(.lockerStarted(session: "c2", pid: 1))
        s.wait(.seconds(40))
        let unlocked = s.send(.lockerEnded(session: "c2", pid: 1, exitStatus: 0, signal: 0))
        #expect(unlocked.audits.contains { $0.message.contains("unlocked after 40s") })
        #expect(s.wait(.ms(9_999)).lockerStarts == 0)
        #expect(s.wait(.ms(1)).lockerStarts == 1)

        s.send(.lockerStarted(session: "c2", pid: 2))
        s.wait(.ms(200))
        let quick = s.send(.lockerEnded(session: "c2", pid: 2, exitStatus: 0, signal: 0))
        #expect(quick.lockerStarts == 1, "an exit 0 at once is no unlock: relocked at once")
        #expect(quick.audits.contains { $0.event == "guard-locker-failure" })
        s.send(.lockerStarted(session: "c2", pid: 3))
        s.wait(.seconds(5))
        let killed = s.send(.lockerEnded(session: "c2", pid: 3, exitStatus: nil, signal: 9))
        // The guard runs only under a policy: no back-off (issue #35), the second
        // failure is retried at once too.
        #expect(killed.lockerStarts == 1, "the second failure is retried at once")
        s.send(.lockerStarted(session: "c2", pid: 4))
        let third = s.send(.lockerEnded(session: "c2", pid: 4, exitStatus: 1, signal: 0))
        #expect(third.logoffs == 1)
        #expect(third.lockerStarts == 0)
    }

    @Test("a second agent for a guarded session is refused; a session the guard does not watch is refused")
    func refusals() {
        var s = GuardStory()
        s.guarded()
        let second = s.send(.agentVerified(session: "c2", agent: VerifiedAgent(pid: 9, executable: "/usr/bin/xidlelock")))
        #expect(second == [.refuse(session: "c2", pid: 9, reason: "pid 4242 already guards session c2")])
        #expect(s.state?.agent?.pid == 4242)
        let unknown = s.send(.agentVerified(session: "c9", agent: s.agent))
        #expect(unknown.count == 1)
        if case .refuse(_, _, let reason)? = unknown.first { #expect(reason.contains("not a graphical session")) }
    }

    @Test("logind lost: every guarded session is unguarded and acted on after the grace; back with the agent alive, guarded again")
    func logindLost() {
        var s = GuardStory()
        s.guarded()
        let lost = s.send(.logindLost(reason: "the system bus was lost"))
        #expect(lost.audits.first?.message.contains("logind cannot be reached") == true)
        #expect(s.state?.guarded == false)
        s.wait(.seconds(2))
        s.send(.sessionSeen(s.session))
        #expect(s.state?.guarded == true)
        #expect(s.wait(.minutes(1)).lockerStarts == 0)

        s.send(.logindLost(reason: "gone"))
        #expect(s.wait(.seconds(10)).lockerStarts == 1)
    }

    @Test("root's report: guarded, agent, lock and last action, and the agent's status only while guarded")
    func report() {
        var s = GuardStory()
        s.guarded()
        s.send(.agentReported(session: "c2", locked: true))
        let status = JSONValue.object([("state", .string("locked"))])
        var report = s.machine.report(now: s.now, policyFile: "/etc/xidlelock/policy", statuses: ["c2": status])
        var session = report["sessions"]?[0]
        #expect(session?["guarded"]?.bool == true)
        #expect(session?["locked"]?.bool == true)
        #expect(session?["agent"]?["pid"]?.integer == 4242)
        #expect(session?["agent_status"] == status)
        s.send(.agentLost(session: "c2", loss: .ended))
        s.wait(.seconds(10))
        s.send(.lockerStarted(session: "c2", pid: 31))
        report = s.machine.report(now: s.now, policyFile: "/etc/xidlelock/policy", statuses: ["c2": status])
        session = report["sessions"]?[0]
        #expect(session?["guarded"]?.bool == false)
        #expect(session?["agent_status"] == .null)
        #expect(session?["guard_locker"]?.integer == 31)
        #expect(session?["unguarded"]?["reason"]?.string == "the agent ended")
        #expect(session?["last_action"]?["what"]?.string == "started the policy's locker (pid 31)")
    }

    @Test("the wire lines read back as written; anything else is no message")
    func protocolLines() {
        let messages: [GuardMessage] = [.register(display: ":0"), .locked(true), .locked(false), .sessions, .verified,
                                        .refused("not root's"), .locker(pid: 12),
                                        .lockerEnded(pid: 12, exitStatus: 0, signal: 0), .lockerEnded(pid: 12, exitStatus: nil, signal: 9),
                                        .status(.object([("state", .string("active"))])),
                                        .lockDue(.ms(8_000)), .lockDue(nil), .alive(7), .askAlive(4_000_000_000), .lockerFailed]
        for message in messages {
            #expect(GuardMessage(line: message.line.dropLast()) == message, "\(message.line)")
        }
        for bad in ["register", "register nodisplay", "locker -1", "locker-ended 1 x 0", "locked now", "hello", "status {",
                    "due", "due -5", "due soon", "alive", "alive -1", "alive? x"] {
            #expect(GuardMessage(line: bad[...]) == nil, "\(bad)")
        }
    }

    @Test("root's doctor --policy through the guard: an unguarded session is NOT met with the guard's reason, whatever its user's socket says")
    func rootCheck() throws {
        var s = GuardStory()
        s.guarded()
        let profile = [ReportedSetting(name: "secure", value: "", from: "p:1")]
        let status = JSONValue.object([
            ("state", .string("active")),
            ("settings", .array([.object([("name", .string("secure")), ("value", .string("yes"))])])),
            ("policy", .object([("file", .string("/etc/xidlelock/policy")), ("settings", .array([.object([("name", .string("secure")), ("value", .string(""))])])), ("errors", .array([]))])),
        ])
        let met = PolicyCheck.check(profile, path: "p", guardReport: s.machine.report(now: s.now, policyFile: "/etc/xidlelock/policy", statuses: ["c2": status]), ownership: PolicyCheckTests.anyOwner)
        #expect(met.met, "\(met.text)")
        s.send(.agentLost(session: "c2", loss: .ended))
        let unmet = PolicyCheck.check(profile, path: "p", guardReport: s.machine.report(now: s.now, policyFile: "/etc/xidlelock/policy", statuses: ["c2": status]), ownership: PolicyCheckTests.anyOwner)
        #expect(!unmet.met)
        #expect(unmet.text.contains("NOT MET  guard: NOT guarded: the agent ended"), "\(unmet.text)")
        let noGuard = PolicyCheck.check(profile, path: "p", guardReport: nil, problem: "the guard does not answer", ownership: PolicyCheckTests.anyOwner)
        #expect(!noGuard.met)
    }
}
