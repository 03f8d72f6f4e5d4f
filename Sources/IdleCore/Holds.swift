/// Holds: whatever may keep the stages from firing (inhibitors of every source, a
/// disable), and the one gate that decides whether it does. Sources only report what
/// they see; who may hold the lock off, how many, how often and for how long is
/// decided here and nowhere else.

/// Who holds: one client of one source.
public struct HoldOwner: Hashable, Sendable, CustomStringConvertible {
    public var source: InhibitorSource
    /// A D-Bus unique name, a control connection; "" for a source with one voice
    /// (the X server, logind, the window manager, the sound server, the corners).
    public var client: String

    public init(_ source: InhibitorSource, _ client: String = "") {
        self.source = source
        self.client = client
    }

    public var description: String { client.isEmpty ? source.rawValue : "\(source.rawValue) client \(client)" }
}

/// One hold as its source sees it.
public struct HoldClaim: Equatable, Sendable {
    /// Unique within its owner: the same key in the next report is the same hold.
    public var key: String
    /// The real caller, as the agent verified it (pid, process, connection).
    public var who: String
    /// What the caller said (its application name, its reason): never mixed into `who`.
    public var why: String
    /// Ends by itself this long after it is admitted (`xidlelock inhibit --for`).
    public var span: Millis?
    /// The user the hold belongs to, where the source tells (logind's inhibitors).
    public var uid: UInt32?
    /// The logind session its holder runs in, where logind told (logind's inhibitors,
    /// placed by their pid); nil where it could not.
    public var session: String?

    public init(key: String, who: String, why: String, span: Millis? = nil, uid: UInt32? = nil, session: String? = nil) {
        self.key = key
        self.who = who
        self.why = why
        self.span = span
        self.uid = uid
        self.session = session
    }
}

/// Everything one owner holds now.
public struct HoldReport: Equatable, Sendable {
    public var owner: HoldOwner
    public var claims: [HoldClaim]

    public init(_ owner: HoldOwner, _ claims: [HoldClaim]) {
        self.owner = owner
        self.claims = claims
    }
}

/// What one client, or all of them, can make the agent keep: a flood is refused
/// early, cheaply and quietly, and never delays a lock.
public enum HoldLimits {
    /// Holds one client may have at once (a browser takes one per playing tab).
    public static let perClient = 32
    public static let total = 256
    /// New holds one client may take: a burst, then one a second.
    static let clientBurst = 20
    static let clientRefill = Millis.seconds(1)
    /// New holds of all clients together: a burst, then five a second.
    static let allBurst = 60
    static let allRefill = Millis.ms(200)
    /// How long the first stage waits at most for the sources to say what they hold.
    public static let startupWait = Millis.seconds(2)
    /// Clients whose rate is remembered at most (then all forgotten: the rate of all
    /// clients together still holds).
    static let ratesRemembered = 1024
}

/// A rate: `capacity` at once, then one per `refill`.
struct TokenBucket: Sendable {
    let capacity: Int
    let refill: Millis
    private(set) var tokens: Int
    private var at: BoottimeInstant

    init(capacity: Int, refill: Millis, at now: BoottimeInstant) {
        self.capacity = capacity
        self.refill = refill
        tokens = capacity
        at = now
    }

    mutating func take(at now: BoottimeInstant) -> Bool {
        let earned = Swift.max((now - at).value / refill.value, 0)
        if earned > 0 {
            tokens = Int(Swift.min(Int64(capacity), Int64(tokens) + earned))
            at = tokens == capacity ? now : at + Millis(earned * refill.value)
        }
        guard tokens > 0 else { return false }
        tokens -= 1
        return true
    }
}

/// Where inhibitor ids (D-Bus cookies) come from. The agent draws each from the
/// kernel's random source, so that no client can tell another's cookie from its
/// own (three outputs of a seeded generator give its state away); tests and
/// simulations draw from a seed, to be repeatable.
public struct CookieSource: Sendable {
    private var seeded: SplitMix64?

