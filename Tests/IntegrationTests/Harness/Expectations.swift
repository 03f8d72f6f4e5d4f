import Testing

/// Shell snippets for lockers and hooks. Each writes what it saw into files in the
/// sandbox and records its pid in a `*.pid` file so that clean-up can end it.
enum Script {
    /// A locker that records the server's idle time when it starts (lock.idle), then
    /// holds the lock for a minute.
    static let locker = "xprintidle > lock.idle; echo $$ > locker.pid; exec sleep 60"

    /// A real locker the test can unlock: it grabs the keyboard, appends its pid to
    /// `lockers.pids` once it holds the screen, and exits `status` when the file
    /// `unlock` appears, never sooner than `hold` ms after its start (no one
    /// types a password faster; a quicker exit 0 is a locker that returned at once).
    static func grabbingLocker(hold: Int = 1100, status: Int = 0, unlock: String = "unlock") -> String {
        "exec \(testLockerBinary) --hold \(hold) --exit \(status) --unlock \(unlock)"
    }
}

/// Lateness of every lock the tests measured: the server's idle time when the locker
/// started, minus the configured lock time. Printed as a running summary.
actor LockTiming {
    static let shared = LockTiming()
    private var latenesses: [Int] = []

    func add(_ lateness: Int) -> String {
        latenesses.append(lateness)
        let sorted = latenesses.sorted()
        return "over \(sorted.count) locks: min \(sorted[0]) ms, median \(sorted[sorted.count / 2]) ms, max \(sorted[sorted.count - 1]) ms"
    }
}

/// The lock window every test holds the agent to: not before the idle time (50 ms for
/// rounding and the two clocks), and not more than 1.5 s after it on this loaded machine.
let earliestLock = -50
let latestLock = 1500

/// Checks that a locker started when the server had been idle `idleAtLock` ms, for a
/// configured lock time of `lockAfter` ms, and records the lateness.
func expectLockOnTime(idleAtLock: Int, lockAfter: Int, case label: String = "",
                      sourceLocation: SourceLocation = #_sourceLocation) async {
    let lateness = idleAtLock - lockAfter
    let summary = await LockTiming.shared.add(lateness)
    let name = (Test.current?.displayName ?? Test.current?.name ?? "") + (label.isEmpty ? "" : " [\(label)]")
    print("lock timing: lock after \(lockAfter) ms, server idle at lock \(idleAtLock) ms, late \(lateness) ms (\(name)); \(summary)")
    #expect(lateness >= earliestLock, "locked \(-lateness) ms before the idle time", sourceLocation: sourceLocation)
    #expect(lateness <= latestLock, "locked \(lateness) ms after the idle time", sourceLocation: sourceLocation)
}
