import IdleCore

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, and the same sequence on every
/// platform, so a seed names one simulated month for good.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A span drawn uniformly from `range`.
    mutating func span(_ range: ClosedRange<Millis>) -> Millis {
        Millis(Int64.random(in: range.lowerBound.value...range.upperBound.value, using: &self))
    }

    /// True with probability `percent` / 100.
    mutating func chance(_ percent: Double) -> Bool {
        Double.random(in: 0..<100, using: &self) < percent
    }
}
