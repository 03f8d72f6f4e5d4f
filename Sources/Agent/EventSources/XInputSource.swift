import IdleCore
import Platform

/// What the X source needs of the connection (the tests give it a scripted one).
protocol RawInputConnection: AnyObject {
    var fileDescriptor: Int32 { get }
    /// Whether raw input is selected now.
    var listening: Bool { get }
    func listen(_ on: Bool)
    /// Reads the events already read into XCB's queue, and with `readingSocket` those
    /// the socket holds too; with `stoppingAtInput`, while listening, up to the first
    /// raw input event.
    func drainInput(readingSocket: Bool, stoppingAtInput: Bool) -> XServer.Drained
}

/// The X connection as a source: raw input read from it becomes `.input`.
/// Round trips (Xlib's, through XCB) read events into XCB's queue, and then the
/// descriptor stays quiet: so the queue is drained right before every wait, after
/// the last request, or a key's release would wait unseen until the next deadline.
final class XInputSource: EventSource {
    private let x: RawInputConnection
    /// Whether the state machine wants raw input now (it pauses after input).
    private let wantsInput: () -> Bool
    private let onInput: () -> Void
    /// The server's own saver turned on.
    private let onSaverOn: () -> Void
    /// Windows the agent follows changed.
    private let onWindowChanges: ([XServer.WindowChange]) -> Void
    private let now: () -> MonotonicInstant

    /// Raw events still arrive after the agent stopped listening: those the server sent
    /// before it took the deselection. A flood's client (an XTEST burst, 256 requests
    /// between its round trips) keeps the server from our request for a whole batch, and
    /// the server writes each event as it makes it: read as they come, they cost the
    /// agent a wake-up each (measured: 80 to 220 wake-ups and up to 5.6 ms of CPU for a
    /// burst of 20,000 motions, where one wake-up and 0.3 ms did otherwise). So once
    /// such an event was read, the socket is left alone this long and the rest is read
    /// in one go. Other events (the saver turning on, a window's change) wait as long
    /// at most, and only right after input.
    static let lateEventsWait = Millis(5)
    /// Until when the socket is left alone (late raw events came); nil: read as it wakes.
    private(set) var lateEventsUntil: MonotonicInstant?

    init(_ x: RawInputConnection, wantsInput: @escaping () -> Bool, onInput: @escaping () -> Void,
         onSaverOn: @escaping () -> Void = {}, onWindowChanges: @escaping ([XServer.WindowChange]) -> Void = { _ in },
         now: @escaping () -> MonotonicInstant = { SystemClock.now().monotonic }) {
        self.x = x
        self.wantsInput = wantsInput
        self.onInput = onInput
        self.onSaverOn = onSaverOn
        self.onWindowChanges = onWindowChanges
        self.now = now
    }

    var pollInterest: (fd: Int32, events: PollEvents)? { lateEventsUntil == nil ? (x.fileDescriptor, .readable) : nil }

    var deadline: MonotonicInstant? { lateEventsUntil }

    func prepareToWait() { drain(readingSocket: lateEventsUntil == nil) }

    /// A hang-up reaches Xlib's I/O error handler in the drain. Also the end of the
    /// wait for late events (`events` empty).
    func dispatch(_ events: PollEvents) {
        lateEventsUntil = nil
        drain(readingSocket: true)
    }

    private func drain(readingSocket: Bool) {
        var readingSocket = readingSocket
        // Up to the first input, which pauses listening (the deselection then goes out
        // at once); after that, all there is in each pass, as before.
        var heardInput = false
        while true {
            x.listen(wantsInput())
            if x.listening {
                // Listening again: input must be heard at once.
                lateEventsUntil = nil
                readingSocket = true
            }
            let drained = x.drainInput(readingSocket: readingSocket, stoppingAtInput: !heardInput)
            if drained.late > 0 && readingSocket && !x.listening { lateEventsUntil = now() + Self.lateEventsWait }
            if drained.saverOn { onSaverOn() }
            if !drained.windowChanges.isEmpty { onWindowChanges(drained.windowChanges) }
            if drained.input > 0 {
                heardInput = true
                onInput()
            }
            // Each handler may make round trips, which read more events into Xlib's queue.
            guard drained.input > 0 || drained.saverOn || !drained.windowChanges.isEmpty else { return }
        }
    }
}
