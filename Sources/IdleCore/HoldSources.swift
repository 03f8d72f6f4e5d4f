// Each source of holds described once. Help texts, the words `ignore=` and the
// policy's `inhibit-from` take, doctor's advice, the flags that switch a source and
// the start's wait are all read from here: a new source is one case of
// `InhibitorSource`, one row below and the file that follows it.

/// Where a hold on the lock comes from: its word in status, events, `ignore=` and
/// the policy's `inhibit-from`.
public enum InhibitorSource: String, Equatable, Sendable, CaseIterable {
    /// `xidlelock inhibit` and the control socket.
    case socket
    /// org.freedesktop.ScreenSaver.Inhibit on the session bus (browsers, players).
    case dbus
    /// org.freedesktop.PowerManagement.Inhibit on the session bus (VLC, OBS, Firefox, LibreOffice).
    case powerManagement = "power-management"
    /// `--session-manager-service`: org.gnome.SessionManager.Inhibit with the idle flag
    /// (GTK applications, `gnome-session-inhibit --inhibit idle`).
    case sessionManager = "session-manager"
    /// A logind idle inhibitor (`systemd-inhibit --what=idle`).
    case logind
    /// The X server: the saver turned off (`xset s off`) or suspended by a client.
    case x
    /// `--not-when-fullscreen`: the active window is fullscreen.
    case fullscreen
    /// `--not-when-audio`: an application plays sound.
    case audio
    /// `--not-when-playing`: a media player on the session bus says it is playing (MPRIS).
    case playing
    /// `--corners` with `-`: the pointer rests in a corner that never locks.
    case corner

    /// This source's row.
    public var row: HoldSourceRow {
        switch self {
        case .socket:
            HoldSourceRow(what: "`xidlelock inhibit` and the control socket", lasts: "while it runs",
                          advice: "it ends when its `xidlelock inhibit` command ends (or its --for time); end that command")
        case .dbus:
            HoldSourceRow(what: "org.freedesktop.ScreenSaver.Inhibit on the session bus (browsers, players)", lasts: "while it runs",
                          advice: "an application asked through org.freedesktop.ScreenSaver (a video or call); stop it, or run the agent with --no-screensaver-service",
                          flag: .onByDefault("--no-screensaver-service", help: "Do not serve org.freedesktop.ScreenSaver on the session bus (browsers' and players' inhibitors)."),
                          startWaits: true)
        case .powerManagement:
            HoldSourceRow(what: "org.freedesktop.PowerManagement.Inhibit on the session bus (VLC, OBS, Firefox, LibreOffice)", lasts: "while it runs",
                          advice: "an application asked through org.freedesktop.PowerManagement (a video or a recording); stop it, or run the agent with --no-power-management-service",
                          flag: .onByDefault("--no-power-management-service", help: "Do not serve org.freedesktop.PowerManagement.Inhibit on the session bus (the inhibitors of VLC, OBS, Firefox and LibreOffice, where org.freedesktop.ScreenSaver is not theirs)."),
                          startWaits: true)
        case .sessionManager:
            HoldSourceRow(what: "org.gnome.SessionManager.Inhibit with the idle flag on the session bus (GTK applications: Totem, Evince, Clapper; gnome-session-inhibit)", lasts: "while it runs",
                          advice: "a GTK application (a film, a slideshow) or `gnome-session-inhibit` asked through org.gnome.SessionManager; stop it, or drop --session-manager-service",
                          flag: .optIn("--session-manager-service", help: "Serve org.gnome.SessionManager's Inhibit on the session bus, so that GTK applications (Totem, Evince's slideshow, Clapper) and gnome-session-inhibit hold the lock off without xdg-desktop-portal. Off by default: where the name has an owner, xdg-utils takes the session for GNOME (xdg-open opens through gio, xdg-screensaver no longer turns the X saver off)."),
                          startWaits: true)
        case .logind:
            HoldSourceRow(what: "logind's idle inhibitors (`systemd-inhibit --what=idle`)", lasts: "while it runs",
                          advice: "a `systemd-inhibit --what=idle` holds it (see `systemd-inhibit --list`); end it, or --logind-inhibitors none",
                          startWaits: true)
        case .x:
            HoldSourceRow(what: "the X server's saver, turned off or suspended by a client", lasts: "while the saver is off or suspended",
                          advice: "the X screensaver is off (`xset s on` turns it back on) or a player suspended it; stop the player",
                          startWaits: true)
        case .fullscreen:
            HoldSourceRow(what: "a fullscreen active window", lasts: "while it is fullscreen",
                          advice: "the active window is fullscreen; leave fullscreen, or drop --not-when-fullscreen",
                          flag: .optIn("--not-when-fullscreen", help: "Hold every stage (a dim as well as the lock) off while the active window is fullscreen (EWMH _NET_WM_STATE_FULLSCREEN)."),
                          startWaits: true)
        case .audio:
            HoldSourceRow(what: "an application playing sound", lasts: "while it plays",
                          advice: "an application plays sound; pause or mute it, or drop --not-when-audio",
                          flag: .optIn("--not-when-audio", help: "Hold every stage off while an application plays sound (PulseAudio, or PipeWire through pipewire-pulse); paused and muted streams do not count."),
                          startWaits: true)
        case .playing:
            HoldSourceRow(what: "a media player on the session bus that says it is playing (MPRIS)", lasts: "while it plays",
                          advice: "a media player says it is playing (its MPRIS PlaybackStatus); pause or stop it, or drop --not-when-playing",
                          flag: .optIn("--not-when-playing", help: "Hold every stage off while a media player on the session bus says it is playing (MPRIS PlaybackStatus Playing), muted or not."),
                          startWaits: true)
        case .corner:
            HoldSourceRow(what: "the pointer resting in a - corner of --corners", lasts: "until it moves",
                          advice: "the pointer rests in a - corner; move it")
        }
    }

