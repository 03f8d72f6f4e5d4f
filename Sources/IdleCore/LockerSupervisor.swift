/// What the edge saw of the locker. The edge only reports facts; every decision
/// about what they mean is made by `LockerSupervisor`.
public enum LockerFact: Equatable, Sendable {
    /// It could not be started at all (not found, fork failed).
    case failedToStart(String)
    /// It exited with this status.
    case exited(Int32)
    /// It was killed by this signal (the OOM killer, `xkill`, a kill by mistake).
    case killed(signal: Int32)
    /// A locker adopted from an earlier agent ended: not our child, so its exit
    /// status cannot be read.
    case endedUnseen
    /// A locker started by an earlier agent still runs and was adopted.
    case adopted
    /// The grab probe's answer.
    case grabs(GrabReading)

    /// The grab probe's answer while the locker runs, when X cannot tell whose grab it is.
    public static func keyboardGrabbed(_ grabbed: Bool?) -> LockerFact {
        .grabs(GrabReading(grabbed: grabbed))
    }
}

/// A device a locker grabs. The keyboard grab is the locker's proof; i3lock and slock
/// grab the pointer too, and cannot lock while another client holds either.
public enum GrabbedDevice: String, CaseIterable, Comparable, Sendable {
    case keyboard, pointer

    public static func < (a: GrabbedDevice, b: GrabbedDevice) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }

    /// "the keyboard", "the pointer", "the keyboard and the pointer".
    public static func phrase(_ devices: [GrabbedDevice]) -> String {
        devices.sorted().map { "the \($0.rawValue)" }.joined(separator: " and ")
    }
}

/// What the grab probe saw. X tells whether some client holds the keyboard or the
/// pointer grab, never which one: the probe's own `XGrabKeyboard` and `XGrabPointer`
/// answer `AlreadyGrabbed` for any client's grab. What the edge can add is whether one
/// of the locker's windows shows (the X-Resource extension tells the pid of each
/// window's client), and whether a locker process ran at all when it looked (a grab
/// before the locker started is another's).
public struct GrabReading: Equatable, Sendable {
    /// Another client holds the keyboard grab (true), the keyboard is free (false), or
    /// the probe could not be made (nil).
    public var grabbed: Bool?
    /// The same for the pointer grab.
    public var pointerGrabbed: Bool?
    /// Whether a locker process ran when the keyboard was read. The reading made just
    /// before a start has none: a grab it sees is another client's.
    public var lockerRuns: Bool
    /// Whether a viewable window on the root belongs to the locker's processes (the
    /// locker or a descendant); nil when X cannot tell (no X-Resource extension, or
    /// libXRes missing) or it was not asked (the keyboard was free).
    public var lockerWindowShown: Bool?

    public init(grabbed: Bool?, pointerGrabbed: Bool? = false, lockerRuns: Bool = true, lockerWindowShown: Bool? = nil) {
        self.grabbed = grabbed
        self.pointerGrabbed = pointerGrabbed
        self.lockerRuns = lockerRuns
        self.lockerWindowShown = lockerWindowShown
    }

    /// The devices another client holds, as far as this reading tells (none while
    /// `lockerRuns`, when a grab may be the locker's).
    func grabbed(_ device: GrabbedDevice) -> Bool? {
        switch device {
        case .keyboard: grabbed
        case .pointer: pointerGrabbed
        }
    }
}

/// Why a locker is counted as a failure: each leaves the screen possibly open.
public enum LockerFailure: Equatable, Sendable, CustomStringConvertible {
    case couldNotStart(String)
    case exited(Int32, after: Millis)
    case killed(signal: Int32, after: Millis)
    /// Exit 0 before it could have held the screen: it forked and returned
    /// (`i3lock` without `-n`), was backgrounded by a wrapper, or is no locker (`true`).
    case returnedAtOnce(after: Millis)
    /// An adopted locker ended; whether it exited 0 cannot be known.
    case endedUnseen(after: Millis)
    /// Under the policy: it ran through the grab deadline and the keyboard was seen
    /// free. It still runs: the edge kills it (`stillRuns`).
    case neverGrabbed(after: Millis)
    /// Under the policy: it held the keyboard, was seen without it, and had not exited
    /// `letGoGrace` later. It still runs: the edge kills it.
    case letGo(heldFor: Millis, freeFor: Millis)

