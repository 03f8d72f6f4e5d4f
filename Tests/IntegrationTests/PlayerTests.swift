import Foundation
import Testing

/// Issue #31: real players and presenters from Debian hold the lock off while they play,
/// and let go when they are killed. Each test starts the application on this test's
/// Xvfb with a private session bus of its own (every installed D-Bus service can be
/// activated on it; the desktop portals only where the row says: the package
/// recommends xdg-desktop-portal-gtk, through which GTK applications hold the lock
/// off by default, and `--session-manager-service` is the way without it), plays a video made by ffmpeg (or shows a PDF),
/// waits for the hold to show in `status`, and then checks that no lock comes for 2×
/// the lock time, and that the lock comes within the lock time and a margin once the
/// application is killed with SIGKILL. bench/players.sh measures the same rows (and
/// more) side by side with xss-lock.
///
/// The agent is disabled (`xidlelock disable`) while the application starts, so that a
/// slow start on a loaded machine never counts as a lock mid-show; it is enabled with
/// an input once the hold shows, or once it had its chance to.
@Suite(.serialized) struct PlayerTests {
    static let lockAfter = 4000
    /// What the lock may take after the kill beyond the lock time (the idle time is then
    /// past it: a released hold locks at once).
    static let margin = 3000

    @Test("Totem holds the lock off through the portal while it plays and lets go when killed",
          .enabled(if: RealPlayer.totem.missing(portal: true) == nil, RealPlayer.totem.skipMessage(portal: true)))
    func totem() async throws { try await RealPlayer.totem.measure(portal: true) }

    @Test("Totem holds the lock off through --session-manager-service, with no portal, and lets go when killed",
          .enabled(if: RealPlayer.totem.missing == nil, RealPlayer.totem.skipMessage))
    func totemSessionManager() async throws { try await RealPlayer.totem.measure(flags: ["--session-manager-service"], holder: "session-manager") }

    @Test("Evince's presentation holds the lock off through the portal and lets go when killed",
          .enabled(if: RealPlayer.evince.missing(portal: true) == nil, RealPlayer.evince.skipMessage(portal: true)))
    func evincePresentation() async throws { try await RealPlayer.evince.measure(portal: true) }

    @Test("Clapper holds the lock off through the portal while it plays and lets go when killed",
          .enabled(if: RealPlayer.clapper.missing(portal: true) == nil, RealPlayer.clapper.skipMessage(portal: true)))
    func clapper() async throws { try await RealPlayer.clapper.measure(portal: true) }

    @Test("gnome-session-inhibit --inhibit idle holds the lock off through --session-manager-service and lets go when killed",
          .enabled(if: RealPlayer.gnomeSessionInhibit.missing == nil, RealPlayer.gnomeSessionInhibit.skipMessage))
    func gnomeSessionInhibit() async throws {
        try await RealPlayer.gnomeSessionInhibit.measure(flags: ["--session-manager-service"], holder: "session-manager")
    }

    @Test("VLC (run as another user: it refuses root) holds the lock off while it plays and lets go when killed",
          .enabled(if: RealPlayer.vlc.missing == nil, RealPlayer.vlc.skipMessage))
    func vlc() async throws { try await RealPlayer.vlc.measure() }
}

/// One application of the table, and how it is started.
enum RealPlayer: String {
    case totem = "Totem"
    case evince = "Evince"
    case clapper = "Clapper"
    case gnomeSessionInhibit = "gnome-session-inhibit"
    case vlc = "VLC"

    /// The files it needs, and the Debian packages that bring them.
    var needs: (files: [String], packages: String) {
        switch self {
        case .totem: (["/usr/bin/totem", "/usr/lib/x86_64-linux-gnu/totem/plugins/screensaver"], "totem totem-plugins")
        case .evince: (["/usr/bin/evince"], "evince")
        case .clapper: (["/usr/bin/clapper"], "clapper")
        case .gnomeSessionInhibit: (["/usr/bin/gnome-session-inhibit"], "gnome-session-bin")
        case .vlc: (["/usr/bin/cvlc", "/usr/bin/setpriv"], "vlc")
        }
    }

