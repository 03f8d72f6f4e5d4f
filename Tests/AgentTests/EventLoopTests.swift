@testable import Agent
@testable import Platform
import Glibc
import IdleCore
import Testing

/// A clock that moves only when the test says so.
final class TestClock {
    var now = MonotonicInstant.seconds(1000)
}

/// The embedded waiter: it never blocks. It records the timeout the loop asked
/// for, moves the test clock by that much (as if it had slept), and marks ready
/// the descriptors the test said are ready.
struct EmbeddedWaiter: Waiter {
    let clock: TestClock
    var ready: [Int32: PollEvents] = [:]
    var timeouts: [Millis?] = []

    mutating func wait(_ fds: inout [pollfd], timeout: Millis?) throws(SystemError) {
        timeouts.append(timeout)
        for i in fds.indices {
            if let events = ready[fds[i].fd] { fds[i].revents = events.rawValue }
        }
        if ready.isEmpty, let timeout { clock.now += timeout }
        ready = [:]
    }
}

/// A source whose descriptor and deadline the test sets; it counts its calls.
final class TestSource: EventSource {
    var fd: Int32?
    var deadline: MonotonicInstant?
    var isFinished = false
    var prepared = 0
    var dispatched: [PollEvents] = []
    var onDispatch: () -> Void = {}
    var onPrepare: () -> Void = {}

    init(fd: Int32? = nil, deadline: MonotonicInstant? = nil) {
        self.fd = fd
        self.deadline = deadline
    }

    var pollInterest: (fd: Int32, events: PollEvents)? { fd.map { ($0, .readable) } }
    func prepareToWait() {
        prepared += 1
        onPrepare()
    }
    func dispatch(_ events: PollEvents) {
        dispatched.append(events)
        onDispatch()
    }
}

@Suite("The event loop: sources in, one wait, dispatch")
struct EventLoopTests {
    let clock = TestClock()

    func loop(_ waiter: inout EmbeddedWaiter) -> (EventLoop, () -> EmbeddedWaiter) {
        // The loop owns a copy of the waiter; a box lets the test read it back.
        final class Box: Waiter {
            var inner: EmbeddedWaiter
            init(_ inner: EmbeddedWaiter) { self.inner = inner }
            func wait(_ fds: inout [pollfd], timeout: Millis?) throws(SystemError) { try inner.wait(&fds, timeout: timeout) }
        }
        let box = Box(waiter)
        let clock = self.clock
        return (EventLoop(waiter: box, now: { clock.now }), { box.inner })
    }

    @Test("with no deadline the loop waits for ever: no wake-up between events")
    func noDeadlineNoTimeout() throws {
        var waiter = EmbeddedWaiter(clock: clock)
        let (loop, read) = loop(&waiter)
        let source = TestSource(fd: 7)
        loop.add(source)
        try loop.runOnce()
        #expect(read().timeouts == [nil])
        #expect(source.dispatched.isEmpty)
        #expect(source.prepared == 1)
    }

    @Test("the timeout is the earliest deadline, rounded up a millisecond; that source alone is dispatched")
    func earliestDeadline() throws {
        var waiter = EmbeddedWaiter(clock: clock)
        let (loop, read) = loop(&waiter)
        let late = TestSource(deadline: clock.now + .seconds(5))
        let early = TestSource(deadline: clock.now + .ms(250))
        loop.add(late)
        loop.add(early)
        let dispatched = try loop.runOnce()
        #expect(read().timeouts == [.ms(251)])
        #expect(dispatched.count == 1 && dispatched.first === early)
        #expect(early.dispatched == [[]], "a deadline dispatches with no poll events")
        #expect(late.dispatched.isEmpty)
    }

    @Test("a deadline already past gives a zero timeout")
    func pastDeadline() throws {
        var waiter = EmbeddedWaiter(clock: clock)
        let (loop, read) = loop(&waiter)
        loop.add(TestSource(deadline: clock.now - .ms(5)))
        try loop.runOnce()
        #expect(read().timeouts == [.zero])
    }

    @Test("a ready descriptor dispatches its source with the events poll gave")
    func readiness() throws {
        var waiter = EmbeddedWaiter(clock: clock)
        waiter.ready = [9: [.readable, .hangUp]]
        let (loop, _) = loop(&waiter)
        let quiet = TestSource(fd: 8)
        let ready = TestSource(fd: 9)
        loop.add(quiet)
        loop.add(ready)
        try loop.runOnce()
        #expect(ready.dispatched == [[.readable, .hangUp]])
        #expect(quiet.dispatched.isEmpty)
    }

