import CX11
import Glibc

// A window for the integration tests, given EWMH properties with XChangeProperty as a
// window manager and a player would set them (no window manager runs in the tests).
// Each call is a short process; the window outlives it (RetainPermanent). Usage:
//   TestWindow create TITLE         prints the new window's id (decimal)
//   TestWindow fullscreen WINDOW    sets _NET_WM_STATE to [_NET_WM_STATE_FULLSCREEN]
//   TestWindow normal WINDOW        sets _NET_WM_STATE to []
//   TestWindow activate WINDOW      sets the root's _NET_ACTIVE_WINDOW (0: none)
//   TestWindow destroy WINDOW
//   TestWindow pointer X,Y          moves the pointer there through XTest (real input:
//                                   raw motion and a reset idle counter, as a mouse)

func fail(_ text: String) -> Never {
    _ = "TestWindow: \(text)\n".withCString { write(2, $0, strlen($0)) }
    exit(64)
}

let args = Array(CommandLine.arguments.dropFirst())
guard args.count == 2 else { fail("usage: TestWindow create TITLE | fullscreen|normal|activate|destroy WINDOW") }
guard let display = XOpenDisplay(nil) else { fail("cannot open the display") }
let root = XDefaultRootWindow(display)
let xaAtom: Atom = 4
let xaWindow: Atom = 33

func atom(_ name: String) -> Atom { XInternAtom(display, name, 0) }

func setAtoms(_ window: Window, _ property: String, _ values: [Atom], type: Atom) {
    var items = values.map { UInt($0) }  // format-32 items are C longs in Xlib
    items.withUnsafeMutableBytes { bytes in
        _ = XChangeProperty(display, window, atom(property), type, 32, PropModeReplace,
                            bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(values.count))
    }
}

func window(_ text: String) -> Window {
    guard let id = Window(text) else { fail("'\(text)' is not a window id") }
    return id
}

switch args[0] {
case "create":
    XSetCloseDownMode(display, RetainPermanent)
    let w = XCreateSimpleWindow(display, root, 0, 0, 100, 100, 0, 0, 0)
    var title = Array(args[1].utf8)
    XChangeProperty(display, w, atom("_NET_WM_NAME"), atom("UTF8_STRING"), 8, PropModeReplace, &title, Int32(title.count))
    XMapWindow(display, w)
    print(w)
case "fullscreen":
    setAtoms(window(args[1]), "_NET_WM_STATE", [atom("_NET_WM_STATE_FULLSCREEN")], type: xaAtom)
case "normal":
    setAtoms(window(args[1]), "_NET_WM_STATE", [], type: xaAtom)
case "activate":
    setAtoms(root, "_NET_ACTIVE_WINDOW", [window(args[1])], type: xaWindow)
case "destroy":
    XDestroyWindow(display, window(args[1]))
case "pointer":
    let xy = args[1].split(separator: ",").compactMap { Int32($0) }
    guard xy.count == 2 else { fail("'\(args[1])' is not X,Y") }
    // libXtst is loaded at run time: only this command needs it.
    typealias FakeMotion = @convention(c) (OpaquePointer?, Int32, Int32, Int32, UInt) -> Int32
    guard let library = dlopen("libXtst.so.6", RTLD_NOW), let symbol = dlsym(library, "XTestFakeMotionEvent") else {
        fail("cannot load libXtst.so.6")
    }
    _ = unsafeBitCast(symbol, to: FakeMotion.self)(display, -1, xy[0], xy[1], 0)
default:
    fail("unknown command '\(args[0])'")
}
XSync(display, 0)
XCloseDisplay(display)
