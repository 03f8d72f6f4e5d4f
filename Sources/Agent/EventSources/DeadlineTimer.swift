import CLinux
import Glibc
import IdleCore
import Platform

/// The state machine's next deadline, on a CLOCK_BOOTTIME timerfd: a deadline
/// that passed while the machine slept fires right after resume, which a poll
/// timeout (CLOCK_MONOTONIC) would not. It prepares last, whenever it was added:
/// armed after every other source's prepare has had its say (a bus or control
/// connection added at run time may dispatch a message that moves the deadline).
final class DeadlineTimer: EventSource {
    private let fd: Int32
    private let nextDeadline: () -> BoottimeInstant?
    private let onFire: () -> Void
    private var armed: BoottimeInstant?

    init(nextDeadline: @escaping () -> BoottimeInstant?, onFire: @escaping () -> Void) throws(SystemError) {
        fd = try Syscall.call("timerfd_create") { xil_boottime_timer_create() }
        self.nextDeadline = nextDeadline
        self.onFire = onFire
    }

    var pollInterest: (fd: Int32, events: PollEvents)? { (fd, .readable) }

    var preparesLast: Bool { true }

    func prepareToWait() {
        let deadline = nextDeadline()
        guard deadline != armed else { return }
        armed = deadline
        if let deadline { Log.debug("next deadline at boottime \(deadline)") }
        // A deadline already past is armed 1 ns after boot, which fires at once.
        _ = xil_timer_arm_at(fd, deadline.map { Swift.max($0.sinceZero.value * 1_000_000, 1) } ?? 0)
    }

    func dispatch(_ events: PollEvents) {
        var expirations: UInt64 = 0
        _ = read(fd, &expirations, 8)
        armed = nil
        onFire()
    }
}