    public var description: String {
        switch self {
        case .couldNotStart(let reason): "could not be started (\(reason))"
        case .exited(let status, let after): "exited with status \(status) after \(after)"
        case .killed(let signal, let after): "was killed by signal \(signal)\(signalName(signal)) after \(after)"
        case .returnedAtOnce(let after):
            "exited 0 after \(after) without holding the screen (it forked and returned, as i3lock does without -n, or a wrapper put it in the background): give a locker command that keeps running until unlocked"
        case .endedUnseen(let after):
            "(started by an earlier agent) ended after \(after); its exit status cannot be known, so this is not taken as an unlock"
        case .neverGrabbed(let after):
            "ran for \(after) without grabbing the keyboard (killed: under the policy a locker that does not cover the screen is replaced)"
        case .letGo(let heldFor, let freeFor):
            "let go of the keyboard after holding it for \(heldFor) and still ran \(freeFor) later without exiting (killed: under the policy a locker that does not cover the screen is replaced)"
        }
    }

    /// The locker still runs, not covering the screen: the edge kills it before the
    /// next one starts (never two at once).
    public var stillRuns: Bool {
        switch self {
        case .neverGrabbed, .letGo: true
        default: false
        }
    }

    /// A short word for events and status.
    public var kind: String {
        switch self {
        case .couldNotStart: "could-not-start"
        case .exited: "exited"
        case .killed: "killed"
        case .returnedAtOnce: "returned-at-once"
        case .endedUnseen: "ended-unseen"
        case .neverGrabbed: "not-covering"
        case .letGo: "let-go"
        }
    }
}

private func signalName(_ signal: Int32) -> String {
    switch signal {
    case 1: " (SIGHUP)"
    case 2: " (SIGINT)"
    case 6: " (SIGABRT)"
    case 9: " (SIGKILL)"
    case 11: " (SIGSEGV)"
    case 15: " (SIGTERM)"
    default: ""
    }
}

/// Whether the running locker covers the screen, as the grab probe tells.
public enum LockerCover: Equatable, Sendable {
    /// Not seen yet: the probe goes on until `LockerSupervisor.grabDeadline` (and
    /// past it while a sleep waits for the cover).
    case unknown
    /// Another client (the locker) held the keyboard grab from this time on.
    case covered(since: Instant)
    /// It held the keyboard from `coveredSince` and was seen without it at `freeSince`.
    /// i3lock lets go shortly before it exits 0 after the right password (319 ms apart
    /// measured on a slow VM): judged `LockerSupervisor.letGoGrace` later, when an exit
    /// 0 by then is an unlock, and a keyboard still free a let-go. Until then the lock
    /// stands as it was.
    case lettingGo(coveredSince: Instant, freeSince: Instant)
    /// It ran for the whole grab deadline without a grab being seen, or let go of the
    /// keyboard: it runs, but the screen may be visible. Without a policy it is not
    /// replaced (never a second locker; under the policy it is killed and replaced). A
    /// grab seen later makes it `covered`.
    case notCovering
    /// Another client holds the keyboard or the pointer: it held it before the locker
    /// started, or the keyboard stayed grabbed through the grab deadline while no window
    /// of the locker showed. A grab cannot be the locker's proof then: the screen may be
    /// visible (and i3lock, which needs both grabs, fails). Looked at again (the other
    /// client may let go).
    case grabHeldByOther
}

