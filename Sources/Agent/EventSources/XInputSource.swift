import Platform
/// The X connection as a source: raw input read from it becomes `.input`.
/// Xlib reads events into its queue during round trips and flushes, and then the
/// descriptor stays quiet: so the queue is drained right before every wait, after
/// the last request, or a key's release would wait unseen until the next deadline.
final class XInputSource: EventSource {
    private let x: XServer
    /// Whether the state machine wants raw input now (it pauses after input).
    private let wantsInput: () -> Bool
    private let onInput: () -> Void
    /// The server's own saver turned on.
    private let onSaverOn: () -> Void
    /// Windows the agent follows changed.
    private let onWindowChanges: ([XServer.WindowChange]) -> Void

    init(_ x: XServer, wantsInput: @escaping () -> Bool, onInput: @escaping () -> Void,
         onSaverOn: @escaping () -> Void = {}, onWindowChanges: @escaping ([XServer.WindowChange]) -> Void = { _ in }) {
        self.x = x
        self.wantsInput = wantsInput
        self.onInput = onInput
        self.onSaverOn = onSaverOn
        self.onWindowChanges = onWindowChanges
    }

    var pollInterest: (fd: Int32, events: PollEvents)? { (x.fileDescriptor, .readable) }

    func prepareToWait() { drain() }

    /// A hang-up reaches Xlib's I/O error handler in the drain.
    func dispatch(_ events: PollEvents) { drain() }

    /// XTEST input was seen and not counted (said once).
    private var saidXtest = false

    private func drain() {
        while true {
            x.listen(wantsInput())
            let drained = x.drainInput()
            if drained.xtest > 0 && !saidXtest {
                saidXtest = true
                Log.write(.info, "input from an XTEST device (xdotool, a mouse jiggler, x11vnc or another remote session) is not counted as activity (--ignore-xtest; said once)")
            }
            if drained.saverOn { onSaverOn() }
            if !drained.windowChanges.isEmpty { onWindowChanges(drained.windowChanges) }
            if drained.input > 0 { onInput() }
            // Each handler may make round trips, which read more events into Xlib's queue.
            guard drained.input > 0 || drained.saverOn || !drained.windowChanges.isEmpty else { return }
        }
    }
}