    /// getrandom(2), through the standard library's system generator.
    public static let kernel = CookieSource(seeded: nil)
    public static func seeded(_ seed: UInt64) -> CookieSource { CookieSource(seeded: SplitMix64(seed: seed)) }

    public var isKernel: Bool { seeded == nil }

    mutating func next() -> UInt64 {
        if seeded != nil { return seeded!.next() }
        var kernel = SystemRandomNumberGenerator()
        return kernel.next()
    }
}

/// The holds' part: the inhibitors and a disable, and the gate's own records (ids,
/// rates, refusals, the max-inhibit budget).
struct HoldBook: Sendable {
    var inhibitors: [Inhibitor] = []
    /// When each inhibitor began (boottime), by id: status shows how long it has held.
    var began: [Int: BoottimeInstant] = [:]
    /// Disabled until this boottime (`.some(nil)`: until enabled); nil when enabled.
    var disabledUntil: BoottimeInstant??
    /// Inhibitor ids (D-Bus cookies).
    var ids: CookieSource
    /// Reported holds that were refused, by owner and key, with the reason: not tried
    /// (nor logged) again while reported, and shown in status.
    var refused: [HoldOwner: [String: (claim: HoldClaim, reason: String)]] = [:]
    var clientRates: [HoldOwner: TokenBucket] = [:]
    var allRate: TokenBucket?
    /// The policy's max-inhibit: when holding began in this idle period (the budget
    /// runs from there), and whether it ran out (nothing holds until input).
    var heldSince: BoottimeInstant?
    var budgetSpent = false

    init(cookies: CookieSource) { ids = cookies }

    mutating func forget(_ owners: (HoldOwner) -> Bool) {
        refused = refused.filter { !owners($0.key) }
        clientRates = clientRates.filter { !owners($0.key) }
    }

    /// One owner is gone: by key, so that a flood of callers that come and go costs no
    /// pass over everyone remembered.
    mutating func forget(_ owner: HoldOwner) {
        refused[owner] = nil
        clientRates[owner] = nil
    }

    mutating func newID() -> Int {
        while true {
            // 31 bits: a D-Bus cookie (uint32), never 0, and a JSON number without loss.
            let id = Int(ids.next() & 0x7fff_ffff)
            if id != 0, !inhibitors.contains(where: { $0.id == id }) { return id }
        }
    }
}

/// The start's wait: the first stage waits, at most `HoldLimits.startupWait`, for the
/// sources to say what they hold, so that a hold from before the start is not missed.
struct StartupWait: Sendable {
    /// Sources that have not yet said what they hold, and until when the first stage
    /// waits for them.
    var awaiting: Set<InhibitorSource> = []
    var until: BoottimeInstant?
    /// Sources that are up, waited for until their clients have had a moment.
    var settling: [InhibitorSource: BoottimeInstant] = [:]

    /// When the wait ends: once the last source has settled, or at the bound.
    var ends: BoottimeInstant? {
        guard let until else { return nil }
        guard awaiting.allSatisfy({ settling[$0] != nil }) else { return until }
        return min(awaiting.compactMap { settling[$0] }.max() ?? until, until)
    }
}

extension IdleMachine {
    public var inhibitors: [Inhibitor] { holds.inhibitors }
    /// Disabled until this boottime (`.some(nil)`: until enabled); nil when enabled.
    public var disabledUntil: BoottimeInstant?? { holds.disabledUntil }
    public var isDisabled: Bool { holds.disabledUntil != nil }

    mutating func endExpiredHolds(_ now: Instant, _ out: inout [Action]) {
        endHoldsIfBudgetSpent(now, &out)
        endInhibitors(where: { $0.until.map { now.boottime >= $0 } ?? false }, now, &out)
        if let until = disabledUntil ?? nil, now.boottime >= until { enable(by: "the end of its time", now, &out) }
    }