public enum LockerState: Equatable, Sendable {
    case unlocked
    /// The locker runs, started (or adopted) at `since`; `attempt` counts the
    /// starts since the last locker that held the screen. How long it has run (for
    /// the grab deadline, the shortest hold) is waking time, on CLOCK_MONOTONIC: a
    /// suspend right after the start must not make "returned at once" look held.
    case running(since: Instant, attempt: Int, cover: LockerCover, adopted: Bool)
    /// The last locker failed; it is started again at `at`. The screen may be open.
    case retrying(at: BoottimeInstant, attempt: Int)
}

/// What a fact means, for the state machine to act on.
public enum LockerVerdict: Equatable, Sendable {
    /// Nothing to do (a probe that saw nothing yet, a fact about no locker).
    case none
    /// The locker holds the screen now: the screen is locked.
    case covered(after: Millis)
    /// The locker ran through the grab deadline without a grab: an error to show.
    case notCovering
    /// The locker held the keyboard and let go of it while it runs: as `notCovering`,
    /// and the screen, said locked until now, may be visible.
    case letGo(heldFor: Millis, runningFor: Millis)
    /// Another client holds these devices, so a grab seen is no proof: an error to
    /// show. `beforeStart`: held when the locker started (else: the keyboard, while no
    /// window of the locker showed through the grab deadline).
    case grabHeldByOther([GrabbedDevice], beforeStart: Bool)
    /// The one way a lock ends well: exit 0 after the locker held the screen.
    /// `covered`: its grab was seen (and still was `letGoGrace` before the exit);
    /// `hadLetGo`: it let go of the keyboard longer ago than that.
    case unlocked(lockedFor: Millis, covered: Bool, hadLetGo: Bool = false)
    /// The screen may be open: the locker is started again at `retryAt` (now, or later).
    case failed(LockerFailure, retryAt: BoottimeInstant, attempt: Int)
    /// A retry is due and nothing holds the keyboard: start the locker now.
    case retryNow
    /// A retry was due, but the keyboard is grabbed: a detached locker (one that
    /// forked and returned) probably holds the screen. No second one is started.
    /// `again`: it was held off before (said once, loudly).
    case retryHeldOff(until: BoottimeInstant, again: Bool)
}

/// The locker's supervision rules, in one place. A pure value: facts and the time
/// in, a verdict out; the edge only reports what it saw.
///
/// The rule: the screen counts as unlocked only when the locker exits 0 after it
/// held the screen. Killed, non-zero at any time, returned at once, or an end
/// that cannot be seen: each is a failure, and the locker is started again at
/// once, then with a growing delay, for as long as it keeps failing (input does
/// not stop it: when in doubt, lock). Under the admin's policy there is no growing
/// delay, and a locker of the agent's own that does not cover the screen (never
/// grabbed the keyboard, or let go of it) is a failure too: killed and replaced.
public struct LockerSupervisor: Equatable, Sendable {
    public private(set) var state: LockerState = .unlocked
    /// The last failure and when it happened, for status.
    public private(set) var lastFailure: LockerFailure?
    public private(set) var lastFailureAt: BoottimeInstant?
    /// The start of the current lock (its first attempt), for "locked for" times.
    public private(set) var lockedSince: BoottimeInstant?
    /// When the grab probe last ran for the current locker.
    public private(set) var lastProbe: Instant?
    /// The last failure was an exit 0 at once: a detached locker may hold the
    /// keyboard, so a retry first checks that the keyboard is free.
    public private(set) var lastReturnedAtOnce = false
    /// Retries held off in a row because the keyboard was grabbed.
    var heldOff = 0
    /// The devices the reading made just before the current locker started found
    /// grabbed, and no reading since found free: a grab of one seen now is that client's.
    private(set) var grabbedBeforeStart: Set<GrabbedDevice> = []
    /// The devices another client held when last looked at during this lock (the
    /// current locker's cover, or, while retrying, what ended the last attempt). For
    /// status and doctor: the screen may be open because of that client, not the locker.
    public private(set) var heldByOther: Set<GrabbedDevice> = []
    public var keyboardHeldByOther: Bool { heldByOther.contains(.keyboard) }
    /// The running locker held the keyboard and let go of it (seen by the re-probe).
    public private(set) var letGo = false

