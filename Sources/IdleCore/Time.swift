/// A span of time in whole milliseconds: an idle time, a lock time, a gap.
///
/// Points in time are `TimePoint`s of a named clock; the wall clock is never used
/// because it jumps.
public struct Millis: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var value: Int64

    public init(_ value: Int64) { self.value = value }

    public static let zero = Millis(0)
    /// Later than any deadline, with room to add to it.
    public static let max = Millis(Int64.max / 4)
    public static func ms(_ n: Int64) -> Millis { Millis(n) }
    public static func seconds(_ n: Int64) -> Millis { Millis(n * 1000) }
    public static func minutes(_ n: Int64) -> Millis { Millis(n * 60_000) }
    public static func hours(_ n: Int64) -> Millis { Millis(n * 3_600_000) }

    public static func < (a: Millis, b: Millis) -> Bool { a.value < b.value }
    public static func + (a: Millis, b: Millis) -> Millis { Millis(a.value + b.value) }
    public static func - (a: Millis, b: Millis) -> Millis { Millis(a.value - b.value) }
    public static func += (a: inout Millis, b: Millis) { a.value += b.value }

    /// The duration grammar, shortest form: `1h30m`, `90s`, `500ms`, `0s`.
    public var description: String {
        if value == 0 { return "0s" }
        var rest = value < 0 ? -value : value
        var text = value < 0 ? "-" : ""
        for (unit, size) in Millis.units where rest >= size {
            text += "\(rest / size)\(unit)"
            rest %= size
        }
        return text
    }

    /// Units from largest to smallest; a duration names each at most once, in this order.
    static let units: [(String, Int64)] = [
        ("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1),
    ]

    /// Parses the duration grammar: a bare number is seconds (`90`); otherwise one
    /// or more number-unit pairs with units `d`, `h`, `m`, `s`, `ms`, largest
    /// first, each at most once (`1h30m`, `90s`, `500ms`, `2m30s`).
    /// Returns nil for anything else, including signs and fractions.
    public init?(parsing text: String) {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty else { return nil }
        if bytes.allSatisfy({ $0 >= 48 && $0 <= 57 }) {
            guard let seconds = Millis.number(bytes[...]), seconds <= Millis.limit / 1000 else { return nil }
            self.value = seconds * 1000
            return
        }
        var total: Int64 = 0
        var i = 0
        var nextUnit = 0  // units must come largest first, each once
        while i < bytes.count {
            let start = i
            while i < bytes.count, bytes[i] >= 48, bytes[i] <= 57 { i += 1 }
            guard i > start, let number = Millis.number(bytes[start..<i]) else { return nil }
            let unitStart = i
            while i < bytes.count, (bytes[i] >= 97 && bytes[i] <= 122) { i += 1 }
            let unit = String(decoding: bytes[unitStart..<i], as: UTF8.self)
            guard let index = Millis.units[nextUnit...].firstIndex(where: { $0.0 == unit }) else { return nil }
            let size = Millis.units[index].1
            guard number <= (Millis.limit - total) / size else { return nil }
            total += number * size
            nextUnit = index + 1
        }
        self.value = total
    }

    /// Ten years: far beyond any idle time, far below overflow.
    static let limit: Int64 = 10 * 365 * 86_400_000

    private static func number(_ digits: ArraySlice<UInt8>) -> Int64? {
        guard !digits.isEmpty, digits.count <= 15 else { return nil }
        var n: Int64 = 0
        for d in digits { n = n * 10 + Int64(d - 48) }
        return n
    }
}

/// The clocks the agent reads. Each instant names its clock in its type, so that a
/// monotonic instant cannot be compared with, or subtracted from, a boottime one.
public protocol ClockKind: Sendable {}

/// CLOCK_MONOTONIC: stops while the machine is suspended. The X server's idle
/// counter and poll(2) timeouts run on it.
public enum MonotonicClock: ClockKind {}

/// CLOCK_BOOTTIME: keeps counting while the machine is suspended. Every deadline
/// of the state machine is on it, so that time asleep counts as idle time.
public enum BoottimeClock: ClockKind {}

/// A point in time on one clock, in whole milliseconds since that clock's zero.
public struct TimePoint<Clock: ClockKind>: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var sinceZero: Millis

    public init(_ sinceZero: Millis) { self.sinceZero = sinceZero }

    /// The clock's own zero (boot, for both clocks of the agent).
    public static var zero: TimePoint { TimePoint(.zero) }
    public static func ms(_ n: Int64) -> TimePoint { TimePoint(Millis(n)) }
    public static func seconds(_ n: Int64) -> TimePoint { TimePoint(.seconds(n)) }
    public static func minutes(_ n: Int64) -> TimePoint { TimePoint(.minutes(n)) }
    public static func hours(_ n: Int64) -> TimePoint { TimePoint(.hours(n)) }

    public static func < (a: TimePoint, b: TimePoint) -> Bool { a.sinceZero < b.sinceZero }
    public static func + (a: TimePoint, b: Millis) -> TimePoint { TimePoint(a.sinceZero + b) }
    public static func - (a: TimePoint, b: Millis) -> TimePoint { TimePoint(a.sinceZero - b) }
    public static func - (a: TimePoint, b: TimePoint) -> Millis { a.sinceZero - b.sinceZero }
    public static func += (a: inout TimePoint, b: Millis) { a.sinceZero += b }

    public var description: String { "\(sinceZero)" }
}

public typealias MonotonicInstant = TimePoint<MonotonicClock>
public typealias BoottimeInstant = TimePoint<BoottimeClock>

/// One reading of both clocks, taken together at a wake-up.
public struct Instant: Equatable, Sendable {
    public var monotonic: MonotonicInstant
    public var boottime: BoottimeInstant

    public init(monotonic: MonotonicInstant, boottime: BoottimeInstant) {
        self.monotonic = monotonic
        self.boottime = boottime
    }

    /// Time spent suspended since boot: the growth of the clocks' difference.
    public var suspended: Millis { boottime.sinceZero - monotonic.sinceZero }

    /// Both clocks moved on by `span` of waking time.
    public static func + (a: Instant, span: Millis) -> Instant {
        Instant(monotonic: a.monotonic + span, boottime: a.boottime + span)
    }
}