    /// `xidlelock disable`: a hold like any other, through the same rules.
    mutating func disable(for requested: Millis?, by: String, _ now: Instant, _ out: inout [Action]) -> Answer {
        if let refusal = config.secure ? "the agent runs with --secure" : budgetRefusal {
            report(.disableRefused, "refused to disable for \(by.isEmpty ? "a client" : by): \(refusal) (said once)", &out)
            return .refused(refusal)
        }
        let until = requested.map { now.boottime + $0 }
        beginHolding(now)
        holds.disabledUntil = .some(until)
        let bound = holdBudgetEnds.map { "; \($0 - now.boottime) at the most without input (the policy's max-inhibit)" } ?? ""
        out.append(.log(.info, "disabled" + (until.map { " for \($0 - now.boottime)" } ?? "") + (by.isEmpty ? "" : " by \(by)") + bound))
        out.append(.announce(.disabled(remaining: until.map { $0 - now.boottime }, by: by)))
        return .done
    }

    mutating func enable(by: String, _ now: Instant, _ out: inout [Action]) {
        holds.disabledUntil = nil
        out.append(.log(.info, "enabled" + (by.isEmpty ? "" : " by \(by)") + rearmNote(now)))
        out.append(.announce(.enabled(by: by)))
    }

    /// Ends every inhibitor that matches, in the order they began.
    mutating func endInhibitors(where ends: (Inhibitor) -> Bool, _ now: Instant, _ out: inout [Action]) {
        while let k = holds.inhibitors.firstIndex(where: ends) { endInhibitor(at: k, now, &out) }
    }

    mutating func endInhibitor(at k: Int, _ now: Instant, _ out: inout [Action]) {
        let inhibitor = holds.inhibitors.remove(at: k)
        holds.began[inhibitor.id] = nil
        out.append(.log(.info, "inhibitor of \(inhibitor.who) ended" + rearmNote(now)))
        out.append(.announce(.uninhibited(inhibitor)))
    }
}

extension IdleMachine {
    /// The gate: whether a new hold of `owner` may hold the stages off now; nil when
    /// it may, else why not.
    mutating func refusal(of owner: HoldOwner, _ claim: HoldClaim, _ now: Instant) -> String? {
        if let refusal = config.refusal(for: owner.source) { return refusal }
        if owner.source == .logind, let uid = claim.uid {
            switch config.logindInhibitors {
            case .all: break
            // One user's sessions each have an agent: a `systemd-inhibit` of one holds that one.
            case .own where uid == config.userID:
                if let session = claim.session, let own = config.session, own.fromLogind, session != own.id {
                    return "it runs in logind session \(session), not in this agent's session \(own.id); --logind-inhibitors own"
                }
            case .own: return "it belongs to another user (uid \(uid)); --logind-inhibitors own"
            case .none: return "--logind-inhibitors none"
            }
        }
        if let spent = budgetRefusal { return spent }
        if inhibitors.count(where: { $0.owner == owner }) >= HoldLimits.perClient {
            return "\(HoldLimits.perClient) holds already from this client, the most one may have"
        }
        if inhibitors.count >= HoldLimits.total {
            return "\(HoldLimits.total) holds already, the most the agent keeps"
        }
        var client = holds.clientRates[owner]
            ?? TokenBucket(capacity: HoldLimits.clientBurst, refill: HoldLimits.clientRefill, at: now.boottime)
        var all = holds.allRate ?? TokenBucket(capacity: HoldLimits.allBurst, refill: HoldLimits.allRefill, at: now.boottime)
        defer {
            if holds.clientRates[owner] == nil, holds.clientRates.count >= HoldLimits.ratesRemembered { holds.clientRates = [:] }
            holds.clientRates[owner] = client
            holds.allRate = all
        }
        if !client.take(at: now.boottime) { return "too many new holds from this client: at most one a second" }
        if !all.take(at: now.boottime) { return "too many new holds: at most five a second" }
        return nil
    }

