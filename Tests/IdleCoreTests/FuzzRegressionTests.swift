import IdleCore
import Testing

/// Inputs the fuzz targets (fuzz/) found, each kept as a test so the fix stays.
@Suite("Fuzz regressions")
struct FuzzRegressionTests {
    /// The inhibit request `xidlelock CMD` sends, or nil.
    private func inhibitWhy(_ args: [String]) throws -> String? {
        guard case .client(let client) = try Invocation.parse(args),
              case .inhibit(let why, _) = client.request else { return nil }
        return why
    }

    /// fuzz/run.sh flags: `inhibit -- CMD` whose "while running: CMD" was cut at 256
    /// bytes inside a multi-byte character came out as an empty why (the cut UTF-8
    /// did not decode, and `?? ""` threw the whole text away).
    @Test("inhibit -- CMD with a long non-ASCII command keeps its why, cut at a character")
    func inhibitWhyCutInsideACharacter() throws {
        // 19 bytes of "while running: mpv " and 2-byte characters: byte 256 ends mid-character.
        let film = String(repeating: "é", count: 200)
        let why = try #require(try inhibitWhy(["inhibit", "--", "mpv", film]))
        #expect(why.hasPrefix("while running: mpv éé"))
        #expect(why.utf8.count <= 256 && why.utf8.count >= 255)
        // And the agent takes it as sent.
        #expect(try ControlRequest.parse(ControlRequest.inhibit(why: why, duration: nil).line) == .inhibit(why: why, duration: nil))
    }

    @Test("the cut never splits a character, whatever its length", arguments: 1...4)
    func inhibitWhyCutAtEveryOffset(_ pad: Int) throws {
        let command = String(repeating: "x", count: pad) + String(repeating: "🎬", count: 100)
        let why = try #require(try inhibitWhy(["inhibit", "--", command]))
        #expect(why.hasPrefix("while running: " + String(repeating: "x", count: pad) + "🎬"))
        #expect(why.utf8.count <= 256 && why.utf8.count > 256 - 4)
        #expect(!why.unicodeScalars.contains("\u{FFFD}"))
    }
}
