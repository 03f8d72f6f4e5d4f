import CLinux
import IdleCore

/// Reads both clocks together (never the wall clock: it jumps).
package enum SystemClock {
    package static func now() -> Instant {
        var monotonic: Int64 = 0
        var boottime: Int64 = 0
        xil_clocks_now(&monotonic, &boottime)
        return Instant(monotonic: .ms(monotonic / 1_000_000), boottime: .ms(boottime / 1_000_000))
    }
}
