/// The one retry back-off: a delay that starts at `first` and doubles after each use,
/// up to `limit`, where it stays. Each retrying part keeps its own parameters (the
/// desktop's buses 5 s to 5 min, the sound server 1 s to 1 min, the guard link 1 s to
/// 16 s, the locker 1 s to 60 s, logind's reconnect a fixed 2 s); this is only the
/// arithmetic, so every delay is the one the part always had.
public struct Backoff: Sendable, Equatable {
    public let first: Millis
    public let limit: Millis
    /// The delay the next `next()` hands out.
    public private(set) var upcoming: Millis
    /// The last delay handed out was `limit`: the doubling is over.
    public private(set) var reachedLimit = false

    public init(first: Millis, limit: Millis) {
        precondition(first > .zero && first <= limit, "a back-off starts above zero and at most at its limit")
        self.first = first
        self.limit = limit
        upcoming = first
    }

    /// A fixed delay: `every` each time.
    public static func every(_ delay: Millis) -> Backoff { Backoff(first: delay, limit: delay) }

    /// The delay before the next try; the one after it is twice as long, up to `limit`.
    public mutating func next() -> Millis {
        let delay = upcoming
        reachedLimit = delay >= limit
        upcoming = Swift.min(delay + delay, limit)
        return delay
    }

    /// A success: the next delay is `first` again.
    public mutating func reset() { reset(startingAt: first) }

    /// The next delay is `start` (at most `limit`), doubling from there.
    public mutating func reset(startingAt start: Millis) {
        upcoming = Swift.min(start, limit)
        reachedLimit = false
    }

    /// The delay `next()` hands out on its `attempt`-th call after a reset (1: `first`),
    /// without keeping a count: `first` times 2^(attempt - 1), at most `limit`.
    public func delay(attempt: Int) -> Millis {
        var delay = first
        var n = 1
        while n < attempt, delay < limit {
            delay = Swift.min(delay + delay, limit)
            n += 1
        }
        return delay
    }
}