    /// How long the grab probe looks for the locker's keyboard grab. i3lock gives
    /// up grabbing after about 2.3 s (and exits 1); lockers that never grab (a
    /// logout command, a custom script) are let run, shown as not covering.
    public let grabDeadline: Millis
    /// An exit 0 sooner than this never held the screen: no one types a password
    /// that fast, and lockers that fork return within milliseconds.
    public let shortestHold: Millis
    /// Out of the policy, the delays after the second failed attempt on: 1, 2, 4 … 60 s.
    public static let backoff = Backoff(first: .seconds(1), limit: .seconds(60))
    /// Under the policy the session's user is one of the attackers: one who kills each
    /// locker as it starts must not buy a minute of open screen by the back-off. The
    /// first `immediateRetries` failures in a row are replaced at once, the later ones
    /// `policyRetryGap` apart: a locker that fails instantly for ever (gone, broken)
    /// then costs two starts a second, not a busy loop, and the gap stays below the
    /// time i3lock itself takes to grab (0.4-0.9 s). The guard takes a session with
    /// repeated failures as lost; that is its part.
    public static let immediateRetries = 3
    public static let policyRetryGap = Millis(500)

    /// How often the grab is probed again while the locker runs, once the search for
    /// its grab is over: a locker that lets go of the keyboard (it crashed half-way, a
    /// bug, another client took over) is seen within this, and one that grabs late is
    /// seen at last. One round trip or a few, 12 wake-ups a minute, only while locked:
    /// an unlocked agent never probes.
    public let grabRecheck: Millis

    /// How long after a probe found the keyboard let go the locker may still exit 0 as
    /// an unlock (`LockerCover.lettingGo`): i3lock lets go 319 ms before its exit 0
    /// (measured on a slow VM), and the exit reaches the agent within a loop turn; 1.5 s
    /// leaves a loaded machine room. Longer only leaves a let-go locker longer in place.
    public let letGoGrace: Millis

    /// The admin's policy is in force: no back-off, and a locker that does not cover
    /// the screen is replaced.
    public let underPolicy: Bool

    public init(grabDeadline: Millis = .seconds(3), shortestHold: Millis = .seconds(1), grabRecheck: Millis = .seconds(5),
                letGoGrace: Millis = .ms(1500), underPolicy: Bool = false) {
        self.grabDeadline = grabDeadline
        self.shortestHold = shortestHold
        self.grabRecheck = grabRecheck
        self.letGoGrace = letGoGrace
        self.underPolicy = underPolicy
    }

    public var isRunning: Bool { if case .running = state { true } else { false } }
    public var isRetrying: Bool { if case .retrying = state { true } else { false } }
    /// The locker is known to hold the screen.
    public var covers: Bool {
        switch state {
        case .running(_, _, .covered, _), .running(_, _, .lettingGo, _): true
        default: false
        }
    }

    /// When the grab probe runs next: 10 ms after the start, then with doubling
    /// gaps up to 500 ms, until the grab is seen or the deadline passes (at most
    /// a dozen round trips), then every `grabRecheck` while the locker runs. Never a busy poll.
    public var nextProbe: BoottimeInstant? { nextProbe(hurry: false) }

