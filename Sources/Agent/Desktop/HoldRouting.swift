import CLinux
import Glibc
import IdleCore
import Platform

/// One user's graphical sessions (a local one, xrdp's, TigerVNC's) share one session
/// bus (`/run/user/UID/bus`), where only one agent can own org.freedesktop.ScreenSaver,
/// PowerManagement and the session manager's name: a film's hold in one session would
/// reach the other session's agent. So the owner asks logind which session each caller
/// runs in (by the pid the bus daemon vouches for, never by the caller's words), holds
/// only its own session's callers, and passes a hold of another session's caller on to
/// that session's agent, over the agent's control socket (`pass-on`); where that
/// session has no agent the call is refused with an error naming the session. The
/// receiving agent checks both the sender (the program that owns the service's name)
/// and the caller's session (logind again): see `Agent.takePassedOnHold`.
///
/// Where logind cannot tell (no logind, no answer), a caller is held here, as before
/// sessions were told apart: one user with one session loses nothing. A process in no
/// session (a user unit's) is logind's user display session's.
final class HoldRouting {
    private weak var agent: DesktopAgent?
    private let logind: LogindLink
    /// The agent's own session, as logind named it at start.
    let ownSession: String

    /// Where a caller runs, once logind said.
    private enum Placement {
        case here
        case session(id: String, display: String)
    }
    private var placements: [HoldOwner: Placement] = [:]
    /// Calls of callers whose session is asked, carried out once logind answers.
    private var waiting: [HoldOwner: [() -> Void]] = [:]
    private var waitingCount = 0
    /// Any number of callers may ask at once; what waits for logind is bounded.
    static let waitingMax = 64
    /// Holds passed on to other sessions' agents, by caller: one connection each.
    private var passedOn: [HoldOwner: [PeerHold]] = [:]

    init(agent: DesktopAgent, logind: LogindLink, ownSession: String) {
        self.agent = agent
        self.logind = logind
        self.ownSession = ownSession
    }

    /// `here` holds it in this agent (and says the cookie, or why not).
    func inhibit(_ call: BusCall, owner: HoldOwner, who: String, why: String, here: @escaping () -> BusReply) -> BusReply {
        guard passedOn[owner, default: []].count < HoldLimits.perClient else { return .refused("too many inhibitors") }
        let pid = call.pid
        return routed(call, owner, here: here) { [weak self] session, socket, deferred in
            self?.passOn(owner, pid: pid, who: who, why: why, to: session, socket, deferred)
        }
    }

    /// org.freedesktop.ScreenSaver.Lock (`xdg-screensaver lock`) locks the caller's
    /// session: passed on to its agent as the socket's `lock`.
    func lock(_ call: BusCall, owner: HoldOwner, here: @escaping () -> BusReply) -> BusReply {
        routed(call, owner, here: here) { [weak self] session, socket, deferred in
            self?.ask(ControlRequest.lock, of: session, at: socket, deferred, patience: PeerHold.patience) { _ in .done }
        }
    }

    /// A question about the screen (GetActive, GetActiveTime, GetSessionIdleTime,
    /// HasInhibit, IsInhibited) is answered for the caller's session: here for this
    /// session's callers, else from the `status` of that session's agent (`reply`
    /// reads it; nil where the status lacks what it needs), within `queryPatience`.
    func query(_ call: BusCall, owner: HoldOwner, here: @escaping () -> BusReply,
               reply: @escaping (JSONValue) -> BusReply?) -> BusReply {
        routed(call, owner, here: here) { [weak self] session, socket, deferred in
            self?.ask(ControlRequest.status, of: session, at: socket, deferred, patience: Self.queryPatience) { status in
                reply(status) ?? .refused("the caller runs in \(session), whose agent's status does not tell")
            }
        }
    }

    /// A question waits on another agent this long at most: its answer is a status
    /// line of a loop that never blocks, and the caller waits for its reply meanwhile.
    static let queryPatience = Millis.seconds(2)

    /// Sends `request` to the agent of `session` on one connection of its own, and
    /// answers the deferred call with what `answered` makes of its reply, or with why
    /// there was none; the connection then closes.
    private func ask(_ request: ControlRequest, of session: String, at socket: String, _ deferred: DeferredCall,
                     patience: Millis, _ answered: @escaping (JSONValue) -> BusReply) {
        let peer = PeerHold(request: request.line, patience: patience)
        peer.onAnswer = { [weak peer] answer in
            peer?.close()
            switch answer {
            case .success(let reply): deferred.answer(answered(reply))
            case .failure(let why): deferred.answer(.refused("the caller runs in \(session), whose agent did not answer: \(why)"))
            }
        }
        if let failure = peer.connect(to: socket) {
            return deferred.answer(.refused("the caller runs in \(session), where no xidlelock agent answers (\(failure))"))
        }
        if !peer.isFinished { agent?.addSource(peer) }
    }

