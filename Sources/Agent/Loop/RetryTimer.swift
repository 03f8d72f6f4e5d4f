import IdleCore

/// Calls back after a delay: a reconnection attempt, as a source with a deadline only.
final class RetryTimer: EventSource {
    private(set) var deadline: MonotonicInstant?
    private let action: () -> Void
    private(set) var isFinished = false

    init(at deadline: MonotonicInstant, _ action: @escaping () -> Void) {
        self.deadline = deadline
        self.action = action
    }

    func dispatch(_ events: PollEvents) {
        guard !isFinished else { return }
        cancel()
        action()
    }

    /// Never fires (the attempt was made another way).
    func cancel() {
        isFinished = true
        deadline = nil
    }
}