    /// Admits one hold through the gate, or refuses it (logged within the edge's rate limit:
    /// a client can be refused any number of times, and clients come and go).
    mutating func admit(_ claim: HoldClaim, of owner: HoldOwner, _ now: Instant, _ out: inout [Action]) -> Answer {
        if let refusal = refusal(of: owner, claim, now) {
            out.append(.logRefusal("not honoured: a hold of \(claim.who) (\(owner.source.rawValue))"
                + (claim.why.isEmpty ? "" : " for \(claim.why)") + ": \(refusal)"))
            return .refused(refusal)
        }
        let until = claim.span.map { now.boottime + $0 }
        let inhibitor = Inhibitor(id: holds.newID(), who: claim.who, why: claim.why, until: until,
                                  source: owner.source, client: owner.client, key: claim.key)
        beginHolding(now)
        holds.inhibitors.append(inhibitor)
        holds.began[inhibitor.id] = now.boottime
        let span = until.map { "for \($0 - now.boottime)" } ?? owner.source.row.lasts
        let bound = holdBudgetEnds.map { "; every hold ends in \($0 - now.boottime) at the latest without input (the policy's max-inhibit)" } ?? ""
        out.append(.log(.info, "inhibited by \(inhibitor.who) \(span)\(inhibitor.why.isEmpty ? "" : ": \(inhibitor.why)")\(bound)"))
        out.append(.announce(.inhibited(inhibitor)))
        return .granted(id: inhibitor.id)
    }

    /// A hold or a disable begins: the policy's max-inhibit runs from the first one
    /// since the user was last there, however many follow.
    mutating func beginHolding(_ now: Instant) {
        if holds.heldSince == nil { holds.heldSince = now.boottime }
    }

    /// What one owner holds now: new claims are admitted first, so that a change of
    /// who holds leaves no gap; claims no longer reported end.
    mutating func holdsNow(_ report: HoldReport, _ now: Instant, _ out: inout [Action]) {
        let owner = report.owner
        sourceReported(owner.source, now, &out)
        let keys = Set(report.claims.map(\.key))
        var refused = (holds.refused[owner] ?? [:]).filter { keys.contains($0.key) }
        for claim in report.claims where refused[claim.key] == nil
            && !inhibitors.contains(where: { $0.owner == owner && $0.key == claim.key }) {
            if case .refused(let reason) = admit(claim, of: owner, now, &out) { refused[claim.key] = (claim, reason) }
        }
        holds.refused[owner] = refused.isEmpty ? nil : refused
        endInhibitors(where: { $0.owner == owner && !keys.contains($0.key) }, now, &out)
    }

    /// The owner ends one of its holds; another owner's is not its to end.
    mutating func holdReleased(_ owner: HoldOwner, id: Int, _ now: Instant, _ out: inout [Action]) -> Answer {
        guard let k = inhibitors.firstIndex(where: { $0.id == id && $0.owner == owner }) else {
            return .refused("no hold \(id) of this client")
        }
        endInhibitor(at: k, now, &out)
        return .done
    }

    /// Owners are gone (a connection closed; a bus or server lost, for all its
    /// clients): their holds end, and what the gate remembered of them.
    mutating func ownersGone(_ gone: (HoldOwner) -> Bool, _ now: Instant, _ out: inout [Action]) {
        endInhibitors(where: { gone($0.owner) }, now, &out)
        holds.forget(gone)
    }

    mutating func ownerGone(_ owner: HoldOwner, _ now: Instant, _ out: inout [Action]) {
        if holdsAny(of: owner) { endInhibitors(where: { $0.owner == owner }, now, &out) }
        holds.forget(owner)
    }

    /// Whether `owner` holds the lock off now: its departure ends something.
    public func holdsAny(of owner: HoldOwner) -> Bool {
        inhibitors.contains { $0.owner == owner }
    }

    // MARK: The first decision

    /// The sources the first stage waits for, from the start.
    mutating func awaitSources(_ sources: Set<InhibitorSource>, _ now: Instant) {
        startupWait.awaiting = sources
        startupWait.until = sources.isEmpty ? nil : now.boottime + HoldLimits.startupWait
    }