    /// SimulateUserActivity counts only from a caller of this agent's own session:
    /// another session's program is not activity here (a player's keep-awake in an xrdp
    /// session kept the local screen unlocked). Refused, not passed on: the other agent
    /// would take it as its socket's reset, a source of another name.
    func activity(_ call: BusCall, owner: HoldOwner, here: @escaping () -> BusReply) -> BusReply {
        routed(call, owner, here: here) { session, _, deferred in
            deferred.answer(.refused("the caller runs in \(session): its activity is not this session's"))
        }
    }

    /// Carries out a call where its caller runs: `here` in this agent's session (at once
    /// where the caller's place is known already), else `elsewhere` with that session
    /// (in words), its agent's socket and the call to answer, once logind said.
    private func routed(_ call: BusCall, _ owner: HoldOwner, here: @escaping () -> BusReply,
                        elsewhere: @escaping (String, String, DeferredCall) -> Void) -> BusReply {
        if case .here? = placements[owner] { return here() }
        guard placements[owner] != nil || waitingCount < Self.waitingMax else {
            return .refused("too many calls wait for logind to tell their callers' sessions")
        }
        if placements[owner] == nil && waiting[owner] == nil {
            let asked = call.pid != 0 && logind.askSession(ofProcess: call.pid) { [weak self] answer in self?.placed(owner, answer) }
            guard asked else {
                placements[owner] = .here
                return here()
            }
            waiting[owner] = []
        }
        guard let deferred = call.deferred() else { return .refused("out of memory") }
        let pid = call.pid
        let carryOut = { [weak self] in
            guard let self else { return deferred.answer(.refused("the agent is stopping")) }
            guard case .session(let id, let display)? = placements[owner] else { return deferred.answer(here()) }
            let session = "logind session \(ClientText.sanitized(id, maxBytes: 64)) (display \(ClientText.sanitized(display, maxBytes: 64)))"
            guard let socket = SocketPath.ofDisplay(display) else {
                return deferred.answer(.refused("the caller (pid \(pid)) runs in \(session), not in this agent's session \(ownSession), and that session has no X display"))
            }
            elsewhere(session, socket, deferred)
        }
        if placements[owner] != nil {
            carryOut()
        } else {
            waiting[owner, default: []].append(carryOut)
            waitingCount += 1
        }
        return .later
    }

    private func placed(_ owner: HoldOwner, _ answer: LogindQuestions.SessionAnswer) {
        // A caller gone meanwhile: its calls were dropped (and answered) then.
        guard let calls = waiting.removeValue(forKey: owner) else { return }
        waitingCount -= calls.count
        switch answer {
        case .success(let facts) where facts.guarded.id != ownSession && !facts.guarded.id.isEmpty:
            placements[owner] = .session(id: facts.guarded.id, display: facts.guarded.display)
        case .success:
            placements[owner] = .here
        case .failure(let failure):
            Log.debug("logind cannot tell the session of \(owner): \(failure.why): held here")
            placements[owner] = .here
        }
        for call in calls { call() }
    }

    private func passOn(_ owner: HoldOwner, pid: UInt32, who: String, why: String, to session: String, _ socket: String,
                        _ deferred: DeferredCall) {
        let noAgent = "the caller (pid \(pid)) runs in \(session), not in this agent's session \(ownSession)"
        let hold = PeerHold(request: ControlRequest.passOn(source: owner.source, pid: pid, who: who, why: why).line)
        hold.onAnswer = { [weak self, weak hold] answer in
            guard let self, let hold else { return }
            switch answer {
            case .success(let reply):
                guard let id = reply["id"]?.integer else {
                    hold.close()
                    forget(hold, of: owner)
                    return deferred.answer(.refused("\(noAgent), whose agent answered without a hold"))
                }
                hold.cookie = UInt32(truncatingIfNeeded: id)
                Log.write(.info, "a hold of \(who) (\(owner.source.rawValue)) passed on to the agent of \(session)")
                deferred.answer(.number(UInt32(truncatingIfNeeded: id)))
            case .failure(let why):
                forget(hold, of: owner)
                deferred.answer(.refused("\(noAgent), whose agent did not take the hold: \(why)"))
            }
        }
        hold.onEnd = { [weak self, weak hold] in
            guard let self, let hold else { return }
            forget(hold, of: owner)
        }
        if let failure = hold.connect(to: socket) {
            return deferred.answer(.refused("\(noAgent), where no xidlelock agent answers (\(failure)): nothing would hold that screen"))
        }
        // A send that failed at once was answered (refused) already.
        guard !hold.isFinished else { return }
        passedOn[owner, default: []].append(hold)
        agent?.addSource(hold)
    }

