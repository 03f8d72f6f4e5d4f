// swift-tools-version: 6.1
import PackageDescription

// No package dependencies on purpose: ArgumentParser pulls FoundationEssentials
// into every process (measured +1.25 ms start-up and +2.4 MB RSS per run), and
// `xidlelock idle` must start as fast as xprintidle. The flag parser lives in
// IdleCore, where it is pure and tested in-process.
// Our modules do without the implicitly imported _StringProcessing (Regex and the
// string algorithms built on it): linked in, it and _RegexParser added ~1 MB to the
// binary and ~90 KB of relocated data that every `xidlelock idle` paid for in page
// faults at start-up.
let lean: [SwiftSetting] = [.unsafeFlags(["-Xfrontend", "-disable-implicit-string-processing-module-import"])]

let package = Package(
    name: "xidlelock",
    products: [
        .executable(name: "xidlelock", targets: ["xidlelock"]),
        .executable(name: "xidlelock-guard", targets: ["xidlelock-guard"]),
    ],
    targets: [
        // Xlib's headers: libX11, libXss, libXi, libXrandr and libXRes are loaded at run
        // time, by the agent and `doctor` only (CXlib).
        .systemLibrary(
            name: "CX11",
            providers: [.apt(["libx11-dev", "libxss-dev", "libxi-dev", "libxrandr-dev", "libxres-dev"])]
        ),
        // `xidlelock idle`'s way to the server: libxcb, linked.
        .systemLibrary(
            name: "CXCB",
            pkgConfig: "xcb xcb-screensaver",
            providers: [.apt(["libxcb1-dev", "libxcb-screensaver0-dev"])]
        ),
        // Xlib's functions the agent calls, each forwarding to libX11, libXss, libXi, libXrandr
        // or libXRes loaded with dlopen.
        .target(name: "CXlib", dependencies: ["CLinux"]),
        .target(name: "CLinux"),
        // sd-bus, loaded with dlopen: only its headers are needed to build.
        .target(name: "CBus", dependencies: ["CLinux"]),
        // libpulse, loaded with dlopen: only its headers are needed to build (libpulse-dev).
        .target(name: "CPulse", dependencies: ["CLinux"]),
        // libpcsclite (PC/SC), loaded with dlopen when --lock-on-card-removal is on; its
        // few declarations are our own, so nothing of it is needed to build.
        .target(name: "CCard", dependencies: ["CLinux"]),
        .target(name: "IdleCore", swiftSettings: lean),
        // What both of xidlelock's processes run on: the event loop, the log and audit
        // trail, child processes, the bus connection. Nothing of X, audio or cards: the
        // guard, root's, is built from this, SessionGuard and IdleCore only.
        .target(name: "Platform", dependencies: ["IdleCore", "CLinux", "CBus"], swiftSettings: lean),
        .target(name: "Agent", dependencies: ["IdleCore", "Platform", "CX11", "CXlib", "CXCB", "CLinux", "CBus", "CPulse", "CCard"], swiftSettings: lean),
        // The root service that guards every graphical session's agent under the policy.
        .target(name: "SessionGuard", dependencies: ["IdleCore", "Platform", "CLinux", "CBus"], swiftSettings: lean),
        // The Swift runtime's argv accessor without its /proc/self/maps scan (see startup.c).
        .target(name: "CStartup"),
        .executableTarget(
            name: "xidlelock", dependencies: ["Agent", "IdleCore", "CStartup"], swiftSettings: lean,
            // Links only the libraries the binary uses: the Swift driver adds runtime
            // libraries no code here touches, and each costs start-up time in every
            // `xidlelock idle`.
            linkerSettings: [.unsafeFlags(["-Xlinker", "--as-needed"])]
        ),
        // Root's daemon (`xidlelock guard` execs it): its own small image, so that root
        // runs no line of the agent's X, audio or card code, and loads none of their libraries.
        .executableTarget(
            name: "xidlelock-guard", dependencies: ["SessionGuard", "Platform", "IdleCore"], swiftSettings: lean,
            linkerSettings: [.unsafeFlags(["-Xlinker", "--as-needed"])]
        ),
        // `make bench`: the state machine's throughput over simulated days.
        .executableTarget(name: "IdleCoreBench", dependencies: ["IdleCore"], path: "bench/IdleCoreBench"),
        .testTarget(name: "IdleCoreTests", dependencies: ["IdleCore"]),
        // The edge in-process: the loop with test sources, spawn, children, the control connection.
        .testTarget(name: "AgentTests", dependencies: ["Agent", "Platform", "IdleCore"]),
        // A locker the integration tests can unlock: it grabs the keyboard as i3lock
        // does and exits when a file appears.
        .executableTarget(name: "TestLocker", dependencies: ["CX11"], path: "Tests/TestLocker",
                         linkerSettings: [.linkedLibrary("X11"), .linkedLibrary("Xss")]),
        // A window with EWMH properties, as a window manager and a player set them.
        .executableTarget(name: "TestWindow", dependencies: ["CX11"], path: "Tests/TestWindow",
                         linkerSettings: [.linkedLibrary("X11")]),
        // Depends on the executables so that `swift test` builds the binaries the tests run.
        // Harness/bus.py is the tests' D-Bus client, Harness/player.py their sound player,
        // Harness/jiggler.py their XTEST jiggler through any master, Harness/mpris.py their
        // MPRIS media player, all run with python3.
        .testTarget(name: "IntegrationTests", dependencies: ["IdleCore", "xidlelock", "xidlelock-guard", "TestLocker", "TestWindow"],
                    exclude: ["Harness/bus.py", "Harness/player.py", "Harness/jiggler.py", "Harness/mpris.py", "Harness/attack.py", "Harness/i3lock-preload.c"]),
    ],
    swiftLanguageModes: [.v6]
)