    /// The words, in order, for help texts and errors.
    public static var words: String { allCases.map(\.rawValue).joined(separator: ", ") }

    /// The flags that turn a source on, for help texts.
    static var optInFlags: String {
        allCases.compactMap { $0.row.flag }.filter(\.isOptIn).map(\.name).joined(separator: ", ")
    }

    /// The source a flag of a row switches.
    static func switched(by flag: String) -> InhibitorSource? { allCases.first { $0.row.flag?.name == flag } }
}

/// What the user and the admin see of one source of holds.
public struct HoldSourceRow: Sendable {
    /// What it is, in the user's words.
    public let what: String
    /// How long one of its holds lasts when it has no end time.
    public let lasts: String
    /// Doctor's advice for a hold of this source.
    public let advice: String
    /// The flag that switches it, if one switches it alone (others are switched by
    /// flags that do more: `--no-logind`, `--ignore-screensaver-reset`, `--corners`).
    public let flag: SourceFlag?
    /// The first stage waits until it has said what it holds: an agent restarted
    /// during a film must hear the film's hold first.
    public let startWaits: Bool

    init(what: String, lasts: String, advice: String, flag: SourceFlag? = nil, startWaits: Bool = false) {
        self.what = what
        self.lasts = lasts
        self.advice = advice
        self.flag = flag
        self.startWaits = startWaits
    }
}

/// A flag that switches one source: off where it is on by default, or on where it is opt-in.
public enum SourceFlag: Sendable {
    case onByDefault(String, help: String)
    case optIn(String, help: String)

    public var name: String {
        switch self {
        case .onByDefault(let name, _), .optIn(let name, _): name
        }
    }

    var help: String {
        switch self {
        case .onByDefault(_, let help), .optIn(_, let help): help
        }
    }

    var isOptIn: Bool { if case .optIn = self { true } else { false } }
}

extension AgentOptions {
    /// Whether the agent follows this source at all (`refusal(for:)` says whether
    /// its holds then count).
    public func follows(_ source: InhibitorSource) -> Bool {
        switch source {
        case .x: return !ignoreScreensaverReset
        case .logind: return logind
        case .corner: return corners?.actions.contains(.never) == true
        case .socket: return true
        default: return switchedSources.contains(source)
        }
    }

    /// The sources each waited for at start (see `HoldSourceRow.startWaits`).
    public var startAwaits: Set<InhibitorSource> {
        Set(InhibitorSource.allCases.filter { $0.row.startWaits && follows($0) })
    }

    /// The sources switched on by default.
    static var sourcesOnByDefault: Set<InhibitorSource> {
        Set(InhibitorSource.allCases.filter { if case .onByDefault? = $0.row.flag { true } else { false } })
    }

    /// One flag for each source that a flag alone switches.
    static var sourceFlagSpecs: [OptionSpec<AgentOptions>] {
        InhibitorSource.allCases.compactMap { source in
            guard let flag = source.row.flag else { return nil }
            return OptionSpec(flag.name, nil, flag.help) { o, _ in
                if flag.isOptIn { o.switchedSources.insert(source) } else { o.switchedSources.remove(source) }
            }
        }
    }

    /// The flags given that changed a source from its default, for the settings report.
    var sourceFlagsGiven: [String] {
        InhibitorSource.allCases.compactMap { source in
            guard let flag = source.row.flag, switchedSources.contains(source) == flag.isOptIn else { return nil }
            return flag.name
        }
    }
}
