import IdleCore
import Testing

@Suite("Durations: the grammar people type and the shortest form printed")
struct MillisTests {
    @Test("valid durations mean what the grammar says", arguments: [
        ("90", 90_000),
        ("0", 0),
        ("007", 7_000),
        ("90s", 90_000),
        ("500ms", 500),
        ("5m", 300_000),
        ("1h30m", 5_400_000),
        ("2m30s", 150_000),
        ("1d", 86_400_000),
        ("0s", 0),
        ("0h30m", 1_800_000),
        ("1s1ms", 1_001),
        ("1m0s", 60_000),
        ("1d2h3m4s5ms", 93_784_005),
        ("1h1ms", 3_600_001),
        ("1500ms", 1_500),
        ("90m", 5_400_000),
    ] as [(String, Int64)])
    func parses(text: String, milliseconds: Int64) {
        #expect(Millis(parsing: text) == Millis(milliseconds))
    }

    @Test("anything else is refused", arguments: [
        "", " ", "-5", "+5", "-5m", "+5m", "1.5h", "1,5h", "0.5s", ".5s", "1e3", "0x10",
        " 5m", "5m ", "5 m", "1h 30m", "\t5m",
        "5x", "5M", "1H", "5S", "5sec", "5min", "5mins", "2hours", "5mm", "5mss", "5us", "5ns",
        "m", "ms", "h30m", "5m30", "1h30", "1m5",
        "30m1h", "1s1m", "1ms1s", "5s1d", "1h1h", "5m5m", "1s1s", "1ms1ms",
        "٥", "５m", "5‌m",
    ])
    func refuses(text: String) {
        #expect(Millis(parsing: text) == nil)
    }

    @Test("ten years is the longest duration, in any spelling", arguments: [
        "3650d", "87600h", "5256000m", "315360000s", "315360000", "315360000000ms",
        "3649d24h", "3649d23h59m59s1000ms",
    ])
    func acceptsTheLimit(text: String) {
        #expect(Millis(parsing: text) == Millis.days3650)
    }

    @Test("one millisecond more than ten years is refused, and so are huge numbers", arguments: [
        "3651d", "87601h", "315360001", "315360001s", "315360000001ms", "3650d1ms", "3650d0h0m0s1ms",
        "3649d24h1ms", "999999999999999", "999999999999999ms", "9999999999999999999999d",
        "9223372036854775807ms", "9223372036854775808",
    ])
    func refusesBeyondTheLimit(text: String) {
        #expect(Millis(parsing: text) == nil)
    }

    @Test("the printed form is the shortest one", arguments: [
        (0, "0s"),
        (1, "1ms"),
        (500, "500ms"),
        (1_000, "1s"),
        (1_001, "1s1ms"),
        (59_999, "59s999ms"),
        (90_000, "1m30s"),
        (600_000, "10m"),
        (5_400_000, "1h30m"),
        (3_600_001, "1h1ms"),
        (86_400_000, "1d"),
        (90_061_001, "1d1h1m1s1ms"),
        (315_360_000_000, "3650d"),
    ] as [(Int64, String)])
    func prints(milliseconds: Int64, text: String) {
        #expect(Millis(milliseconds).description == text)
    }

    @Test("every printed duration reads back as the same duration")
    func roundTrips() {
        var generator = SplitMix64(seed: 0xD0_0D1E)
        var values: [Int64] = [0, 1, 999, 1_000, 1_001, 59_999, 60_000, 3_599_999, 3_600_000,
                               86_399_999, 86_400_000, 86_400_001, Millis.days3650.value]
        // Every scale: values near each unit and spread up to the limit.
        for _ in 0..<2_000 {
            let scale = Int64.random(in: 0...11, using: &generator)
            var bound: Int64 = 1
            for _ in 0..<scale { bound *= 10 }
            values.append(Int64.random(in: 0...min(bound, Millis.days3650.value), using: &generator))
        }
        for value in values {
            let text = Millis(value).description
            #expect(Millis(parsing: text) == Millis(value), "\(value) printed as \(text)")
        }
    }

    @Test("any spelling the grammar allows prints to a form that reads back the same")
    func spellingsRoundTrip() {
        var generator = SplitMix64(seed: 7)
        let units: [(String, Int64)] = [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1)]
        for _ in 0..<1_000 {
            var text = ""
            var total: Int64 = 0
            for (unit, size) in units where generator.chance(50) {
                let n = Int64.random(in: 0...(unit == "d" ? 300 : 5_000), using: &generator)
                text += "\(n)\(unit)"
                total += n * size
            }
            if text.isEmpty { continue }
            let parsed = Millis(parsing: text)
            #expect(parsed == Millis(total), "\(text)")
            if let parsed {
                #expect(Millis(parsing: parsed.description) == parsed, "\(text) → \(parsed)")
            }
        }
    }

    @Test("an instant's suspended time is how far boottime ran ahead of monotonic")
    func suspendedTime() {
        let instant = Instant(monotonic: .seconds(100), boottime: .seconds(160))
        #expect(instant.suspended == .minutes(1))
        #expect(Instant(monotonic: .seconds(7), boottime: .seconds(7)).suspended == .zero)
    }

    @Test("unit constructors agree with the grammar")
    func constructors() {
        #expect(Millis.seconds(90) == Millis(parsing: "90"))
        #expect(Millis.minutes(5) == Millis(parsing: "5m"))
        #expect(Millis.hours(1) + .minutes(30) == Millis(parsing: "1h30m"))
        #expect(Millis.ms(500) == Millis(parsing: "500ms"))
        #expect(Millis.minutes(1) - .seconds(30) == Millis(parsing: "30s"))
    }
}

extension Millis {
    static let days3650 = Millis(3_650 * 86_400_000)
}
