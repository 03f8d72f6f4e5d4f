// Fuzz target: the duration grammar (`Millis(parsing:)`) every DURATION flag
// and the shortest form (`Millis.description`) every message and status use.

func fuzzDuration(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let text = fuzzString(data, size)
    if let value = Millis(parsing: text) {
        guard value.value >= 0, value.value <= tenYears else { finding("parsed \(value.value) ms, outside 0...10 years", text) }
        // Only digits and unit letters: no signs, spaces, fractions or exponents.
        guard !text.isEmpty, text.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x7A).contains($0) }) else {
            finding("accepted a character outside the grammar", text)
        }
        // A bare number is seconds.
        if text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) {
            guard value.value % 1000 == 0 else { finding("a bare number did not give whole seconds: \(value.value) ms", text) }
        }
        roundTrip(value, text)
    }
    // Any duration in range prints in a form that parses back: take the value from
    // the input's first eight bytes.
    var raw: UInt64 = 0
    if let data { for b in UnsafeBufferPointer(start: data, count: min(size, 8)) { raw = raw << 8 | UInt64(b) } }
    roundTrip(Millis(Int64(raw % UInt64(tenYears + 1))), text)
    return 0
}

func roundTrip(_ value: Millis, _ text: String) {
    let printed = value.description
    guard let again = Millis(parsing: printed) else { finding("\(value.value) ms prints as \(printed.debugDescription), which does not parse", text) }
    guard again == value else { finding("\(value.value) ms prints as \(printed.debugDescription), which parses as \(again.value) ms", text) }
}
