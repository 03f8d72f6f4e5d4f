import CX11
import IdleCore
import Platform

/// `--not-when-fullscreen`: follows the active window (EWMH `_NET_ACTIVE_WINDOW` on
/// the root) and whether it is fullscreen (`_NET_WM_STATE_FULLSCREEN` in its
/// `_NET_WM_STATE`). Driven by PropertyNotify on the root and on the active window
/// only: nothing is polled, and while no window changes the agent does not wake.
final class FullscreenWatch {
    /// The fullscreen active window, as the user knows it.
    struct Window: Equatable {
        var id: CX11.Window
        var title: String

        /// `"Title" (window 0x1a00003)`.
        var who: String {
            let name = title.isEmpty ? "a window without a title" : "\"\(title)\""
            return "\(name) (window 0x\(String(id, radix: 16)))"
        }
    }

    private let x: XServer
    private let netActiveWindow: Atom
    private let netWmState: Atom
    private let netWmStateFullscreen: Atom
    private let netWmName: Atom
    private let utf8String: Atom
    private let xaWindow: Atom = 33  // XA_WINDOW, XA_ATOM and XA_STRING are cast
    private let xaAtom: Atom = 4     // macros, which Swift does not import.
    private let xaString: Atom = 31
    private let xaWmName: Atom = 39
    /// The window followed now (0: none).
    private var active: CX11.Window = 0
    private(set) var fullscreen: Window?
    private let onChange: (Window?) -> Void

    init(_ x: XServer, onChange: @escaping (Window?) -> Void) {
        self.x = x
        self.onChange = onChange
        netActiveWindow = x.atom("_NET_ACTIVE_WINDOW")
        netWmState = x.atom("_NET_WM_STATE")
        netWmStateFullscreen = x.atom("_NET_WM_STATE_FULLSCREEN")
        netWmName = x.atom("_NET_WM_NAME")
        utf8String = x.atom("UTF8_STRING")
    }

    /// Starts following; the first answer (fullscreen or not) comes at once.
    func start() {
        x.follow(x.root, events: PropertyChangeMask)
        follow(activeWindow())
        if active == 0 {
            Log.write(.info, "--not-when-fullscreen: no active window is set on the root (_NET_ACTIVE_WINDOW); a window manager that follows EWMH sets it")
        }
    }

    func handle(_ changes: [XServer.WindowChange]) {
        for change in changes {
            if change.window == x.root, change.property == netActiveWindow {
                follow(activeWindow())
            } else if change.window == active, active != 0 {
                if change.property == nil {
                    // Destroyed: the root's active window changes next, or stays stale.
                    active = 0
                    update()
                } else if change.property == netWmState {
                    update()
                }
            }
        }
    }

    private func activeWindow() -> CX11.Window {
        x.property32(x.root, netActiveWindow, type: xaWindow, max: 1).first.map { CX11.Window($0) } ?? 0
    }

    private func follow(_ window: CX11.Window) {
        if window != active {
            if active != 0 { x.follow(active, events: 0) }
            active = window
            // Selected before the state is read: a change in between is not missed.
            if window != 0 { x.follow(window, events: PropertyChangeMask | StructureNotifyMask) }
        }
        update()
    }

    private func update() {
        let now: Window? = if active != 0,
            x.property32(active, netWmState, type: xaAtom).contains(where: { Atom($0) == netWmStateFullscreen }) {
            Window(id: active, title: title(of: active))
        } else {
            nil
        }
        guard now?.id != fullscreen?.id else { return }
        fullscreen = now
        onChange(now)
    }

    private func title(of window: CX11.Window) -> String {
        let raw = x.propertyText(window, netWmName, type: utf8String) ?? x.propertyText(window, xaWmName, type: xaString) ?? ""
        return ClientText.sanitized(raw, maxBytes: 120)
    }
}
