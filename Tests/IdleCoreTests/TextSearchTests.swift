@testable import IdleCore
import Testing

/// The searches that stand in for _StringProcessing's (left out of the binary).
@Suite("Text search without _StringProcessing")
struct TextSearchTests {
    @Test("every occurrence is replaced, left to right, never overlapping", arguments: [
        ("a  b   c", "  ", " ", "a b  c"),
        ("it's", "'", "'\\''", "it'\\''s"),
        ("aaa", "aa", "b", "ba"),
        ("x:y:z", ":", "\\:", "x\\:y\\:z"),
        ("none here", "?", "!", "none here"),
        ("", "a", "b", ""),
        ("é e\u{301}", "é", "e", "e e"),  // compared as characters: both spellings of é
    ])
    func replaced(text: String, target: String, replacement: String, expected: String) {
        #expect(text.replacingEvery(target, with: replacement) == expected)
    }

    @Test("an empty target changes nothing and is found nowhere")
    func emptyTarget() {
        #expect("abc".replacingEvery("", with: "x") == "abc")
        #expect("abc".firstRange(matching: "") == nil)
    }

    @Test("the first occurrence is found after a false start", arguments: [
        ("ab. cd. ef", ". ", 2),
        ("aab", "ab", 1),
        ("a.b. c", ". ", 3),
        ("abc", "abcd", nil),
        ("abc", "c", 2),
    ])
    func firstRange(text: String, target: String, offset: Int?) {
        let found = text.firstRange(matching: target)
        #expect(found.map { text.distance(from: text.startIndex, to: $0.lowerBound) } == offset)
        if let found { #expect(String(text[found]) == target) }
    }
}
