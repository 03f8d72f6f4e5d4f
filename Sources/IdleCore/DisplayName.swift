/// An X display name, `[protocol/][host]:display[.screen]`, reduced to what names one
/// X server: `:0`, `:0.0`, `unix:0` and `unix/:0` are the same local display (the
/// agent watches the whole display, every screen, so the screen is left out).
public struct DisplayName: Equatable, Sendable {
    /// Empty for the local display (a Unix socket); otherwise the host, lowercased.
    public var host: String
    public var number: Int

    /// Nil for anything that is not a display name.
    public init?(_ text: String) {
        var rest = Substring(text)
        // `unix/:0`, `tcp/host:0`: a transport before the host.
        var transport: Substring?
        if let slash = rest.firstIndex(of: "/"), !rest[..<slash].contains(":") {
            transport = rest[..<slash]
            guard ["unix", "local", "tcp", "inet", "inet6"].contains(transport!) else { return nil }
            rest = rest[rest.index(after: slash)...]
        }
        guard let colon = rest.lastIndex(of: ":") else { return nil }
        var host = rest[..<colon]
        if host.hasSuffix(":") { return nil }  // `host::0` is DECnet: no X server of today's
        let after = rest[rest.index(after: colon)...]
        let digits = after.prefix { $0.isASCII && $0.isNumber }
        guard !digits.isEmpty, digits.count <= 6, let number = Int(digits) else { return nil }
        let screen = after.dropFirst(digits.count)
        if !screen.isEmpty {
            guard screen.first == ".", screen.count > 1, screen.dropFirst().allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        }
        if host == "unix" || transport == "unix" || transport == "local" { host = "" }
        guard host.allSatisfy({ $0.isLetter || $0.isNumber || "-._[]".contains($0) }) else { return nil }
        self.host = host.lowercased()
        self.number = number
    }

    /// The name the agent's socket and lock file get: `0` for `:0`, `host_10` for `host:10`.
    public var socketName: String { host.isEmpty ? "\(number)" : "\(host)_\(number)" }
}
