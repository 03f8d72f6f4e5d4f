import IdleCore
import Testing

@Suite("Client text reaches logs, status and events escaped and bounded")
struct ClientTextTests {
    @Test("control characters, C1, line separators and bidi overrides are made visible", arguments: [
        ("film\nxidlelock: error: forged", "film\\u{a}xidlelock: error: forged"),
        ("red\u{1b}[31m", "red\\u{1b}[31m"),
        ("tab\there", "tab\\u{9}here"),
        ("del\u{7f}", "del\\u{7f}"),
        ("c1\u{85}", "c1\\u{85}"),
        ("line\u{2028}sep", "line\\u{2028}sep"),
        ("bidi\u{202e}txt", "bidi\\u{202e}txt"),
        ("plain é 日本", "plain é 日本"),
    ])
    func escaped(raw: String, shown: String) {
        #expect(ClientText.sanitized(raw) == shown)
    }

    @Test("a long text is cut on a character boundary, never emptied", arguments: [255, 256, 257, 300])
    func cut(length: Int) {
        let text = String(repeating: "é", count: length)  // two bytes each
        let cut = ClientText.sanitized(text, maxBytes: 256)
        #expect(!cut.isEmpty)
        #expect(cut.utf8.count <= 256)
        #expect(cut.hasSuffix("…") == (text.utf8.count > 256))
        #expect(cut.dropLast(cut.hasSuffix("…") ? 1 : 0).allSatisfy { $0 == "é" })
    }

    @Test("status and events printed for people never carry a control character")
    func humanText() throws {
        let status = try JSONValue(parsing: #"{"v":1,"ok":true,"state":"inhibited","idle_ms":5,"inhibitors":[{"id":1,"source":"socket","who":"pid 1 (x\u001b[2J)","why":"a\nb","remaining_ms":null}]}"#)
        let text = HumanText.status(status)
        #expect(!text.unicodeScalars.contains { $0.value == 0x1B })
        #expect(text.contains("inhibited by pid 1 (x\\u{1b}[2J) [socket] (while it runs): a\\u{a}b"))
        let event = try JSONValue(parsing: #"{"v":1,"event":"inhibited","id":1,"who":"w\u0007","why":"y\r"}"#)
        #expect(HumanText.event(event) == "inhibited by w\\u{7}: y\\u{d}")
    }
}