    mutating func sourceReported(_ source: InhibitorSource, settle: Millis = .zero, _ now: Instant, _ out: inout [Action]) {
        guard startupWait.awaiting.contains(source) else { return }
        if settle > .zero {
            startupWait.settling[source] = now.boottime + settle
        } else {
            startupWait.awaiting.remove(source)
            startupWait.settling[source] = nil
        }
        endStartupWaitIfDue(now, &out)
    }

    /// When the start's wait must be looked at: only for a stage due before it ends
    /// (an agent that starts with an hour to go does not wake for it), then when both
    /// the stage is due and the wait is over.
    var startupWaitDue: BoottimeInstant? {
        guard let waitEnds = startupWait.ends,
              let due = config.stages.indices.filter({ !fired[$0] && heldBy($0, awaiting: false).isEmpty }).map(dueTime).min()
        else { return nil }
        return max(due, waitEnds)
    }

    /// Sources that have not answered within the wait count as holding nothing.
    mutating func endStartupWaitIfDue(_ now: Instant, _ out: inout [Action]) {
        guard let until = startupWait.until else { return }
        startupWait.awaiting = startupWait.awaiting.filter { startupWait.settling[$0].map { now.boottime < $0 } ?? true }
        if !startupWait.awaiting.isEmpty && now.boottime >= until {
            let silent = InhibitorSource.allCases.filter(startupWait.awaiting.contains).map(\.rawValue)
            out.append(.log(.warning, "no word from \(silent.joined(separator: ", ")) within \(HoldLimits.startupWait) of the start: counting \(silent.count == 1 ? "it" : "them") as holding nothing"))
            startupWait.awaiting = []
        }
        if startupWait.awaiting.isEmpty {
            startupWait.until = nil
            startupWait.settling = [:]
        }
    }

    /// Holds reported and refused, for status: the source, who, why and the reason.
    public var refusedHolds: [(source: InhibitorSource, claim: HoldClaim, reason: String)] {
        holds.refused.flatMap { owner, claims in claims.values.map { (owner.source, $0.claim, $0.reason) } }
            .sorted { ($0.source.rawValue, $0.claim.key) < ($1.source.rawValue, $1.claim.key) }
    }

    /// The first stage still waits for the sources to report.
    public var awaitingSources: Bool { startupWait.until != nil }

    // MARK: max-inhibit

    /// When a hold next ends by itself: an inhibitor's span, a disable's, or the
    /// policy's max-inhibit while anything holds.
    var holdsExpire: BoottimeInstant? {
        var first = disabledUntil ?? nil
        for inhibitor in inhibitors { first = earliest(first, inhibitor.until) }
        if isDisabled || !inhibitors.isEmpty { first = earliest(first, holdBudgetEnds) }
        return first
    }

    /// When the policy's max-inhibit runs out in this idle period.
    var holdBudgetEnds: BoottimeInstant? {
        guard let max = config.maxInhibit, let since = holds.heldSince, !holds.budgetSpent else { return nil }
        return since + max
    }

    /// Why no hold (nor a disable) may begin: the budget ran out until the user is back.
    var budgetRefusal: String? {
        guard let max = config.maxInhibit, holds.budgetSpent else { return nil }
        return "the policy's max-inhibit (\(max)) is used up until the user is back"
    }

    /// The budget ran out: every hold ends, and none begins until the user is back.
    mutating func endHoldsIfBudgetSpent(_ now: Instant, _ out: inout [Action]) {
        guard let end = holdBudgetEnds, now.boottime >= end else { return }
        holds.budgetSpent = true
        guard !inhibitors.isEmpty || isDisabled else { return }
        out.append(.log(.warning, "the policy's max-inhibit (\(config.maxInhibit!)) is used up: every hold ends, and none holds again until input"))
        endInhibitors(where: { _ in true }, now, &out)
        if isDisabled { enable(by: "the policy's max-inhibit", now, &out) }
    }

    /// The user is back: the max-inhibit budget starts again (from now, for holds that go on).
    mutating func userIsBack(_ now: Instant) {
        holds.budgetSpent = false
        holds.heldSince = inhibitors.isEmpty && !isDisabled ? nil : now.boottime
    }
}