    /// With `hurry` (the system waits to sleep until the screen is covered) the probe
    /// runs every 10 ms, past the grab deadline too, for as long as the sleep waits: the
    /// sleep then follows the grab within 10 ms, also that of a locker slower than the
    /// deadline (a loaded machine, a wrapper script). The schedule counts waking time:
    /// after a suspend the next probe is due at once, and the deadline is still 3 s of
    /// the locker running.
    public func nextProbe(hurry: Bool) -> BoottimeInstant? {
        guard case .running(let started, _, let cover, _) = state else { return nil }
        guard let last = lastProbe else { return started.boottime + Swift.min(.ms(10), grabDeadline) }
        let ran = last.monotonic - started.monotonic
        // The search: until the grab is seen or the deadline passes (another client's
        // grab may be let go within it, and a grab then can be the locker's).
        let searching = cover == .unknown || (cover == .grabHeldByOther && ran < grabDeadline)
        if case .covered = cover {} else if hurry { return last.boottime + .ms(10) }
        // A let-go is looked at again when its grace ends (waking time: a suspend
        // in between makes it due at once).
        if case .lettingGo(_, let freeSince) = cover {
            return last.boottime + Swift.max(letGoGrace - (last.monotonic - freeSince.monotonic), .zero)
        }
        guard searching else { return last.boottime + grabRecheck }
        let gap = Swift.min(Swift.max(ran, .ms(10)), .ms(500))
        return last.boottime + Swift.max(Swift.min(gap, grabDeadline - ran), .zero)
    }

    public mutating func probed(at now: Instant) { lastProbe = now }

    /// A start is being asked for (at the lock time, on request, or a retry); returns its attempt number.
    public mutating func starting(at now: Instant) -> Int {
        var attempt = 1
        if case .retrying(_, let a) = state { attempt = a }
        if attempt == 1 { lockedSince = now.boottime }
        heldOff = 0
        state = .running(since: now, attempt: attempt, cover: .unknown, adopted: false)
        lastProbe = nil
        letGo = false
        // Until the reading made before this start says otherwise.
        grabbedBeforeStart = []
        return attempt
    }

    /// When a failed locker is started again; nil unless failing.
    public var retryAt: BoottimeInstant? {
        if case .retrying(let at, _) = state { return at }
        return nil
    }

    /// Whether a retry is due now.
    public func retryDue(at now: BoottimeInstant) -> Bool {
        if case .retrying(let at, _) = state { return now >= at }
        return false
    }

    /// `xidlelock lock` (or a lock request from the desktop) during the backoff: try again now.
    public mutating func retryNow(at now: BoottimeInstant) {
        if case .retrying(_, let attempt) = state { state = .retrying(at: now, attempt: attempt) }
    }

