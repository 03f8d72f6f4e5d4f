/// How `xidlelock idle` prints the idle time.
public enum IdleFormat: String, CaseIterable, Equatable, Sendable {
    /// Whole milliseconds, like xprintidle.
    case ms
    /// Whole seconds.
    case s
    /// `1h 2m 3s`.
    case human
    /// `{"idle_ms":1234}`.
    case json

    static let specs: [OptionSpec<IdleFormat>] = [
        OptionSpec("--format", "FORMAT", "ms (default, like xprintidle), s, human or json.") { f, v throws(UsageError) in
            guard let format = IdleFormat(rawValue: v) else {
                throw UsageError("--format: '\(v)' is not one of ms, s, human, json")
            }
            f = format
        },
    ]

    /// The line `idle` prints (`render` and a newline), handed to `body` as bytes. Whole
    /// milliseconds and seconds are written as digits into a buffer on the stack: status
    /// bars run `idle` many times a minute, and the standard library's integer and string
    /// code this skips cost a page fault per function at its start (that code sits in
    /// one section of the runtime's, which the start-up order cannot move).
    public func withLine<R>(_ idle: Millis, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        guard let value = wholeNumber(idle) else {
            var line = render(idle) + "\n"
            return line.withUTF8 { body(UnsafeRawBufferPointer($0)) }
        }
        // 19 digits, a sign and the newline.
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 21) { buffer in
            var start = buffer.count - 1
            buffer[start] = UInt8(ascii: "\n")
            var rest = value.magnitude
            repeat {
                start -= 1
                buffer[start] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            } while rest > 0
            if value < 0 {
                start -= 1
                buffer[start] = UInt8(ascii: "-")
            }
            return body(UnsafeRawBufferPointer(UnsafeMutableBufferPointer(rebasing: buffer[start...])))
        }
    }

    public func render(_ idle: Millis) -> String {
        if let number = wholeNumber(idle) { return String(number) }
        return self == .json ? "{\"idle_ms\":\(idle.value)}" : Millis(idle.value / 1000 * 1000).description.replacingUnitSeparators()
    }

    /// What the formats that print one whole number print (ms, s); nil for the others.
    private func wholeNumber(_ idle: Millis) -> Int64? {
        switch self {
        case .ms: idle.value
        case .s: idle.value / 1000
        case .human, .json: nil
        }
    }
}

extension String {
    /// `1h2m3s` → `1h 2m 3s`.
    func replacingUnitSeparators() -> String {
        var out = ""
        var previous: Character?
        for c in self {
            if let p = previous, p.isLetter, c.isNumber { out.append(" ") }
            out.append(c)
            previous = c
        }
        return out
    }
}
