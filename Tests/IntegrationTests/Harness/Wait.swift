import Foundation

/// How long a wait may last before the test fails. Generous on purpose: the machine is
/// shared and loaded, and a passing test never waits this long.
let generousTimeout: Duration = .seconds(20)

struct WaitTimedOut: Error, CustomStringConvertible {
    var what: String
    var timeout: Duration
    var context: String

    var description: String {
        "timed out after \(timeout) waiting for \(what)" + (context.isEmpty ? "" : "\n\(context)")
    }
}

/// Polls `condition` until it holds, or throws once `timeout` has passed.
/// The only way these tests wait: on a thing (a file, a process, a log line), never on time.
func waitUntil(
    _ what: String,
    timeout: Duration = generousTimeout,
    every interval: Duration = .milliseconds(25),
    context: () -> String = { "" },
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while true {
        if try await condition() { return }
        if ContinuousClock.now >= deadline {
            throw WaitTimedOut(what: what, timeout: timeout, context: context())
        }
        try await Task.sleep(for: interval)
    }
}

extension Duration {
    /// Whole milliseconds, for comparing with what xprintidle and the agent print.
    var milliseconds: Int {
        let (seconds, attoseconds) = components
        return Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)
    }
}

/// CLOCK_MONOTONIC in milliseconds: the clock TestLocker writes its times in.
func monotonicMilliseconds() -> Int {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return t.tv_sec * 1000 + t.tv_nsec / 1_000_000
}
