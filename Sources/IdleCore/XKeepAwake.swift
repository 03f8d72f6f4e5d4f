/// One reading of the X server's screensaver (XScreenSaverQueryInfo and XGetScreenSaver).
public struct ScreenSaverReading: Equatable, Sendable {
    public enum State: Equatable, Sendable {
        /// ScreenSaverOff: not active (yet, or suspended by a client).
        case off
        /// ScreenSaverOn: the server's saver is active.
        case on
        /// ScreenSaverDisabled: the timeout is 0 (`xset s off`).
        case disabled
    }

    public var state: State
    public var idle: Millis
    /// Time until the saver activates (off) or since it did (on).
    public var tilOrSince: Millis
    /// The server's saver timeout (0: off).
    public var timeout: Millis
    /// How long ago the agent set that timeout; nil when it did not.
    public var sinceTimeoutSet: Millis?
    /// DPMS is disabled (`xset -dpms`), where the server tells; read only while the
    /// saver is off (a presentation turns both off).
    public var dpmsOff: Bool

    public init(state: State, idle: Millis, tilOrSince: Millis, timeout: Millis, sinceTimeoutSet: Millis? = nil, dpmsOff: Bool = false) {
        self.state = state
        self.idle = idle
        self.tilOrSince = tilOrSince
        self.timeout = timeout
        self.sinceTimeoutSet = sinceTimeoutSet
        self.dpmsOff = dpmsOff
    }

    /// A client has suspended the saver (XScreenSaverSuspend: mpv, SDL games, browsers
    /// without a D-Bus service). The server shows it only once the idle time has passed
    /// its timeout: the state then stays Off with nothing left to wait, where an
    /// unsuspended server says On.
    /// Right at the timeout the server may not have turned its saver on yet, so a
    /// reading counts only a second past it. And the server's saver timer restarts
    /// when the timeout is set: lowered below the idle time already there, the saver
    /// stays Off with nothing left to wait until a whole new timeout has passed. Taken
    /// for a suspension, that held the first lock off by up to a lock time.
    public var suspendedByClient: Bool {
        guard state == .off, timeout > .zero, tilOrSince == .zero else { return false }
        let timerRan = Swift.min(idle, sinceTimeoutSet ?? idle)
        return timerRan >= timeout + ScreenSaverReading.activationGrace
    }

    /// How long past its timeout the server surely has turned its saver on.
    public static let activationGrace = Millis.seconds(1)
}

/// A client that suspends the server's saver now (XScreenSaverSuspend), as the
/// X-Resource extension shows it: the server keeps a resource of type "SaverSuspend"
/// for each suspending client for as long as the suspension lasts, and frees it when
/// the client resumes the saver or disconnects.
public struct XSaverSuspender: Hashable, Sendable {
    /// The client's resource base: one X connection, for as long as it is open.
    public var client: UInt
    /// Its process, where the server knows it (a local client); nil otherwise.
    public var pid: Int32?
    /// The process's name (its full program name where /proc tells).
    public var name: String

    public init(client: UInt, pid: Int32?, name: String = "") {
        self.client = client
        self.pid = pid
        self.name = name
    }

    /// `pid 4242 (mpv), X client 0x600000`: the real caller, as the server vouches for it.
    public var who: String {
        let connection = "X client 0x\(String(client, radix: 16))"
        guard let pid, pid > 0 else { return connection + " (pid unknown)" }
        return "pid \(pid)" + (name.isEmpty ? "" : " (\(ClientText.sanitized(name, maxBytes: 64)))") + ", " + connection
    }
}

/// The keep-awake signals of the X server, as holds: the saver turned off while the
/// agent runs (`xdg-screensaver suspend` on a bare window manager runs `xset s off`),
/// and a client's XScreenSaverSuspend. A saver already off when the agent starts is
/// the user's own setting, not a hold.
///
/// A suspension is followed through X-Resource where the server has it: each
/// suspending client is a hold of its own, named, from the first look until it ends,
/// whatever the idle time (a player's resets every few seconds keep the idle time
/// below any saver timeout). Without X-Resource it shows only once the idle time has
/// passed the saver timeout (`ScreenSaverReading.suspendedByClient`).
public struct XKeepAwake: Equatable, Sendable {
    public enum Hold: String, Equatable, Sendable, CaseIterable {
        case saverOff = "the X screensaver was turned off (xset s off: a presentation, xdg-screensaver suspend)"
        case suspended = "an X client suspended the screensaver (XScreenSaverSuspend: a video player, a game)"
    }