    private func forget(_ hold: PeerHold, of owner: HoldOwner) {
        passedOn[owner]?.removeAll { $0 === hold }
        if passedOn[owner]?.isEmpty == true { passedOn[owner] = nil }
    }

    /// UnInhibit of a hold passed on: its connection closes, and with it the hold over there.
    func release(_ owner: HoldOwner, cookie: UInt32) -> Bool {
        guard let hold = passedOn[owner]?.first(where: { $0.cookie == cookie }) else { return false }
        hold.close()
        forget(hold, of: owner)
        return true
    }

    /// The session bus is gone: no caller can end what it holds any more, so what was
    /// passed on ends (fail closed), and what waits for logind is answered on no bus.
    func busLost() {
        placements = [:]
        waiting = [:]
        waitingCount = 0
        for hold in passedOn.values.joined() { hold.close() }
        passedOn = [:]
    }

    /// The caller left the bus: what it passed on ends, and so does what waits for logind.
    func callerGone(_ owner: HoldOwner) {
        placements[owner] = nil
        if let calls = waiting.removeValue(forKey: owner) { waitingCount -= calls.count }
        for hold in passedOn.removeValue(forKey: owner) ?? [] { hold.close() }
    }

    // MARK: Processes (MPRIS players, logind's idle inhibitors): each agent counts only its own session's

    /// Where a process runs, once logind said: its session, or nil where logind could not tell.
    private var processes: [UInt32: String?] = [:]
    /// What waits for logind's answer on each process asked.
    private var processWaiters: [UInt32: [() -> Void]] = [:]
    /// The processes each watcher follows now (`keepProcesses`).
    private var processesKept: [String: Set<UInt32>] = [:]

    /// The logind session process `pid` runs in: nil while logind is asked (`then` runs
    /// once it answered), `.some(nil)` where logind cannot tell. A process in no session
    /// (a user unit's) is the user's display session's, as logind's answer says.
    func session(ofProcess pid: UInt32, then: @escaping () -> Void) -> String?? {
        if let known = processes[pid] { return known }
        guard processWaiters[pid] == nil else {
            processWaiters[pid]?.append(then)
            return nil
        }
        processWaiters[pid] = [then]
        let asked = logind.askSession(ofProcess: pid) { [weak self] answer in
            guard let self else { return }
            switch answer {
            case .success(let facts): processes[pid] = facts.guarded.id.isEmpty ? String?.none : facts.guarded.id
            case .failure: processes[pid] = String?.none
            }
            for waiter in processWaiters.removeValue(forKey: pid) ?? [] { waiter() }
        }
        guard asked else {
            processWaiters[pid] = nil
            return String?.none
        }
        return processes[pid]
    }

    /// Whether process `pid` runs in this agent's session: nil while logind is asked
    /// (`then` runs once it answered), true where logind cannot tell (as before
    /// sessions were told apart).
    func inOwnSession(pid: UInt32, then: @escaping () -> Void) -> Bool? {
        session(ofProcess: pid, then: then).map { $0 == nil || $0 == ownSession }
    }

    /// Of `items` (MPRIS players, sound streams), those whose process runs in this
    /// agent's session: one with no pid known, or where logind cannot tell, counts (as
    /// before sessions were told apart); one not placed yet does not until it is
    /// (`again` runs then, milliseconds later). Their processes are `watcher`'s to keep.
    func inOwnSession<Item>(_ items: [Item], pid: (Item) -> UInt32?, watcher: String, again: @escaping () -> Void) -> [Item] {
        keepProcesses(Set(items.compactMap(pid)), for: watcher)
        return items.filter { item in pid(item).map { inOwnSession(pid: $0, then: again) ?? false } ?? true }
    }