    @Test("a finished source is dropped; a source added while dispatching is polled from the next turn")
    func addAndFinish() throws {
        var waiter = EmbeddedWaiter(clock: clock)
        let (loop, _) = loop(&waiter)
        let listener = TestSource(deadline: clock.now)
        let client = TestSource(fd: 11)
        listener.onDispatch = { [unowned listener] in
            loop.add(client)
            listener.isFinished = true
        }
        loop.add(listener)
        try loop.runOnce()
        #expect(loop.sources.count == 2)
        try loop.runOnce()
        #expect(loop.sources.count == 1 && loop.sources.first === client)
        #expect(client.prepared == 1)
    }

    @Test("sources prepare in the order they were added, those that prepare last after all others, before every wait")
    func prepareOrder() throws {
        var waiter = EmbeddedWaiter(clock: clock)
        let (loop, _) = loop(&waiter)
        var order: [Int] = []
        final class Ordered: EventSource {
            let id: Int
            let preparesLast: Bool
            let log: (Int) -> Void
            init(_ id: Int, last: Bool = false, _ log: @escaping (Int) -> Void) {
                self.id = id
                self.preparesLast = last
                self.log = log
            }
            func prepareToWait() { log(id) }
            func dispatch(_ events: PollEvents) {}
        }
        loop.add(Ordered(4, last: true) { order.append($0) })
        for id in 1...2 { loop.add(Ordered(id) { order.append($0) }) }
        loop.add(Ordered(5, last: true) { order.append($0) })
        loop.add(Ordered(3) { order.append($0) })
        try loop.runOnce()
        try loop.runOnce()
        #expect(order == [1, 2, 3, 4, 5, 1, 2, 3, 4, 5])
    }

    @Test("the deadline timer is armed after every other prepare, whatever the order of adding")
    func deadlineArmedLast() throws {
        let loop = EventLoop()
        // The state machine's next deadline: a minute away, until a prepare changes it.
        var machineDeadline: BoottimeInstant? = SystemClock.now().boottime + .minutes(1)
        var fired = 0
        loop.add(try DeadlineTimer(nextDeadline: { machineDeadline }) { fired += 1 })
        // Added after the timer, as a bus or control connection is at run time: what
        // it dispatches while preparing makes the lock due now.
        let connection = TestSource()
        connection.onPrepare = { machineDeadline = SystemClock.now().boottime }
        loop.add(connection)
        // Ends the wait if the timer stayed armed on the stale minute.
        let backstop = TestSource(deadline: SystemClock.now().monotonic + .seconds(5))
        loop.add(backstop)
        try loop.runOnce()
        #expect(fired == 1, "the timer fired on the deadline the last prepare left, not a minute later")
        #expect(backstop.dispatched.isEmpty)
    }

    @Test("a periodic check looks at its condition after every other prepare")
    func periodicCheckPreparesLast() throws {
        var waiter = EmbeddedWaiter(clock: clock)
        let (loop, read) = loop(&waiter)
        let clock = self.clock
        var holding = false
        loop.add(PeriodicCheck(every: .seconds(5), while: { holding }, now: { clock.now }) {})
        // Added later, as a bus connection: a message it dispatches while preparing begins a hold.
        let connection = TestSource()
        connection.onPrepare = { holding = true }
        loop.add(connection)
        try loop.runOnce()
        #expect(read().timeouts == [.ms(5001)], "the check runs from this wait on, not from the next one")
    }

    @Test("the real poll waiter wakes for a readable pipe and not before")
    func realPoll() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        let loop = EventLoop()
        let reader = TestSource(fd: fds[0])
        loop.add(reader)
        // Nothing written yet: the wait lasts until the deadline, and the pipe is not dispatched.
        let start = SystemClock.now().monotonic
        let timer = TestSource(deadline: start + .ms(50))
        loop.add(timer)
        try loop.runOnce()
        #expect(SystemClock.now().monotonic - start >= .ms(50), "the wait ended before its deadline")
        #expect(timer.dispatched == [[]])
        #expect(reader.dispatched.isEmpty, "an empty pipe was dispatched")
        // Written: the pipe wakes the loop long before the next deadline.
        timer.deadline = SystemClock.now().monotonic + .seconds(30)
        #expect(write(fds[1], "x", 1) == 1)
        try loop.runOnce()
        #expect(reader.dispatched == [.readable])
        #expect(timer.dispatched == [[]], "the wait ran to the deadline although the pipe was readable")
    }
}
