/// The two string searches this module needs, without _StringProcessing (see
/// Package.swift: it is left out of the binary for start-up time).
extension Substring {
    /// The first place `target` (not empty) occurs, compared as characters.
    public func firstRange(matching target: String) -> Range<Index>? {
        guard let first = target.first else { return nil }
        var start = startIndex
        while let found = self[start...].firstIndex(of: first) {
            if self[found...].starts(with: target) {
                return found..<index(found, offsetBy: target.count)
            }
            start = index(after: found)
        }
        return nil
    }
}

extension String {
    public func firstRange(matching target: String) -> Range<Index>? { self[...].firstRange(matching: target) }

    /// Every non-overlapping `target` (not empty), left to right, replaced by `replacement`.
    func replacingEvery(_ target: String, with replacement: String) -> String {
        guard !target.isEmpty else { return self }
        var out = ""
        var rest = self[...]
        while let found = rest.firstRange(matching: target) {
            out += rest[..<found.lowerBound]
            out += replacement
            rest = rest[found.upperBound...]
        }
        return out + rest
    }
}
