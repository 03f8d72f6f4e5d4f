// Shared by every fuzz target. fuzz/run.sh compiles the IdleCore sources and every
// file here into one binary, .build/fuzz/bin/fuzz, and FUZZ_TARGET picks the target
// a run fuzzes: one -wmo compile instead of one per target (the compile, not the
// fuzzing, was most of `make fuzz-short`). Nothing here is part of xidlelock.

import Glibc

/// Every target by the name fuzz/run.sh, the corpus and the dictionary use.
let fuzzTargets: [String: (UnsafePointer<UInt8>?, Int) -> CInt] = [
    "control-protocol": fuzzControlProtocol,
    "flags": fuzzFlags,
    "duration": fuzzDuration,
    "config-file": fuzzConfigFile,
]

nonisolated(unsafe) var chosenTarget: (UnsafePointer<UInt8>?, Int) -> CInt = { _, _ in 0 }

/// libFuzzer calls this once before any input: an unknown or missing FUZZ_TARGET
/// stops the run here, before libFuzzer could take the trap for a finding.
@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutableRawPointer?, _ argv: UnsafeMutableRawPointer?) -> CInt {
    let name = getenv("FUZZ_TARGET").map { String(cString: $0) } ?? ""
    guard let target = fuzzTargets[name] else {
        let known = fuzzTargets.keys.sorted().joined(separator: ", ")
        fputs("fuzz: FUZZ_TARGET=\(name.debugDescription) is not a target (\(known))\n", stderr)
        exit(64)
    }
    chosenTarget = target
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    chosenTarget(data, size)
}

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
