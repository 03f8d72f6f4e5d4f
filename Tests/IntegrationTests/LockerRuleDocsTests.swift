import Foundation
import Testing

/// The locker rule is said in the same words by `xidlelock --help`, README.md and the
/// man page, so that none of them drifts from what the agent does.
@Suite struct LockerRuleDocsTests {
    static let rule = "The screen counts as unlocked only when the locker exits 0 after it held the screen."

    /// Text with roff requests and font escapes removed and whitespace collapsed.
    static func plain(_ text: String) -> String {
        text.split(separator: "\n").map { line in
            line.hasPrefix(".") ? String(line.drop { $0 != " " }) : String(line)
        }.joined(separator: " ")
            .replacingOccurrences(of: "\\-", with: "-")
            .replacingOccurrences(of: "**", with: "")
            .split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ")
    }

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    @Test("help, README and man page state the locker rule in the same words", arguments: ["help", "README.md", "man/xidlelock.1"])
    func rule(source: String) async throws {
        let text: String
        if source == "help" {
            let result = try await Sandbox.with(display: false) { s in try await s.run(agentBinary, ["--help"]) }
            text = result.stdout
        } else {
            text = try String(contentsOf: Self.root.appending(path: source), encoding: .utf8)
        }
        #expect(Self.plain(text).contains(Self.rule), "\(source) does not state the locker rule as: \(Self.rule)")
    }
}