    public mutating func handle(_ fact: LockerFact, at clocks: Instant) -> LockerVerdict {
        let now = clocks.boottime
        switch (fact, state) {
        case (.adopted, _):
            state = .running(since: clocks, attempt: 1, cover: .unknown, adopted: true)
            lockedSince = now
            lastProbe = nil
            letGo = false
            grabbedBeforeStart = []
            return .none
        case (.grabs(let reading), .running(let since, let attempt, let cover, let adopted)) where !reading.lockerRuns:
            // The reading made just before this locker started (the edge looks before it
            // starts the locker, and answers after): a grab now is another client's, and
            // a grab seen later is that client's still, until the device is seen free.
            grabbedBeforeStart = Set(GrabbedDevice.allCases.filter { reading.grabbed($0) == true })
            heldByOther = grabbedBeforeStart
            guard !grabbedBeforeStart.isEmpty, cover == .unknown else { return .none }
            state = .running(since: since, attempt: attempt, cover: .grabHeldByOther, adopted: adopted)
            return .grabHeldByOther(grabbedBeforeStart.sorted(), beforeStart: true)
        case (.grabs(let reading), .running(let since, let attempt, let cover, let adopted)):
            return judge(reading, since: since, attempt: attempt, cover: cover, adopted: adopted, at: clocks)
        case (.grabs(let reading), .retrying(_, let attempt)):
            guard reading.grabbed == true, lastReturnedAtOnce else { return .retryNow }
            // Under the policy too, a fixed gap: a retry due at once would ask again at once.
            let next = now + (underPolicy ? LockerSupervisor.policyRetryGap : retryDelay(attempt: Swift.max(attempt, 2)))
            state = .retrying(at: next, attempt: attempt + 1)
            heldOff += 1
            return .retryHeldOff(until: next, again: heldOff > 1)
        case (.grabs, _):
            return .none
        case (.failedToStart(let reason), _):
            return fail(.couldNotStart(reason), at: clocks)
        case (.exited(let status), .running(let since, _, let cover, let adopted)):
            guard status == 0 else { return fail(.exited(status, after: now - since.boottime), at: clocks) }
            let ran = clocks.monotonic - since.monotonic
            // Exit 0 is an unlock only after the locker held the screen: its grab was
            // seen, or it ran through the whole grab deadline (lockers that never
            // grab, and one that ran while another client held the keyboard), and not
            // sooner than anyone could type a password. An adopted locker started before
            // this agent (the guard's, an earlier agent's): its `since` is the adoption,
            // and a quick exit after it is no quick return.
            let covered = switch cover {
            case .covered, .lettingGo: true
            default: false
            }
            guard covered || (cover != .unknown && ran >= grabDeadline), ran >= shortestHold || adopted else {
                lastReturnedAtOnce = true
                return fail(.returnedAtOnce(after: ran), at: clocks)
            }
            let lockedFor = now - (lockedSince ?? since.boottime)
            let hadLetGo = letGo
            state = .unlocked
            lockedSince = nil
            lastReturnedAtOnce = false
            grabbedBeforeStart = []
            heldByOther = []
            letGo = false
            return .unlocked(lockedFor: lockedFor, covered: covered, hadLetGo: hadLetGo)
        case (.killed(let signal), .running(let since, _, _, _)):
            return fail(.killed(signal: signal, after: now - since.boottime), at: clocks)
        case (.endedUnseen, .running(let since, _, _, _)):
            return fail(.endedUnseen(after: now - since.boottime), at: clocks)
        case (.exited, _), (.killed, _), (.endedUnseen, _):
            return .none
        }
    }

    /// A probe of the running locker. While its cover is not known (or was another
    /// client's grab) the keyboard grab counts as the locker's only when it cannot be
    /// another client's: no grab of either device held before the start, and, where X
    /// tells window owners, a window of the locker shows. Where X cannot tell, a grab
    /// seen after a free start counts (a client that grabs between the locker's start
    /// and its grab is then taken for the locker, until the locker, unable to grab,
    /// fails). Once covered, a free keyboard means the locker let go.
    mutating func judge(_ reading: GrabReading, since: Instant, attempt: Int, cover: LockerCover, adopted: Bool,
                         at clocks: Instant) -> LockerVerdict {
        let pastDeadline = clocks.monotonic - since.monotonic >= grabDeadline
        func settle(_ cover: LockerCover) { state = .running(since: since, attempt: attempt, cover: cover, adopted: adopted) }
        // Under the policy a locker of the agent's own that does not cover the screen is
        // killed and replaced (an adopted one is not ours to kill: its end is another's to see).
        let replaces = underPolicy && !adopted
        if case .covered(let coveredSince) = cover {
            // A grab still seen is the locker's still (it cannot be taken while the
            // locker holds it); an unreadable probe changes nothing.
            guard reading.grabbed == false else { return .none }
            // Perhaps the unlock: judged when the grace ends.
            settle(.lettingGo(coveredSince: coveredSince, freeSince: clocks))
            return .none
        }
        if case .lettingGo(let coveredSince, let freeSince) = cover {
            // Grabbed again, and nothing says by another client: covered as before.
            if reading.grabbed == true && reading.lockerWindowShown != false {
                settle(.covered(since: coveredSince))
                return .none
            }
            let freeFor = clocks.monotonic - freeSince.monotonic
            guard freeFor >= letGoGrace else { return .none }
            let heldFor = freeSince.monotonic - coveredSince.monotonic
            letGo = true
            if replaces { return fail(.letGo(heldFor: heldFor, freeFor: freeFor), at: clocks) }
            settle(.notCovering)
            return .letGo(heldFor: heldFor, runningFor: clocks.monotonic - since.monotonic)
        }
        // A device seen free is not held by another client: a grab of it from now on
        // can be the locker's.
        for device in GrabbedDevice.allCases where reading.grabbed(device) == false {
            grabbedBeforeStart.remove(device)
            heldByOther.remove(device)
        }
        switch reading.grabbed {
        case true?:
            if grabbedBeforeStart.isEmpty && reading.lockerWindowShown != false {
                // The count of failed attempts starts again only once it has held the
                // screen a while (see `fail`): a grab seen may be another client's still.
                settle(.covered(since: clocks))
                lastReturnedAtOnce = false
                heldByOther = []
                letGo = false
                return .covered(after: clocks.boottime - since.boottime)
            }
            // Grabbed, and no window of the locker shows: the locker may not have mapped
            // it yet; looked at again until the deadline.
            guard cover == .unknown, pastDeadline else { return .none }
            settle(.grabHeldByOther)
            heldByOther.insert(.keyboard)
            return .grabHeldByOther([.keyboard], beforeStart: false)
        case false?:
            // Another client that still holds the pointer is the reason, said already.
            guard heldByOther.isEmpty else { return .none }
            guard pastDeadline else {
                settle(.unknown)
                return .none
            }
            // Seen free through the deadline (or again, after a probe that could not tell).
            if replaces { return fail(.neverGrabbed(after: clocks.monotonic - since.monotonic), at: clocks) }
            guard cover != .notCovering else { return .none }
            settle(.notCovering)
            return .notCovering
        case nil:
            guard cover == .unknown, pastDeadline else { return .none }
            settle(.notCovering)
            return .notCovering
        }
    }

