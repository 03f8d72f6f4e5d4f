import IdleCore

extension SplitMix64 {
    /// A span drawn uniformly from `range`.
    mutating func span(_ range: ClosedRange<Millis>) -> Millis {
        Millis(Int64.random(in: range.lowerBound.value...range.upperBound.value, using: &self))
    }

    /// True with probability `percent` / 100.
    mutating func chance(_ percent: Double) -> Bool {
        Double.random(in: 0..<100, using: &self) < percent
    }
}
