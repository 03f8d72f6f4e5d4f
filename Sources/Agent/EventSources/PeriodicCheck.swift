import IdleCore
import Platform

/// Calls back every `period`, only while `isActive` says so (an X keep-awake hold,
/// whose end the server does not announce): no wake-up at all otherwise. It
/// prepares last: a hold that begins in another source's prepare (a bus message
/// dispatched while it flushes) is looked at from this wait on.
final class PeriodicCheck: EventSource {
    private let period: Millis
    private let isActive: () -> Bool
    private let action: () -> Void
    private let now: () -> MonotonicInstant
    private var next: MonotonicInstant?

    init(every period: Millis, while isActive: @escaping () -> Bool, now: @escaping () -> MonotonicInstant = { SystemClock.now().monotonic },
         _ action: @escaping () -> Void) {
        self.period = period
        self.isActive = isActive
        self.action = action
        self.now = now
    }

    var preparesLast: Bool { true }

    func prepareToWait() {
        if !isActive() {
            next = nil
        } else if next == nil {
            next = now() + period
        }
    }

    var deadline: MonotonicInstant? { next }

    func dispatch(_ events: PollEvents) {
        next = nil
        action()
    }
}
