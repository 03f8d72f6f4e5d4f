// Hot corners (`--corners`, as xautolock's -corners): the pointer resting in a
// corner locks the screen, or keeps it from locking.
//
// The pointer's position is never asked per motion event (raw events carry none,
// and listening pauses after input anyway). One check a rest is enough: the check
// comes at the last activity plus the check time, and input since then shows as
// server activity at that wake-up, which starts the wait again. So a moving pointer
// costs one wake-up per check time, a resting one nothing more.

/// One corner of a monitor (or of the root window when RandR tells no monitors).
public enum ScreenCorner: Int, CaseIterable, Equatable, Sendable, CustomStringConvertible {
    case topLeft, topRight, bottomLeft, bottomRight

    public var description: String {
        switch self {
        case .topLeft: "top-left"
        case .topRight: "top-right"
        case .bottomLeft: "bottom-left"
        case .bottomRight: "bottom-right"
        }
    }
}

/// What a corner does while the pointer rests in it.
public enum CornerAction: Character, Equatable, Sendable {
    /// Lock once the pointer has rested there for the corner delay.
    case lock = "+"
    /// Never lock while it rests there.
    case never = "-"
    case nothing = "0"
}

/// The four corners' actions: `--corners XXXX`, top-left, top-right, bottom-left, bottom-right.
public struct HotCorners: Equatable, Sendable, CustomStringConvertible {
    public var actions: [CornerAction]

    public init(_ text: String) throws(UsageError) {
        let actions = text.compactMap(CornerAction.init(rawValue:))
        guard text.count == 4, actions.count == 4 else {
            throw UsageError("--corners: '\(text)' is not four of +, - and 0 (top-left, top-right, bottom-left, bottom-right; e.g. 00+-)")
        }
        self.actions = actions
    }

    public subscript(_ corner: ScreenCorner) -> CornerAction { actions[corner.rawValue] }

    public var description: String { String(actions.map(\.rawValue)) }

    /// The same corners with `-` read as `0` (`--secure`: nothing may hold the lock off).
    public var withoutHolds: HotCorners {
        var copy = self
        copy.actions = actions.map { $0 == .never ? .nothing : $0 }
        return copy
    }

    public var doesNothing: Bool { actions.allSatisfy { $0 == .nothing } }
}

/// The corner settings the state machine needs (the size is the edge's business).
public struct CornerSettings: Equatable, Sendable {
    public var corners: HotCorners
    /// How long the pointer rests in a `+` corner before the lock.
    public var delay: Millis

    public init(corners: HotCorners, delay: Millis) {
        self.corners = corners
        self.delay = delay
    }
}

/// Where the pointer rests, as the edge found it (the answer to `.checkPointerCorner`).
public struct PointerRest: Equatable, Sendable {
    /// The corner it is in; nil in none, or when the server did not say.
    public var corner: ScreenCorner?
    /// Its position on the root window, to tell a new rest from the same one.
    public var position: PointerPosition

    public init(corner: ScreenCorner?, position: PointerPosition) {
        self.corner = corner
        self.position = position
    }
}

public struct PointerPosition: Equatable, Sendable {
    public var x: Int32
    public var y: Int32
    public init(x: Int32, y: Int32) {
        self.x = x
        self.y = y
    }
}

/// The hot corners' part of the machine: what it knows of the pointer's rest, and
/// when it looks again. The machine carries out what follows (a hold, a lock).
struct CornerWatch: Sendable {
    let settings: CornerSettings?
    /// The first stage's idle time: a `-` corner must be seen before anything fires.
    let firstStage: Millis?
    /// The last activity whose rest the pointer's corner was checked for.
    var checkedFor: BoottimeInstant?
    /// The `+` corner the pointer rests in (its lock not yet due), and where.
    var resting: ScreenCorner?
    var restingAt: PointerPosition?
    /// Where the pointer rested when a corner last locked: the same rest does not lock twice.
    var lockedAt: PointerPosition?

    /// When the pointer's corner is asked next: the corner delay after the last activity,
    /// or half-way to the first stage when that comes sooner (a `-` corner must be seen
    /// before anything fires). Nil when there are no corners, or this rest was checked.
    func checkDue(restFrom lastActivity: BoottimeInstant) -> BoottimeInstant? {
        guard let settings, checkedFor != lastActivity, let firstStage else { return nil }
        return lastActivity + Swift.min(settings.delay, Millis(firstStage.value / 2))
    }

    /// A `+` corner whose delay has not passed at the check: the lock comes then.
    func lockDue(restFrom lastActivity: BoottimeInstant) -> BoottimeInstant? {
        guard let settings, let corner = resting, settings.corners[corner] == .lock else { return nil }
        return lastActivity + settings.delay
    }
}

extension IdleMachine {
    mutating func checkCornerIfDue(_ now: Instant, _ out: inout [Action]) {
        guard let due = corners.checkDue(restFrom: lastActivity), now.boottime >= due else { return }
        corners.checkedFor = lastActivity
        out.append(.checkPointerCorner)
    }

    /// The answer to `.checkPointerCorner`.
    mutating func pointerRests(_ rest: PointerRest, _ now: Instant, _ out: inout [Action]) {
        if corners.lockedAt != rest.position { corners.lockedAt = nil }
        guard let settings = config.corners, let corner = rest.corner else { return }
        switch settings.corners[corner] {
        case .nothing:
            break
        case .lock:
            // The pointer left where a corner lock found it: after the unlock, a user who
            // reads without touching anything is not locked out again and again.
            if corners.lockedAt == rest.position {
                out.append(.log(.debug, "the pointer still rests where the \(corner) corner locked: not locking again until it moves"))
                return
            }
            corners.resting = corner
            corners.restingAt = rest.position
            out.append(.log(.debug, "the pointer rests in the \(corner) corner: locking \(settings.delay) after it stopped"))
        case .never:
            holdsNow(HoldReport(HoldOwner(.corner), [HoldClaim(key: "\(corner)", who: "the pointer in the \(corner) corner",
                                                              why: "--corners \(settings.corners)")]), now, &out)
        }
    }

    mutating func lockFromCornerIfDue(_ now: Instant, _ out: inout [Action]) {
        guard let due = corners.lockDue(restFrom: lastActivity), now.boottime >= due, let corner = corners.resting else { return }
        corners.resting = nil
        corners.lockedAt = corners.restingAt
        guard !lockerActive else { return }
        lockRequest(from: "the pointer in the \(corner) corner", now, &out)
    }

    /// Activity: the pointer left its rest (or a key was pressed); a `-` corner's hold ends.
    mutating func pointerMoved(_ now: Instant, _ out: inout [Action]) {
        corners.resting = nil
        holdsNow(HoldReport(HoldOwner(.corner), []), now, &out)
    }
}
