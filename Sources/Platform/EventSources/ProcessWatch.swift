import Glibc

/// A process that is not our child (a locker adopted from an earlier agent),
/// watched through a pidfd, which becomes readable when it ends.
package final class ProcessWatch: EventSource {
    private let pidfd: Int32
    private let onEnd: () -> Void
    package private(set) var isFinished = false

    package init(pidfd: Int32, onEnd: @escaping () -> Void) {
        self.pidfd = pidfd
        self.onEnd = onEnd
    }

    package var pollInterest: (fd: Int32, events: PollEvents)? { isFinished ? nil : (pidfd, .readable) }

    /// Stops watching (the pidfd closed) without a word: what it watched for is moot.
    package func cancel() {
        guard !isFinished else { return }
        isFinished = true
        close(pidfd)
    }

    /// Whether the process has exited (its pidfd is readable) within `wait` ms.
    package static func hasEnded(pidfd: Int32, wait: Int32 = 0) -> Bool {
        var ready = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
        return poll(&ready, 1, wait) == 1
    }

    package func dispatch(_ events: PollEvents) {
        guard !isFinished else { return }
        isFinished = true
        close(pidfd)
        onEnd()
    }
}
