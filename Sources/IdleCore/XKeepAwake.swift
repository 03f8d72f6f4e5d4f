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

    public init(state: State, idle: Millis, tilOrSince: Millis, timeout: Millis, sinceTimeoutSet: Millis? = nil) {
        self.state = state
        self.idle = idle
        self.tilOrSince = tilOrSince
        self.timeout = timeout
        self.sinceTimeoutSet = sinceTimeoutSet
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

/// The keep-awake signals of the X server, as holds: the saver turned off while the
/// agent runs (`xdg-screensaver suspend` on a bare window manager runs `xset s off`),
/// and a client's XScreenSaverSuspend. A saver already off when the agent starts is
/// the user's own setting, not a hold.
public struct XKeepAwake: Equatable, Sendable {
    public enum Hold: String, Equatable, Sendable, CaseIterable {
        case saverOff = "the X screensaver was turned off (xset s off, xdg-screensaver suspend)"
        case suspended = "an X client suspended the screensaver (XScreenSaverSuspend: a video player, a game)"
    }

    public enum Change: Equatable, Sendable {
        case began(Hold)
        case ended(Hold)
    }

    /// The saver was off when the agent started: the user's setting.
    public let offAtStart: Bool
    public private(set) var holds: Set<Hold> = []

    public init(atStart reading: ScreenSaverReading) {
        offAtStart = reading.state == .disabled || reading.timeout == .zero
    }

    /// The holds a new reading begins and ends.
    public mutating func update(_ reading: ScreenSaverReading) -> [Change] {
        var now: Set<Hold> = []
        if reading.state == .disabled && !offAtStart { now.insert(.saverOff) }
        if reading.suspendedByClient { now.insert(.suspended) }
        var changes: [Change] = []
        for hold in Hold.allCases {
            if now.contains(hold) && !holds.contains(hold) { changes.append(.began(hold)) }
            if !now.contains(hold) && holds.contains(hold) { changes.append(.ended(hold)) }
        }
        holds = now
        return changes
    }

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
