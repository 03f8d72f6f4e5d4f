/// Text that comes from a client (an inhibitor's why, a process name): it reaches
/// the log, status and events, so control characters are made visible and the
/// length is bounded on a character boundary.
public enum ClientText {
    public static func sanitized(_ text: String, maxBytes: Int = 256) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            let v = scalar.value
            if v < 0x20 || v == 0x7F || (0x80...0x9F).contains(v) || v == 0x2028 || v == 0x2029
                || (0x202A...0x202E).contains(v) || (0x2066...0x2069).contains(v) {
                out += "\\u{\(String(v, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return clipped(out, maxBytes: maxBytes)
    }

    /// At most `maxBytes` of UTF-8, cut between characters and marked with "…"; never
    /// emptied by a cut inside a character.
    public static func clipped(_ text: String, maxBytes: Int = 256) -> String {
        guard text.utf8.count > maxBytes else { return text }
        var cut = ""
        var bytes = 0
        for c in text {
            let size = c.utf8.count
            if bytes + size + 3 > maxBytes { break }  // "…" takes 3 bytes
            cut.append(c)
            bytes += size
        }
        return cut + "…"
    }

    /// What a D-Bus caller says of itself, for a hold's reason: `app: reason`, or the
    /// one that is not empty (the portal relays an empty app id), or "": never a
    /// separator beside nothing. Each part sanitized and bounded on its own, so that a
    /// long reason never pushes the application's name out.
    public static func appAndReason(_ app: String, _ reason: String, appBytes: Int = 64, reasonBytes: Int = 160) -> String {
        let parts = [sanitized(app, maxBytes: appBytes), sanitized(reason, maxBytes: reasonBytes)]
        return parts.filter { !$0.isEmpty }.joined(separator: ": ")
    }
}
