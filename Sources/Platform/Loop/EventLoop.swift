import Glibc
import IdleCore

/// poll(2) events, as a set.
package struct PollEvents: OptionSet {
    package let rawValue: Int16
    package init(rawValue: Int16) { self.rawValue = rawValue }
    package static let readable = PollEvents(rawValue: Int16(POLLIN))
    package static let writable = PollEvents(rawValue: Int16(POLLOUT))
    package static let hangUp = PollEvents(rawValue: Int16(POLLHUP))
    package static let error = PollEvents(rawValue: Int16(POLLERR))
}

/// Everything the agent waits on is a source: a descriptor with the events it
/// wants, a deadline, or both (as sd-event's io and time sources). The loop knows
/// no concrete source; a new input is a new type that conforms to this.
package protocol EventSource: AnyObject {
    /// The descriptor to poll and for what, now; nil to wait on none.
    var pollInterest: (fd: Int32, events: PollEvents)? { get }
    /// Dispatch at this time even if the descriptor stays quiet (CLOCK_MONOTONIC,
    /// the clock of poll's timeout).
    var deadline: MonotonicInstant? { get }
    /// Runs before every wait, in the order the sources were added (those that
    /// prepare last after all others): the last chance to drain a buffer or arm
    /// a timer.
    func prepareToWait()
    /// Prepares after every source that does not, whatever the order of adding: for
    /// a source that arms itself from state another prepare may change (a prepare
    /// that dispatches), and that dispatches nothing while preparing. sd-event's
    /// `sd_event_prepare` computes its timeout after every prepare in the same way.
    var preparesLast: Bool { get }
    /// The descriptor is ready (`events` as poll returned them), or the deadline
    /// passed (`events` empty).
    func dispatch(_ events: PollEvents)
    /// A finished source is dropped by the loop.
    var isFinished: Bool { get }
}

extension EventSource {
    package var pollInterest: (fd: Int32, events: PollEvents)? { nil }
    package var deadline: MonotonicInstant? { nil }
    package func prepareToWait() {}
    package var preparesLast: Bool { false }
    package var isFinished: Bool { false }
}

/// Waits for descriptors or a timeout. The loop computes the timeout; the waiter
/// only waits (as swift-nio's selector).
package protocol Waiter {
    /// Fills in `revents`; `timeout` nil waits for ever.
    mutating func wait(_ fds: inout [pollfd], timeout: Millis?) throws(SystemError)
}

package struct PollWaiter: Waiter {
    package mutating func wait(_ fds: inout [pollfd], timeout: Millis?) throws(SystemError) {
        let ms = timeout.map { Int32(clamping: $0.value) } ?? -1
        try Syscall.call("poll") { poll(&fds, nfds_t(fds.count), ms) }
    }
}

/// One loop over every source: prepare, wait once, dispatch. Between deadlines it
/// does not wake at all.
package final class EventLoop {
    package private(set) var sources: [EventSource] = []
    private var waiter: Waiter
    private let now: () -> MonotonicInstant
    private var fds: [pollfd] = []

    package init(waiter: Waiter = PollWaiter(), now: @escaping () -> MonotonicInstant = { SystemClock.now().monotonic }) {
        self.waiter = waiter
        self.now = now
    }

    package func add(_ source: EventSource) { sources.append(source) }

    /// One turn of the loop. Returns the sources dispatched, in order.
    @discardableResult
    package func runOnce() throws(SystemError) -> [EventSource] {
        // Those that arm from the others' state last: nothing a prepare dispatches
        // can leave a timer armed on a stale deadline.
        for source in sources where !source.preparesLast { source.prepareToWait() }
        for source in sources where source.preparesLast { source.prepareToWait() }
        sources.removeAll { $0.isFinished }
        // A snapshot: dispatching may add sources (a new client) or finish them.
        let waiting = sources
        fds.removeAll(keepingCapacity: true)
        var polled: [Int] = []
        for (k, source) in waiting.enumerated() {
            guard let interest = source.pollInterest else { continue }
            fds.append(pollfd(fd: interest.fd, events: interest.events.rawValue, revents: 0))
            polled.append(k)
        }
        var timeout: Millis?
        if let earliest = waiting.compactMap(\.deadline).min() {
            // Clock readings are whole milliseconds: one more, or the loop would wake
            // just before the deadline only to wait again.
            let remaining = earliest - now()
            timeout = remaining <= .zero ? .zero : remaining + .ms(1)
        }
        try waiter.wait(&fds, timeout: timeout)
        var dispatched: [EventSource] = []
        var ready = Set<Int>()
        for (pfd, k) in zip(fds, polled) where pfd.revents != 0 {
            ready.insert(k)
            waiting[k].dispatch(PollEvents(rawValue: pfd.revents))
            dispatched.append(waiting[k])
        }
        let after = now()
        for (k, source) in waiting.enumerated() where !ready.contains(k) && !source.isFinished {
            if let deadline = source.deadline, deadline <= after {
                source.dispatch([])
                dispatched.append(source)
            }
        }
        return dispatched
    }

    package func run() -> Never {
        while true {
            do {
                try runOnce()
            } catch {
                Log.write(.error, "the event loop failed: \(error); exiting (a running locker is left alone)")
                exit(1)
            }
        }
    }
}
