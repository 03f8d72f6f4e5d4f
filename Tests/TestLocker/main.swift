import CX11
import Glibc

// A locker for the integration tests, which can be unlocked without a password:
// it maps a window over the screen and grabs the keyboard as i3lock does
// (retrying for up to 3 s, else exit 1), appends its pid to a file once it holds
// the grab, and exits when a file appears. Usage:
//   TestLocker [--pids FILE] [--unlock FILE] [--exit STATUS] [--hold MS] [--no-grab] [--no-window] [--suspend-saver]
//              [--pointer-only] [--let-go-after MS] [--let-go-file FILE] [--exit-after-probe MS] [--reset-every MS]
// --hold: never exit before this long after the start (a person typing a password).
// --no-window: the grab without a window (a hot-key tool, a hostile client).
// --pointer-only: grab the pointer instead of the keyboard (a drag in progress, a
//   screenshot tool selecting a region): i3lock, which needs both, cannot grab.
// --let-go-after: release the grab this long after taking it and keep running (a
//   locker that lost its grab); the release time (ms, CLOCK_MONOTONIC) is appended
//   to the let-go file.
// --exit-after-probe: after the let-go, wait for the agent's grab probe to find the
//   keyboard free (its grab of the root window shows as focus events of mode
//   NotifyGrab/NotifyUngrab), append "probed MS" to the let-go file, and exit STATUS
//   this long after it: i3lock after the right password, with the agent's look falling
//   between its let-go and its exit.
// --suspend-saver: no grab; XScreenSaverSuspend instead, as mpv and SDL games do.
// --reset-every: XResetScreenSaver this often too, as mpv does every 10 s.

func say(_ text: String) { _ = text.withCString { write(2, $0, strlen($0)) } }

func append(_ line: String, to file: String) {
    let fd = open(file, O_WRONLY | O_APPEND | O_CREAT, 0o644)
    _ = line.withCString { write(fd, $0, strlen($0)) }
    close(fd)
}

var pidsFile = "lockers.pids"
var unlockFile = "unlock"
var exitStatus: Int32 = 0
var holdMs = 0
var grab = true
var window = true
var suspendSaver = false
var pointerOnly = false
var letGoAfterMs: Int?
var letGoFile = "let-go"
var exitAfterProbeMs: Int?
var resetEveryMs: Int?
var args = CommandLine.arguments.dropFirst()
while let flag = args.popFirst() {
    switch flag {
    case "--pids": pidsFile = args.popFirst() ?? pidsFile
    case "--unlock": unlockFile = args.popFirst() ?? unlockFile
    case "--exit": exitStatus = Int32(args.popFirst() ?? "") ?? 0
    case "--hold": holdMs = Int(args.popFirst() ?? "") ?? 0
    case "--no-grab": grab = false
    case "--no-window": window = false
    case "--pointer-only": pointerOnly = true
    case "--let-go-after": letGoAfterMs = Int(args.popFirst() ?? "")
    case "--let-go-file": letGoFile = args.popFirst() ?? letGoFile
    case "--exit-after-probe": exitAfterProbeMs = Int(args.popFirst() ?? "")
    case "--reset-every": resetEveryMs = Int(args.popFirst() ?? "")
    case "--suspend-saver":
        grab = false
        suspendSaver = true
    default:
        say("TestLocker: unknown argument \(flag)\n")
        exit(64)
    }
}

func milliseconds() -> Int {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return t.tv_sec * 1000 + t.tv_nsec / 1_000_000
}

/// Waits (at most 20 s) for another client's keyboard grab of the root window to come
/// and go: the focus events of mode NotifyGrab and NotifyUngrab it causes.
func waitForProbe(_ display: OpaquePointer) {
    let root = XDefaultRootWindow(display)
    XSelectInput(display, root, FocusChangeMask)
    XSync(display, 0)
    let deadline = milliseconds() + 20_000
    var event = XEvent()
    while milliseconds() < deadline {
        while XPending(display) > 0 {
            XNextEvent(display, &event)
            if event.type == FocusIn || event.type == FocusOut, event.xfocus.mode == NotifyUngrab { return }
        }
        usleep(2000)
    }
}

let started = milliseconds()
guard let display = XOpenDisplay(nil) else {
    say("TestLocker: cannot open the display\n")
    exit(1)
}
if grab {
    let root = XDefaultRootWindow(display)
    if window {
        // As i3lock: an override-redirect window over the whole screen, mapped before the
        // grab (the agent counts a grab as the locker's only while one of its windows shows).
        let screen = XDefaultScreen(display)
        var attributes = XSetWindowAttributes()
        attributes.override_redirect = 1
        attributes.background_pixel = 0
        let cover = XCreateWindow(display, root, 0, 0, UInt32(XDisplayWidth(display, screen)), UInt32(XDisplayHeight(display, screen)),
                                  0, 0, UInt32(InputOutput), nil, UInt(CWOverrideRedirect | CWBackPixel), &attributes)
        XMapRaised(display, cover)
    }
    var grabbed = false
    while milliseconds() - started < 3000 {
        let result = pointerOnly
            ? XGrabPointer(display, root, 1, 0, GrabModeAsync, GrabModeAsync, 0, 0, 0)
            : XGrabKeyboard(display, root, 1, GrabModeAsync, GrabModeAsync, 0)
        if result == GrabSuccess {
            grabbed = true
            break
        }
        usleep(5000)
    }
    guard grabbed else {
        say("TestLocker: cannot grab the \(pointerOnly ? "pointer" : "keyboard")\n")
        exit(1)
    }
    XSync(display, 0)
}
let grabbedAt = milliseconds()
if suspendSaver {
    XScreenSaverSuspend(display, 1)
    XSync(display, 0)
}
append("\(getpid())\n", to: pidsFile)
var letGo = letGoAfterMs
var lastReset = milliseconds()
while access(unlockFile, F_OK) != 0 || milliseconds() - started < holdMs {
    if let every = resetEveryMs, milliseconds() - lastReset >= every {
        lastReset = milliseconds()
        XResetScreenSaver(display)
        XSync(display, 0)
    }
    if let after = letGo, milliseconds() - grabbedAt >= after {
        letGo = nil
        XUngrabKeyboard(display, 0)
        XUngrabPointer(display, 0)
        XSync(display, 0)
        append("\(milliseconds())\n", to: letGoFile)
        if let delay = exitAfterProbeMs {
            waitForProbe(display)
            append("probed \(milliseconds())\n", to: letGoFile)
            usleep(useconds_t(delay * 1000))
            exit(exitStatus)
        }
    }
    // As a real locker sits in its X event loop: a connection the server closed (xkill)
    // ends it through Xlib's I/O error (exit 1), as it ends i3lock.
    var event = XEvent()
    while XPending(display) > 0 { XNextEvent(display, &event) }
    usleep(10000)
}
exit(exitStatus)
