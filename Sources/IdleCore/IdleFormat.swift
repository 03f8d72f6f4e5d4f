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

    public func render(_ idle: Millis) -> String {
        switch self {
        case .ms: String(idle.value)
        case .s: String(idle.value / 1000)
        case .human: Millis(idle.value / 1000 * 1000).description.replacingUnitSeparators()
        case .json: "{\"idle_ms\":\(idle.value)}"
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