    /// Records a failure and plans the next start: at once after the first, then
    /// after 1, 2, 4 … up to 60 s.
    mutating func fail(_ failure: LockerFailure, at clocks: Instant) -> LockerVerdict {
        let now = clocks.boottime
        var attempt = 1
        switch state {
        case .running(_, let a, .covered(let coveredSince), _):
            // A locker that held the screen for the grab deadline (waking time) was a
            // working one: its failure is a first failure, retried at once. (i3lock that
            // could not grab because another client held the keyboard fails before that.)
            attempt = clocks.monotonic - coveredSince.monotonic >= grabDeadline ? 1 : a
        case .running(_, let a, .lettingGo(let coveredSince, let freeSince), _):
            attempt = freeSince.monotonic - coveredSince.monotonic >= grabDeadline ? 1 : a
        case .running(_, let a, _, _), .retrying(_, let a): attempt = a
        case .unlocked: lockedSince = now
        }
        heldOff = 0
        if case .returnedAtOnce = failure {} else { lastReturnedAtOnce = false }
        lastFailure = failure
        lastFailureAt = now
        let retryAt = now + retryDelay(attempt: attempt)
        state = .retrying(at: retryAt, attempt: attempt + 1)
        return .failed(failure, retryAt: retryAt, attempt: attempt + 1)
    }

    /// After failed attempt `attempt`: none after the first, then 1, 2, 4 … 60 s; under
    /// the policy none after the first `immediateRetries`, then `policyRetryGap`.
    func retryDelay(attempt: Int) -> Millis {
        if underPolicy { return attempt > LockerSupervisor.immediateRetries ? LockerSupervisor.policyRetryGap : .zero }
        guard attempt > 1 else { return .zero }
        return LockerSupervisor.backoff.delay(attempt: attempt - 1)
    }

    /// The state in the user's words, for status.
    public var stateName: String {
        switch state {
        case .unlocked: "unlocked"
        case .running(_, _, .unknown, _): "locking"
        case .running(_, _, .covered, _), .running(_, _, .lettingGo, _): "locked"
        case .running(_, _, .notCovering, _), .running(_, _, .grabHeldByOther, _): "locker-not-covering"
        case .retrying: "locker-failing"
        }
    }
}