    /// The first file missing (the application, ffmpeg for its video, the bus), or nil.
    var missing: String? { missing(portal: false) }

    /// What is not installed (`portal`: the GTK portal the package recommends, too).
    func missing(portal: Bool) -> String? {
        let common = ["/usr/bin/ffmpeg", "/usr/bin/dbus-daemon", "/usr/bin/xdotool"]
            + (portal ? ["/usr/libexec/xdg-desktop-portal", "/usr/libexec/xdg-desktop-portal-gtk"] : [])
        return (needs.files + common).first { !FileManager.default.fileExists(atPath: $0) }
    }

    var skipMessage: Comment { skipMessage(portal: false) }

    func skipMessage(portal: Bool) -> Comment {
        let packages = needs.packages + (portal ? " xdg-desktop-portal xdg-desktop-portal-gtk" : "")
        return "\(missing(portal: portal) ?? "") is not installed (apt-get install \(packages) ffmpeg dbus xdotool; `make test-deps` does)"
    }

    /// VLC refuses to run as root ("VLC is not supposed to be run as root"): it runs as nobody.
    var otherUser: Bool { self == .vlc && getuid() == 0 }

    func arguments(video: String, pdf: String) -> [String] {
        switch self {
        case .totem: ["totem", video]
        case .evince: ["evince", "--presentation", pdf]
        case .clapper: ["clapper", video]
        case .gnomeSessionInhibit: ["gnome-session-inhibit", "--inhibit", "idle", "--reason", "a test", "sleep", "600"]
        case .vlc: ["cvlc", "--no-audio", "--loop", "--vout=xcb_x11", "--no-video-title-show", video]
        }
    }

    /// `portal`: the desktop portals can be activated on the bus. `holder`: the source
    /// the hold must have in status, when the row says.
    func measure(portal: Bool = false, flags: [String] = [], holder: String? = nil) async throws {
        try await Sandbox.with(serverArguments: ["-ac"]) { s in
            defer { s.killBusSessionProcesses() }
            let bus = try await s.startPlayerBus(portals: portal)
            let media = try await s.makePlayerMedia()
            let env = s.playerEnvironment(bus: bus, otherUser: otherUser)
            try await s.x("xdotool", "key", "shift")
            let lockAfter = PlayerTests.lockAfter
            let agent = try s.startAgent(["--lock-after", "\(lockAfter)ms", "--locker", "echo $$ >> lockers.pids; exec sleep 600",
                                          "--socket", s.socket] + flags, environment: env.agent)
            try await IntegrationTests.waitUntil("the agent's socket to answer", context: { agent.log }) {
                guard agent.process.isRunning else { throw AgentExited(waitingFor: "its socket", exit: Exit(agent.process), log: agent.log) }
                return (try? await s.client("status").exit) == .exited(0)
            }
            #expect(try await s.client("disable").exit == .exited(0))
            try await agent.waitForLog(containing: "serving org.freedesktop.ScreenSaver")
            guard !s.exists("lockers.pids") else {
                throw WaitTimedOut(what: "the agent to answer before its lock time (the machine is too loaded)", timeout: .zero, context: agent.log)
            }

            var argv = arguments(video: media.video, pdf: media.pdf)
            if otherUser {
                argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"] + argv
            }
            let app = try s.startBackground(argv[0], Array(argv.dropFirst()), output: "app.log", environment: env.app)
            let appLog = { "\(self.rawValue)'s output:\n\(s.contents("app.log"))\nagent log:\n\(agent.log)" }

            // The hold, as status shows it (not the socket's disable: that is no inhibitor).
            var holders: [String] = []
            do {
                try await IntegrationTests.waitUntil("\(rawValue)'s hold to show in status", context: appLog) {
                    let held = try await s.inhibitors()
                    holders = held.map { "\($0["who"] ?? "?") [\($0["source"] ?? "?")]: \($0["why"] ?? "")" }
                    return held.contains { holder == nil || $0["source"] as? String == holder }
                }
            } catch let error as WaitTimedOut {
                Issue.record(error, "no hold while \(rawValue) plays (status names none)")
            }
            print("\(rawValue): status while it plays: \(holders)")

            // Held: an input (the idle time starts), then no lock for 2× the lock time.
            try await s.x("xdotool", "key", "shift")
            #expect(try await s.client("enable").exit == .exited(0))
            let enabled = ContinuousClock.now
            let lockedMidShow = (try? await s.waitForLines("lockers.pids", timeout: .milliseconds(2 * lockAfter))) != nil
            if lockedMidShow {
                let after = (ContinuousClock.now - enabled).milliseconds
                Issue.record("locked mid-show, \(after) ms after the last input (lock time \(lockAfter) ms)\n\(appLog())")
                return
            }
            #expect(app.isRunning, "\(rawValue) exited while it should play\n\(appLog())")

            // Killed: the lock comes within the lock time and the margin.
            s.killTree(app.processIdentifier)
            let killed = ContinuousClock.now
            let locked = (try? await s.waitForLines("lockers.pids", timeout: .milliseconds(lockAfter + PlayerTests.margin + 10_000))) != nil
            let after = (ContinuousClock.now - killed).milliseconds
            #expect(locked, "no lock after \(rawValue) was killed\n\(appLog())")
            #expect(after <= lockAfter + PlayerTests.margin, "the lock came \(after) ms after \(rawValue) was killed\n\(appLog())")
            print("\(rawValue): held \(2 * lockAfter) ms; locked \(after) ms after kill -9")
        }
    }
}

