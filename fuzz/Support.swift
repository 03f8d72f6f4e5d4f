// Shared by every fuzz target (fuzz/run.sh compiles it, one target file and the
// IdleCore sources into one binary). Nothing here is part of xidlelock.

/// The fuzzer's bytes as the program would see them: invalid UTF-8 is repaired,
/// as `String(decoding:as:)` does for socket lines and CommandLine.arguments.
func fuzzString(_ data: UnsafePointer<UInt8>?, _ size: Int) -> String {
    guard let data, size > 0 else { return "" }
    return String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
}

/// An invariant does not hold: trap, so libFuzzer saves the input as a crash.
/// The message names the invariant and shows the input escaped, one line.
func finding(_ what: String, _ input: String) -> Never {
    fatalError("FUZZ FINDING: \(what); input: \(input.debugDescription)")
}

/// Ten years in milliseconds: no duration anywhere may be longer.
let tenYears: Int64 = 10 * 365 * 86_400_000
