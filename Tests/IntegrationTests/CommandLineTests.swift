import Foundation
import Testing

/// What a user sees when something is wrong before the agent can start.
@Suite struct CommandLineTests {
    @Test("without DISPLAY the agent and the idle query exit 69 naming DISPLAY",
          arguments: [["--lock-after", "1s", "--locker", "true"], ["idle"]])
    func noDisplay(arguments: [String]) async throws {
        try await Sandbox.with(display: false) { s in
            let result = try await s.run(agentBinary, arguments)
            #expect(result.exit == .exited(69), "\(result.stderr)")
            #expect(result.stderr.hasPrefix("xidlelock: error: ") && result.stderr.contains("DISPLAY"), "\(result.stderr)")
        }
    }

    @Test("a display with no server exits 69 naming the display", arguments: [["--locker", "true"], ["idle"]])
    func displayWithoutServer(arguments: [String]) async throws {
        try await Sandbox.with(display: false) { s in
            let result = try await s.run(agentBinary, arguments, environment: ["DISPLAY": ":5999"])
            #expect(result.exit == .exited(69), "\(result.stderr)")
            #expect(result.stderr.contains(":5999"), "\(result.stderr)")
        }
    }

    @Test("in a Wayland session the agent refuses with 69 and names the tools for Wayland; doctor says the same",
          arguments: [["XDG_SESSION_TYPE": "wayland"], ["WAYLAND_DISPLAY": "wayland-0"]])
    func waylandSession(environment: [String: String]) async throws {
        try await Sandbox.with { s in
            // A real X server answers (XWayland would): the refusal is not for want of a display.
            let result = try await s.run(agentBinary, ["--lock-after", "1s", "--locker", "true"], environment: environment)
            #expect(result.exit == .exited(69), "\(result.stderr)")
            #expect(result.stderr.contains("Wayland session") && result.stderr.contains("swayidle") && result.stderr.contains("hypridle"),
                    "\(result.stderr)")
            #expect(!s.exists("lock.idle"))
            let doctor = try await s.run(agentBinary, ["doctor"], environment: environment)
            #expect(doctor.exit != .exited(0), "\(doctor.stdout)")
            #expect(doctor.stdout.contains("Wayland session"), "\(doctor.stdout)")
        }
    }

    @Test("a locker that is not installed exits 69 naming it")
    func missingLocker() async throws {
        try await Sandbox.with { s in
            let result = try await s.run(agentBinary, ["--lock-after", "1s", "--locker", "no-such-locker-xyz --nofork"])
            #expect(result.exit == .exited(69), "\(result.stderr)")
            #expect(result.stderr.contains("no-such-locker-xyz"), "\(result.stderr)")
        }
    }

    @Test("an X server without MIT-SCREEN-SAVER exits 69 naming the extension", arguments: [["--locker", "true"], ["idle"]])
    func missingScreenSaverExtension(arguments: [String]) async throws {
        try await Sandbox.with(serverArguments: ["-extension", "MIT-SCREEN-SAVER"]) { s in
            let result = try await s.run(agentBinary, arguments)
            #expect(result.exit == .exited(69), "\(result.stderr)")
            #expect(result.stderr.contains("MIT-SCREEN-SAVER"), "\(result.stderr)")
        }
    }

    /// The binary links libxcb only; the agent and doctor load libX11 and libXss at run
    /// time. Hidden in a mount namespace of its own, libX11 is an empty file.
    @Test("without libX11 the agent and doctor exit naming it, and idle (libxcb alone) still answers",
          .enabled(if: AudioTests.mountNamespacesWork, "needs `unshare -m` to hide libX11 from the agent"))
    func withoutLibX11() async throws {
        try await Sandbox.with { s in
            let library = "/usr/lib/x86_64-linux-gnu/libX11.so.6"
            try #require(FileManager.default.fileExists(atPath: library), "libx11-6 is not installed where expected")
            func withoutIt(_ arguments: [String]) async throws -> CommandResult {
                try await s.run("unshare", ["-m", "sh", "-c", "mount --bind /dev/null \(library) && exec \"$0\" \"$@\"",
                                            agentBinary] + arguments)
            }
            let agent = try await withoutIt(["--lock-after", "1m", "--locker", "true"])
            #expect(agent.exit == .exited(69), "\(agent.stderr)")
            #expect(agent.stderr.hasPrefix("xidlelock: error: ") && agent.stderr.contains("libX11.so.6")
                    && agent.stderr.contains("install libx11-6"), "\(agent.stderr)")
            let doctor = try await withoutIt(["doctor"])
            #expect(doctor.exit != .exited(0), "\(doctor.stdout)")
            #expect(doctor.stdout.contains("libX11.so.6") && doctor.stdout.contains("what to do: install libx11-6"),
                    "\(doctor.stdout)")
            let idle = try await withoutIt(["idle"])
            #expect(idle.exit == .exited(0) && Int(idle.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) != nil,
                    "\(idle.exit) \(idle.stdout) \(idle.stderr)")
        }
    }

    /// Usage errors come before any look at the display (DISPLAY is unset here).
    @Test("usage errors exit 64 with one line naming the flag", arguments: [
        (["--lock-after", "soon"], "--lock-after"),
        (["--lock-after", "0"], "--lock-after"),
        (["--lock-after"], "--lock-after"),
        (["--frobnicate"], "--frobnicate"),
        (["--notify-before", "30s"], "--notifier"),
        (["--lock-after", "1m", "--notify-before", "2m", "--notifier", "true"], "--notify-before"),
        (["--on-unlock-interval", "-5s"], "--on-unlock-interval"),
        (["--verbose", "--quiet"], "--quiet"),
        (["--quiet=yes"], "--quiet"),
        (["idle", "--format", "xml"], "--format"),
    ])
    func usageError(arguments: [String], flag: String) async throws {
        try await Sandbox.with(display: false) { s in
            let result = try await s.run(agentBinary, arguments)
            #expect(result.exit == .exited(64), "\(result.stderr)")
            #expect(result.stderr.hasPrefix("xidlelock: error: "), "\(result.stderr)")
            #expect(result.stderr.contains(flag), "\(result.stderr)")
            #expect(result.stderr.filter { $0 == "\n" }.count == 1, "one line: \(result.stderr)")
            #expect(result.stdout.isEmpty)
        }
    }

    @Test("--help lists every agent flag and exits 0")
    func help() async throws {
        try await Sandbox.with(display: false) { s in
            let result = try await s.run(agentBinary, ["--help"])
            #expect(result.exit == .exited(0))
            for flag in ["--lock-after", "--locker", "--notify-before", "--notifier", "--on-unlock",
                         "--on-unlock-interval", "--ignore-screensaver-reset", "--suspend-resets-idle",
                         "--verbose", "--quiet"] {
                #expect(result.stdout.contains(flag), "\(flag) missing from --help")
            }
        }
    }
}
