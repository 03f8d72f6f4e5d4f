/// One stream of the sound server (a PulseAudio sink input), as it reports it.
public struct AudioStream: Equatable, Sendable {
    /// `application.name`.
    public var application: String?
    /// `application.process.binary`.
    public var binary: String?
    /// `media.role`.
    public var role: String?
    /// `application.process.id`; nil when unknown.
    public var pid: Int32?
    /// Paused.
    public var corked: Bool
    public var muted: Bool
    /// Every channel at volume 0.
    public var volumeZero: Bool
    /// Its sink (the output) is muted or at volume 0.
    public var sinkMuted: Bool

    public init(application: String? = nil, binary: String? = nil, role: String? = nil, pid: Int32? = nil,
                corked: Bool = false, muted: Bool = false, volumeZero: Bool = false, sinkMuted: Bool = false) {
        self.application = application
        self.binary = binary
        self.role = role
        self.pid = pid
        self.corked = corked
        self.muted = muted
        self.volumeZero = volumeZero
        self.sinkMuted = sinkMuted
    }

    /// Sound the user hears from an application playing: a paused or silenced
    /// stream is not. Nor is a notification sound (media.role "event", as
    /// libcanberra sets it): a chat client's ping every few minutes must not keep
    /// the screen open.
    public var isAudible: Bool {
        !corked && !muted && !volumeZero && !sinkMuted && role != "event"
    }

    /// Its application's name: the one it gives, else its program's.
    public var applicationName: String {
        if let application, !application.isEmpty { return application }
        if let binary, !binary.isEmpty { return binary }
        return "an unnamed application"
    }
}

/// An application that plays sound: what holds the stages off.
public struct PlayingApplication: Hashable, Sendable {
    public var name: String
    /// Its processes that play, in order.
    public var pids: [Int32]

    /// In the user's words, for the log and status: `Firefox (pid 1234)`.
    public var description: String {
        let name = ClientText.sanitized(name)
        switch pids.count {
        case 0: return name
        case 1: return "\(name) (pid \(pids[0]))"
        default: return "\(name) (pids \(pids.map(String.init).joined(separator: ", ")))"
        }
    }
}

public enum AudioStreams {
    /// The applications that play, by name: one per application, however many
    /// streams it has (a browser plays one per tab).
    public static func playing(_ streams: [AudioStream]) -> [PlayingApplication] {
        var pids: [String: Set<Int32>] = [:]
        for stream in streams where stream.isAudible {
            pids[stream.applicationName, default: []].formUnion(stream.pid.map { [$0] } ?? [])
        }
        return pids.keys.sorted().map { PlayingApplication(name: $0, pids: pids[$0]!.sorted()) }
    }

    /// What the sound server reported, for the debug log: `2 streams: Firefox
    /// (pid 1234) playing, mpv (pid 99) paused`.
    public static func summary(_ streams: [AudioStream]) -> String {
        guard !streams.isEmpty else { return "no streams" }
        let each = streams.map { stream -> String in
            let app = PlayingApplication(name: stream.applicationName, pids: stream.pid.map { [$0] } ?? []).description
            var why: [String] = []
            if stream.corked { why.append("paused") }
            if stream.muted { why.append("muted") }
            if stream.volumeZero { why.append("at volume 0") }
            if stream.sinkMuted { why.append("its output muted") }
            if stream.role == "event", why.isEmpty { why.append("a notification sound") }
            return "\(app) " + (why.isEmpty ? "playing" : why.joined(separator: ", "))
        }
        return "\(streams.count) stream\(streams.count == 1 ? "" : "s"): " + each.joined(separator: ", ")
    }
}