extension Sandbox {
    /// A private session bus for the players: D-Bus activation sees every installed
    /// session service except the desktop portals and any org.freedesktop.ScreenSaver
    /// (an installed xidlelock's); any local user may connect (VLC runs as nobody).
    /// Returns its address.
    func startPlayerBus(portals: Bool) async throws -> String {
        let services = directory.appending(path: "services")
        try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
        for base in ["/usr/share/dbus-1/services", "/usr/local/share/dbus-1/services"] {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: base)) ?? [] {
                let text = (try? String(contentsOfFile: "\(base)/\(name)", encoding: .utf8)) ?? ""
                if !portals && (name.lowercased().contains("portal") || text.lowercased().contains("portal"))
                    || text.contains("org.freedesktop.ScreenSaver") { continue }
                try? FileManager.default.createSymbolicLink(atPath: services.appending(path: name).path,
                                                            withDestinationPath: "\(base)/\(name)")
            }
        }
        let socket = path("players.bus")
        let config = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>unix:path=\(socket)</listen>
              <auth>EXTERNAL</auth>
              <servicedir>\(services.path)</servicedir>
              <policy context="default">
                <allow user="*"/>
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
              </policy>
            </busconfig>
            """
        try config.write(toFile: path("players-bus.conf"), atomically: true, encoding: .utf8)
        let daemon = try startBackground("dbus-daemon", ["--nofork", "--config-file=\(path("players-bus.conf"))"],
                                         output: "players-bus.log")
        try await waitUntil("the players' dbus-daemon to listen") {
            if !daemon.isRunning {
                throw CommandFailed(command: ["dbus-daemon"], result: CommandResult(exit: Exit(daemon), stdout: "", stderr: contents("players-bus.log")))
            }
            return FileManager.default.fileExists(atPath: socket)
        }
        chmod(socket, 0o777)  // the other user's application connects too
        return "unix:path=\(socket)"
    }

    /// The agent's and the application's environments: this test's display and bus, a
    /// system bus nobody serves (the machine's stays out), and for the application a home
    /// and runtime directory of its own (its user's when it runs as nobody) and GTK on X
    /// without accessibility bus or GPU.
    func playerEnvironment(bus: String, otherUser: Bool) -> (agent: [String: String?], app: [String: String?]) {
        var agent: [String: String?] = ["DBUS_SESSION_BUS_ADDRESS": bus,
                                        "DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(path("no-system.bus"))"]
        agent["XDG_RUNTIME_DIR"] = makeDirectory("run", otherUser: false)
        var app = agent
        let home = makeDirectory(otherUser ? "home-nobody" : "home", otherUser: otherUser)
        app["HOME"] = home
        app["XDG_RUNTIME_DIR"] = makeDirectory(otherUser ? "run-nobody" : "run-app", otherUser: otherUser)
        app["XDG_CONFIG_HOME"] = "\(home)/.config"
        app["XDG_CACHE_HOME"] = "\(home)/.cache"
        app["XDG_DATA_HOME"] = "\(home)/.local/share"
        app["GDK_BACKEND"] = "x11"
        app["NO_AT_BRIDGE"] = "1"
        app["GTK_A11Y"] = "none"
        app["LIBGL_ALWAYS_SOFTWARE"] = "1"
        app["GSK_RENDERER"] = "cairo"
        return (agent, app)
    }

    private func makeDirectory(_ name: String, otherUser: Bool) -> String {
        let dir = path(name)
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        chmod(dir, 0o700)
        if otherUser { chown(dir, 65534, 65534) }
        return dir
    }

    /// A 60 s video (VP8 in WebM, silent: no sound server needed) and a 3-page PDF in the
    /// sandbox, readable by every user.
    func makePlayerMedia() async throws -> (video: String, pdf: String) {
        let video = path("film.webm")
        let result = try await run("ffmpeg", ["-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=160x120:rate=5",
                                              "-t", "60", "-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "8",
                                              "-b:v", "50k", "-an", video], timeout: .seconds(60))
        guard result.exit == .exited(0) else { throw CommandFailed(command: ["ffmpeg"], result: result) }
        let pdf = path("slides.pdf")
        try minimalPDF(pages: 3).write(to: URL(fileURLWithPath: pdf))
        chmod(video, 0o644)
        chmod(pdf, 0o644)
        return (video, pdf)
    }

    /// SIGKILL to a process and all its descendants (an application's helpers).
    func killTree(_ pid: Int32) {
        var tree = [pid]
        var i = 0
        while i < tree.count {
            let parent = tree[i]
            tree += ProcInfo.allPids.filter { ProcInfo.parent($0) == parent && !tree.contains($0) }
            i += 1
        }
        for p in tree { kill(p, SIGKILL) }
    }

    /// Every process whose environment names this sandbox (the bus address): the services
    /// the bus started for an application (they run in /, so the sandbox's clean-up by
    /// working directory does not find them), and whatever an application left.
    func killBusSessionProcesses() {
        let marker = Array(directory.path.utf8)
        let me = getpid()
        for pid in ProcInfo.allPids where pid != me {
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/environ") else { continue }
            if data.range(of: Data(marker)) != nil { kill(pid, SIGKILL) }
        }
    }
}

/// A PDF of `pages` pages, each with one line of text.
func minimalPDF(pages: Int) -> Data {
    var objects = ["<< /Type /Catalog /Pages 2 0 R >>"]
    let kids = (0..<pages).map { "\(3 + 2 * $0) 0 R" }.joined(separator: " ")
    objects.append("<< /Type /Pages /Kids [\(kids)] /Count \(pages) >>")
    let font = 3 + 2 * pages
    for i in 0..<pages {
        let stream = "BT /F1 48 Tf 72 400 Td (Slide \(i + 1)) Tj ET"
        objects.append("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 640 480] /Contents \(4 + 2 * i) 0 R /Resources << /Font << /F1 \(font) 0 R >> >> >>")
        objects.append("<< /Length \(stream.utf8.count) >>\nstream\n\(stream)\nendstream")
    }
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    var out = "%PDF-1.4\n"
    var offsets: [Int] = []
    for (n, body) in objects.enumerated() {
        offsets.append(out.utf8.count)
        out += "\(n + 1) 0 obj\n\(body)\nendobj\n"
    }
    let xref = out.utf8.count
    out += "xref\n0 \(objects.count + 1)\n0000000000 65535 f \n"
    for offset in offsets { out += String(format: "%010d 00000 n \n", offset) }
    out += "trailer\n<< /Size \(objects.count + 1) /Root 1 0 R >>\nstartxref\n\(xref)\n%%EOF\n"
    return Data(out.utf8)
}