    public enum Change: Equatable, Sendable {
        case began(Hold)
        case ended(Hold)
    }

    /// The saver was off when the agent started: the user's setting.
    public let offAtStart: Bool
    public private(set) var holds: Set<Hold> = []
    /// The clients that suspend the saver, as X-Resource last showed them.
    public private(set) var suspenders: [XSaverSuspender] = []
    /// DPMS was off too when the saver-off hold began.
    private var dpmsOffWithSaver = false

    public init(atStart reading: ScreenSaverReading) {
        offAtStart = reading.state == .disabled || reading.timeout == .zero
    }

    /// The holds a new reading begins and ends. `suspenders`: the suspending clients
    /// as X-Resource shows them (then they alone tell a suspension); nil when the
    /// server cannot tell (then the reading does, past the saver timeout).
    public mutating func update(_ reading: ScreenSaverReading, suspenders: [XSaverSuspender]? = nil) -> [Change] {
        var now: Set<Hold> = []
        if reading.state == .disabled && !offAtStart { now.insert(.saverOff) }
        if let suspenders {
            self.suspenders = suspenders
            if !suspenders.isEmpty { now.insert(.suspended) }
        } else {
            self.suspenders = []
            if reading.suspendedByClient { now.insert(.suspended) }
        }
        var changes: [Change] = []
        for hold in Hold.allCases {
            if now.contains(hold) && !holds.contains(hold) { changes.append(.began(hold)) }
            if !now.contains(hold) && holds.contains(hold) { changes.append(.ended(hold)) }
        }
        if changes.contains(.began(.saverOff)) { dpmsOffWithSaver = reading.dpmsOff }
        holds = now
        return changes
    }

    /// Whether anything holds: the end of a hold is not announced, so the agent looks
    /// again now and then while this is true (never otherwise).
    public var isHolding: Bool { !holds.isEmpty }

    /// What the X server holds now, as the gate takes it: the saver turned off (said
    /// with what ends it: the server keeps it off after the program that turned it off
    /// has ended), and each suspending client by name, or one anonymous suspension.
    public var claims: [HoldClaim] {
        var claims: [HoldClaim] = []
        if holds.contains(.saverOff) {
            claims.append(HoldClaim(key: "saverOff", who: "the X server", why: XKeepAwake.saverOffWhy(dpmsOff: dpmsOffWithSaver)))
        }
        if holds.contains(.suspended) {
            if suspenders.isEmpty {
                claims.append(HoldClaim(key: "suspended", who: "the X server", why: Hold.suspended.rawValue))
            }
            for suspender in suspenders {
                claims.append(HoldClaim(key: "suspended 0x\(String(suspender.client, radix: 16))", who: suspender.who,
                                        why: XKeepAwake.suspendedWhy))
            }
        }
        return claims
    }

    /// The saver-off hold's reason: what turned it off, and what ends it. The X server
    /// keeps no owner of the setting: the program that set it may be gone (LibreOffice
    /// killed mid-show), and only `xset s on` (or the program's own restore) ends it.
    public static func saverOffWhy(dpmsOff: Bool) -> String {
        Hold.saverOff.rawValue + "; the server keeps it off after the program that did it has ended: `xset s on` ends this hold"
            + (dpmsOff ? " (DPMS is off too: `xset +dpms` lets the monitor sleep again)" : "")
    }

    /// A named suspension's reason.
    public static let suspendedWhy = "suspended the X screensaver (XScreenSaverSuspend: a video player, a game); held until it resumes it or closes its X connection"

    /// The saver activated: by its timeout (the agent's own deadline handles that), or
    /// forced (`xset s activate`), which asks for a lock now, as xss-lock does.
    public static func isForcedActivation(_ reading: ScreenSaverReading) -> Bool {
        reading.state == .on && (reading.timeout == .zero || reading.idle + .ms(500) < reading.timeout)
    }

    /// The saver timeout the agent sets while it runs, so that a client's suspension
    /// shows by the lock time: 2 s before the lock time (whole seconds, at least 1 s),
    /// when the server's is longer. Nil: leave the server's as it is (also when it is
    /// off: the user's setting).
    public static func timeoutToSet(server: Millis, lockAfter: Millis) -> Millis? {
        guard server > .zero else { return nil }
        let wanted = Millis.seconds(Swift.max((lockAfter.value - 2000) / 1000, 1))
        return server > wanted ? wanted : nil
    }
}
