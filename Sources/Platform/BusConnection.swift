import CBus
import CLinux
import Glibc
import IdleCore

/// One D-Bus connection as a source: sd-bus says which poll events it wants and
/// by when it must be called again (an absolute CLOCK_MONOTONIC time in µs). A
/// connection that is still connecting does its handshake here too, never waited
/// for: the loop goes on locking while a bus takes its time or never answers.
package final class BusConnection: EventSource {
    package let bus: OpaquePointer
    /// "session bus", "system bus", for logs.
    package let name: String
    private let onReady: () -> Void
    private let onLost: (Int32) -> Void
    package private(set) var isFinished = false
    /// The bus answered the handshake (Hello).
    package private(set) var isReady: Bool
    /// A handshake not done by then is a failed connection (ETIMEDOUT): sd-bus's own
    /// bound is 90 s, far past any lock time.
    private var handshakeBy: MonotonicInstant?
    package static let handshakeLimit = Millis.seconds(5)
    /// Messages left after a turn's share: the loop comes back at once, after the
    /// other sources (the deadline among them) have had their turn.
    private var morePending = false
    /// Messages handled per turn of the loop.
    package static let messagesPerTurn: Int32 = 64
    /// Replies the bus has not taken yet past which the agent reads no more than one
    /// message a turn: a client that floods without reading its answers fills the
    /// bus's buffers, not the agent's memory.
    package static let queuedWritesLimit: UInt64 = 64

    private var backedUp: Bool { xil_bus_queued_writes(bus) > BusConnection.queuedWritesLimit }

    /// After a turn that read from the bus, it is not read again for this long (nil: at
    /// once). The guard's: logind signals each session's every IdleHint change, which
    /// the guard does not read, hundreds a second on a terminal server, and each read
    /// alone was a turn of a loop over every session's sources. Read together, a steady
    /// stream costs a turn per pause; nothing is lost (the bus keeps them), and no lock
    /// waits on it (the guard acts on its deadlines and pidfds, not on the bus).
    package var readingPause: Millis?
    private var restingUntil: MonotonicInstant?

    /// A bus connected already (`xil_bus_open`).
    package init(bus: OpaquePointer, name: String, onLost: @escaping (Int32) -> Void) {
        self.bus = bus
        self.name = name
        self.onLost = onLost
        onReady = {}
        isReady = true
    }

    /// A bus still connecting (`xil_bus_connect`): `onReady` once it answers, `onLost`
    /// with ETIMEDOUT if it has not within `handshakeLimit`.
    package init(connecting bus: OpaquePointer, name: String, onReady: @escaping () -> Void, onLost: @escaping (Int32) -> Void) {
        self.bus = bus
        self.name = name
        self.onReady = onReady
        self.onLost = onLost
        isReady = false
        handshakeBy = SystemClock.now().monotonic + BusConnection.handshakeLimit
    }

    package var pollInterest: (fd: Int32, events: PollEvents)? {
        guard !isFinished else { return nil }
        if restingUntil != nil {
            // Resting: what our own calls queued still goes out.
            let wanted = PollEvents(rawValue: Int16(truncatingIfNeeded: xil_bus_events(bus)))
            return wanted.contains(.writable) ? (xil_bus_fd(bus), .writable) : nil
        }
        // Backed up: wait until the bus takes what is written, then go on reading.
        return (xil_bus_fd(bus), backedUp ? .writable : PollEvents(rawValue: Int16(truncatingIfNeeded: xil_bus_events(bus))))
    }

    package var deadline: MonotonicInstant? {
        guard !isFinished else { return nil }
        if morePending && !backedUp { return MonotonicInstant(.zero) }
        let usec = xil_bus_timeout(bus)
        let busDeadline = usec == UInt64.max ? nil : MonotonicInstant(.ms(Int64(clamping: usec / 1000)))
        return earliest(earliest(busDeadline, handshakeBy), restingUntil)
    }

    /// Messages our own calls queued (a signal, a hint) go out before the wait.
    package func prepareToWait() {
        if !isFinished, PollEvents(rawValue: Int16(truncatingIfNeeded: xil_bus_events(bus))).contains(.writable) {
            process()
        }
    }

    package func dispatch(_ events: PollEvents) {
        // A rest's end reads what came meanwhile, and rests again only if anything did:
        // an idle bus costs no wake-up, a steady stream one per pause.
        var events = events
        if restingUntil != nil, events.isEmpty {
            var waiting = pollfd(fd: xil_bus_fd(bus), events: Int16(POLLIN), revents: 0)
            if poll(&waiting, 1, 0) > 0, waiting.revents & Int16(POLLIN) != 0 { events.insert(.readable) }
        }
        restingUntil = nil
        process()
        if let readingPause, events.contains(.readable), !morePending, !isFinished {
            restingUntil = SystemClock.now().monotonic + readingPause
        }
        if !isFinished, let handshakeBy, SystemClock.now().monotonic >= handshakeBy { end(ETIMEDOUT) }
    }

    private func process() {
        guard !isFinished else { return }
        // Each call writes what the bus takes before it reads one message.
        let r = xil_bus_process(bus, backedUp ? 1 : BusConnection.messagesPerTurn)
        morePending = r > 0
        guard r >= 0 else { return end(-r) }
        if !isReady && xil_bus_ready(bus) != 0 {
            isReady = true
            handshakeBy = nil
            onReady()
        }
    }

    private func end(_ error: Int32) {
        guard !isFinished else { return }
        isFinished = true
        xil_bus_close(bus)
        onLost(error)
    }
}

/// Calls back when a socket file appears (created in its directory or moved there):
/// a bus that starts after the agent, or again after a crash. inotify wakes the agent
/// only for a change in that directory; no timer does.
package final class SocketWatch: EventSource {
    package let path: String
    private let name: String
    private var fd: Int32
    private let action: () -> Void
    package var isFinished: Bool { fd < 0 }

    /// Nil when the directory cannot be watched (it does not exist).
    package init?(_ path: String, _ action: @escaping () -> Void) {
        guard let slash = path.lastIndex(of: "/") else { return nil }
        let directory = slash == path.startIndex ? "/" : String(path[..<slash])
        fd = xil_directory_watch(directory)
        guard fd >= 0 else { return nil }
        self.path = path
        name = String(path[path.index(after: slash)...])
        self.action = action
    }

    package var pollInterest: (fd: Int32, events: PollEvents)? { fd >= 0 ? (fd, .readable) : nil }

    package func dispatch(_ events: PollEvents) {
        guard fd >= 0, xil_directory_watch_saw(fd, name) != 0 else { return }
        action()
    }

    package func cancel() {
        if fd >= 0 { close(fd) }
        fd = -1
    }
}
