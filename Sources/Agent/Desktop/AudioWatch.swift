import CPulse
import Glibc
import IdleCore
import Platform

/// `--not-when-audio`: while an application plays sound the stages are held off,
/// one inhibitor per application. The sound server (PulseAudio, or PipeWire
/// through pipewire-pulse) tells of every change to its streams: nothing is
/// polled, and a steady stream costs no wake-up. When the server is missing or
/// goes away its holds end (fail closed), the agent goes on locking and tries
/// again later.
final class AudioWatch: EventSource {
    private weak var agent: DesktopAgent?
    private let pulse: OpaquePointer
    private var callbacks: UnsafeMutablePointer<xil_pulse_callbacks>
    private var retryAt: MonotonicInstant?
    /// 1 s, doubling to a minute: a server started just after the agent is followed
    /// at once, and one that never comes costs a wake-up a minute.
    private var backoff = Backoff(first: .seconds(1), limit: .minutes(1))
    private var connected = false
    private var everConnected = false
    /// The last reason a connection failed, said once until one succeeds.
    private var saidFailure = false

    /// Starts watching, or says once why it cannot (no libpulse).
    static func start(for agent: DesktopAgent) {
        var error = [CChar](repeating: 0, count: 256)
        guard xil_pulse_load(&error, error.count) == 0 else {
            Log.write(.warning, "--not-when-audio cannot work: libpulse is not available (\(String(nulTerminated: error))); install libpulse0 (PipeWire needs pipewire-pulse too). Locking goes on without it")
            agent.perform(.sourceReady(.audio))
            return
        }
        guard let watch = AudioWatch(agent: agent) else {
            agent.perform(.sourceReady(.audio))
            return
        }
        agent.addSource(watch)
        watch.connect()
    }

    private init?(agent: DesktopAgent) {
        self.agent = agent
        callbacks = .allocate(capacity: 1)
        callbacks.initialize(to: xil_pulse_callbacks())
        var err: Int32 = 0
        guard let pulse = xil_pulse_new(callbacks, &err) else {
            Log.write(.warning, "--not-when-audio cannot work: \(String(cString: strerror(-err))); locking goes on without it")
            callbacks.deallocate()
            return nil
        }
        self.pulse = pulse
        callbacks.pointee.context = Unmanaged.passUnretained(self).toOpaque()
        installCallbacks()
    }

    // MARK: The source

    var pollInterest: (fd: Int32, events: PollEvents)? { (xil_pulse_fd(pulse), .readable) }

    var deadline: MonotonicInstant? {
        let usec = xil_pulse_timeout(pulse)
        let pulseDue = usec == UInt64.max ? nil : MonotonicInstant(.ms(Int64(clamping: usec / 1000)))
        return [pulseDue, retryAt].compactMap { $0 }.min()
    }

    func dispatch(_ events: PollEvents) {
        xil_pulse_dispatch(pulse)
        if let retryAt, retryAt <= SystemClock.now().monotonic {
            self.retryAt = nil
            connect()
        }
    }

    // MARK: The connection

    private func connect() {
        _ = xil_pulse_connect(pulse)
    }

    private func connectedTo(_ server: String) {
        connected = true
        backoff.reset()
        saidFailure = false
        Log.write(.info, "following the sound server at \(ClientText.sanitized(server))\(everConnected ? " again" : ""): an application playing sound holds the stages off")
        everConnected = true
    }

    private func disconnected(_ reason: String) {
        let wasConnected = connected
        connected = false
        if wasConnected {
            Log.write(.warning, "lost the sound server (\(reason)): audio no longer holds the stages off until it is back; locking goes on, retrying")
            // Nothing can be seen to stop now: what it held ends (fail closed).
            reconcile([])
        } else if !saidFailure {
            // The sound server often starts after the agent (socket activation, a
            // session that starts it later): waiting is normal, not an error.
            Log.write(.info, "no sound server yet (\(reason)): --not-when-audio waits for one; locking goes on")
            agent?.perform(.sourceReady(.audio))
        }
        saidFailure = true
        retryAt = SystemClock.now().monotonic + backoff.next()
    }

    /// The streams the sound server reported last.
    private var lastStreams: [AudioStream] = []

    private func streamsChanged(_ streams: [AudioStream]) {
        Log.debug("sound server: \(AudioStreams.summary(streams))")
        lastStreams = streams
        // The user's sessions share one sound server: only this session's streams hold
        // it (logind's word on each stream's application.process.id).
        let audible = streams.filter(\.isAudible)
        let ours = agent?.holdRouting?.inOwnSession(audible, pid: { $0.pid.flatMap { $0 > 0 ? UInt32($0) : nil } }, watcher: "audio") { [weak self] in
            guard let self else { return }
            streamsChanged(lastStreams)
        } ?? audible
        reconcile(AudioStreams.playing(ours))
    }

    /// One hold per playing application, reported whole: the machine admits the new
    /// ones before it ends the old, so that a change of who plays leaves no gap. The
    /// end of the sound is no activity, as the end of any other inhibitor is not: music
    /// left playing in an empty room must not keep the screen open a lock time longer,
    /// so the stages already due fire when it stops (a user who is there touches something).
    private func reconcile(_ playing: [PlayingApplication]) {
        agent?.request(.holdsNow(HoldReport(HoldOwner(.audio), playing.map {
            HoldClaim(key: $0.description, who: $0.description, why: "playing audio")
        })))
    }

    private func installCallbacks() {
        callbacks.pointee.connected = { context, server in
            Unmanaged<AudioWatch>.fromOpaque(context!).takeUnretainedValue().connectedTo(String(cString: server!))
        }
        callbacks.pointee.disconnected = { context, reason in
            Unmanaged<AudioWatch>.fromOpaque(context!).takeUnretainedValue().disconnected(String(cString: reason!))
        }
        callbacks.pointee.streams = { context, list, count in
            let streams = (0..<count).map { k in
                let s = list![k]
                return AudioStream(application: s.application.map { String(cString: $0) },
                                   binary: s.binary.map { String(cString: $0) },
                                   role: s.role.map { String(cString: $0) },
                                   pid: s.pid == 0 ? nil : Int32(truncatingIfNeeded: s.pid),
                                   corked: s.corked != 0, muted: s.muted != 0,
                                   volumeZero: s.volume_zero != 0, sinkMuted: s.sink_muted != 0)
            }
            Unmanaged<AudioWatch>.fromOpaque(context!).takeUnretainedValue().streamsChanged(streams)
        }
        callbacks.pointee.log = { _, level, message in Log.fromLibrary(level, message) }
    }
}
