import CBus
import IdleCore

/// One D-Bus connection as a source: sd-bus says which poll events it wants and
/// by when it must be called again (an absolute CLOCK_MONOTONIC time in µs).
final class BusConnection: EventSource {
    let bus: OpaquePointer
    /// "session bus", "system bus", for logs.
    let name: String
    private let onLost: (Int32) -> Void
    private(set) var isFinished = false
    /// Messages left after a turn's share: the loop comes back at once, after the
    /// other sources (the deadline among them) have had their turn.
    private var morePending = false
    /// Messages handled per turn of the loop.
    static let messagesPerTurn: Int32 = 64
    /// Replies the bus has not taken yet past which the agent reads no more than one
    /// message a turn: a client that floods without reading its answers fills the
    /// bus's buffers, not the agent's memory.
    static let queuedWritesLimit: UInt64 = 64

    private var backedUp: Bool { xil_bus_queued_writes(bus) > BusConnection.queuedWritesLimit }

    init(bus: OpaquePointer, name: String, onLost: @escaping (Int32) -> Void) {
        self.bus = bus
        self.name = name
        self.onLost = onLost
    }

    var pollInterest: (fd: Int32, events: PollEvents)? {
        guard !isFinished else { return nil }
        // Backed up: wait until the bus takes what is written, then go on reading.
        return (xil_bus_fd(bus), backedUp ? .writable : PollEvents(rawValue: Int16(truncatingIfNeeded: xil_bus_events(bus))))
    }

    var deadline: MonotonicInstant? {
        guard !isFinished else { return nil }
        if morePending && !backedUp { return MonotonicInstant(.zero) }
        let usec = xil_bus_timeout(bus)
        return usec == UInt64.max ? nil : MonotonicInstant(.ms(Int64(clamping: usec / 1000)))
    }

    /// Messages our own calls queued (a signal, a hint) go out before the wait.
    func prepareToWait() {
        if !isFinished, PollEvents(rawValue: Int16(truncatingIfNeeded: xil_bus_events(bus))).contains(.writable) {
            process()
        }
    }

    func dispatch(_ events: PollEvents) { process() }

    private func process() {
        // Each call writes what the bus takes before it reads one message.
        let r = xil_bus_process(bus, backedUp ? 1 : BusConnection.messagesPerTurn)
        morePending = r > 0
        guard r < 0, !isFinished else { return }
        isFinished = true
        xil_bus_close(bus)
        onLost(-r)
    }
}

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
        isFinished = true
        deadline = nil
        action()
    }
}
