import IdleCore

/// Calls back after a delay: a reconnection attempt, as a source with a deadline only.
package final class RetryTimer: EventSource {
    package private(set) var deadline: MonotonicInstant?
    private let action: () -> Void
    package private(set) var isFinished = false

    package init(at deadline: MonotonicInstant, _ action: @escaping () -> Void) {
        self.deadline = deadline
        self.action = action
    }

    package func dispatch(_ events: PollEvents) {
        guard !isFinished else { return }
        cancel()
        action()
    }

    /// Never fires (the attempt was made another way).
    package func cancel() {
        isFinished = true
        deadline = nil
    }
}