    /// Forgets the processes no watcher follows (each says its own: the players on the
    /// bus, logind's inhibitors listed): what is remembered stays bounded.
    func keepProcesses(_ pids: Set<UInt32>, for watcher: String) {
        processesKept[watcher] = pids
        let kept = processesKept.values.reduce(into: Set<UInt32>()) { $0.formUnion($1) }
        processes = processes.filter { kept.contains($0.key) }
    }

    /// For status: the holds passed on now, each with the session it holds.
    var statusFields: [(String, JSONValue)] {
        [("own_session", .string(ownSession)),
         ("passed_on_holds", .number(Double(passedOn.values.reduce(0) { $0 + $1.count { $0.cookie != nil } })))]
    }
}

/// One request to another session's agent (a hold passed on, a lock): a connection to
/// its control socket that carries the request, its answer, and then nothing; a hold
/// passed on lasts as long as the connection (closed by UnInhibit, by the caller's departure, or by this
/// agent's end: a hold never outlives the agent that passed it on).
final class PeerHold: EventSource {
    private var fd: Int32 = -1
    private var output: [UInt8]
    private var input = LineBuffer(limit: 64 * 1024)
    private var answerDue: MonotonicInstant?
    private let patience: Millis
    /// The other agent's id for the hold, once it took it: the caller's cookie.
    var cookie: UInt32?
    /// The other agent's reply (`ok`), or why there was none.
    var onAnswer: (Result<JSONValue, PassOnRefusal>) -> Void = { _ in }
    var onEnd: () -> Void = {}
    private(set) var isFinished = false
    /// An agent that does not answer within this is taken as none.
    static let patience = Millis.seconds(5)

    struct PassOnRefusal: Error, CustomStringConvertible {
        let description: String
    }

    init(request: String, patience: Millis = PeerHold.patience) {
        output = Array((request + "\n").utf8)
        self.patience = patience
    }

    /// Connects without waiting and sends the request; why not, if it cannot.
    func connect(to path: String) -> String? {
        let fd = xil_unix_connect_nonblocking(path)
        guard fd >= 0 else {
            let code = errno
            return code == ENOENT || code == ECONNREFUSED ? "nothing listens on \(path)" : "\(path): \(String(cString: strerror(code)))"
        }
        // Another user's socket (a planted one in a shared /tmp) is never told a hold.
        var pid: pid_t = 0
        var uid: uid_t = 0
        guard xil_peer_credentials(fd, &pid, &uid) == 0, uid == getuid() else {
            Glibc.close(fd)
            return "\(path) is served by uid \(uid), not by this user"
        }
        self.fd = fd
        answerDue = SystemClock.now().monotonic + patience
        flush()
        return nil
    }

    var pollInterest: (fd: Int32, events: PollEvents)? {
        isFinished || fd < 0 ? nil : (fd, output.isEmpty ? .readable : [.readable, .writable])
    }

    var deadline: MonotonicInstant? { isFinished ? nil : answerDue }

    func dispatch(_ events: PollEvents) {
        if events.isEmpty {
            if let due = answerDue, SystemClock.now().monotonic >= due { end(refused: "it did not answer within \(patience)") }
            return
        }
        if events.contains(.writable) { flush() }
        guard !isFinished, events.contains(.readable) || events.contains(.hangUp) || events.contains(.error) else { return }
        var chunk = [UInt8](repeating: 0, count: 4096)
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
        guard n > 0 else { return end(refused: "it closed the connection") }
        chunk.withUnsafeBytes { input.append(UnsafeRawBufferPointer(rebasing: $0.prefix(n))) }
        guard answerDue != nil, let line = input.nextLine() else { return }
        answerDue = nil
        let reply = try? JSONValue(parsing: line)
        if let reply, reply["ok"]?.bool == true {
            onAnswer(.success(reply))
        } else {
            let why = ClientText.sanitized(reply?["error"]?.string ?? "an answer that is no reply", maxBytes: 300)
            onAnswer(.failure(PassOnRefusal(description: why)))
            close()
        }
    }

    private func flush() {
        guard fd >= 0, !output.isEmpty else { return }
        let n = output.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }
        if n > 0 { output.removeFirst(n) } else if n < 0 && errno != EAGAIN && errno != EINTR { end(refused: String(cString: strerror(errno))) }
    }

    /// The connection ended before the answer (a refusal), or after it (the other
    /// agent is gone, and its hold with it).
    private func end(refused why: String) {
        let unanswered = answerDue != nil
        answerDue = nil
        close()
        if unanswered { onAnswer(.failure(PassOnRefusal(description: why))) } else { onEnd() }
    }

    func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
        answerDue = nil
        isFinished = true
    }
}
