import CX11
import CXlib
import Glibc
import IdleCore
import Platform

/// The agent's connection to the X server: raw input through XInput2 and the
/// idle counter through MIT-SCREEN-SAVER. Policy never touches this type's
/// internals; it only asks "was there input?" and "how long idle?".
final class XServer: RawInputConnection {
    let display: OpaquePointer
    let root: Window
    private let xinputOpcode: Int32
    private let supportsTouch: Bool
    private let info: UnsafeMutablePointer<XScreenSaverInfo>
    /// The MIT-SCREEN-SAVER extension's first event number (ScreenSaverNotify).
    private let saverEventBase: Int32
    /// Whether raw input is selected now.
    private(set) var listening = false
    /// `--ignore-xtest`: the XTEST devices, whose raw events are not input; nil while
    /// XTEST input counts (the events' data is then never fetched).
    private(set) var xtestDevices: XtestDevices?
    /// What reached the agent and what it asked for, for status (`x_input`).
    private(set) var counts = InputCounts()

    /// Counts of the raw-input traffic: the cost of input is per event read, and the
    /// benchmark and the tests read these to tell why a burst cost what it did.
    struct InputCounts {
        /// Raw input events read from the connection (every device's).
        var rawEvents = 0
        /// Of those, the ones read after the deselection (sent before the server took it).
        var lateEvents = 0
        /// XISelectEvents requests for raw input (listening on or off).
        var selections = 0
    }

    /// Opens the display named by `$DISPLAY` and checks the extensions the agent needs
    /// (`xidlelock idle` does without this type: see IdleQuery).
    init() throws(AgentError) {
        try XServer.loadXlib()
        var loadError = [CChar](repeating: 0, count: 256)
        guard xil_xcb_events_load(&loadError, loadError.count) == 0 else {
            throw XDisplayName.xlibMissing(String(nulTerminated: loadError))
        }
        guard let display = XOpenDisplay(nil) else { throw XDisplayName.cannotOpen() }
        // Before any event is read: XCB keeps the events, read one at a time (drainInput).
        xil_xcb_take_events(display)
        var eventBase: Int32 = 0
        var errorBase: Int32 = 0
        var saverEventBase: Int32 = 0
        guard XScreenSaverQueryExtension(display, &saverEventBase, &errorBase) != 0,
              let info = XScreenSaverAllocInfo()
        else {
            XCloseDisplay(display)
            throw XDisplayName.noScreenSaverExtension
        }
        var opcode: Int32 = 0
        var major: Int32 = 2
        var minor: Int32 = 2
        do throws(AgentError) {
            try XServer.loadXInput()
        } catch {
            XCloseDisplay(display)
            throw error
        }
        guard XQueryExtension(display, "XInputExtension", &opcode, &eventBase, &errorBase) != 0,
              XIQueryVersion(display, &major, &minor) == Success, major >= 2
        else {
            XCloseDisplay(display)
            throw XDisplayName.noXInput2
        }
        self.display = display
        self.root = XDefaultRootWindow(display)
        self.xinputOpcode = opcode
        self.supportsTouch = major > 2 || minor >= 2
        self.info = info
        self.saverEventBase = saverEventBase
        // The hooks and the locker must not inherit the X connection.
        _ = fcntl(XConnectionNumber(display), F_SETFD, FD_CLOEXEC)
    }

    var fileDescriptor: Int32 { XConnectionNumber(display) }

    /// Loads libX11 and libXss, which the binary does not link (`xidlelock idle` starts
    /// faster without them); before any Xlib call.
    static func loadXlib() throws(AgentError) {
        var error = [CChar](repeating: 0, count: 256)
        guard xil_xlib_load(&error, error.count) == 0 else {
            throw XDisplayName.xlibMissing(String(nulTerminated: error))
        }
    }

    /// Loads libXi, which the binary does not link: only the agent watches raw input,
    /// and `xidlelock idle` starts faster without it (measured 0.1 ms, 3% of a call).
    static func loadXInput() throws(AgentError) {
        var error = [CChar](repeating: 0, count: 256)
        guard xil_xi_load(&error, error.count) == 0 else {
            throw .unavailable("\(String(nulTerminated: error)) (install libxi6): raw input cannot be watched")
        }
    }

    /// Installs handlers so that X protocol errors are logged, not fatal, and a
    /// lost connection ends the agent with a clear message (the locker, in its
    /// own session, keeps running). Loads Xlib first.
    static func installErrorHandlers() throws(AgentError) {
        try loadXlib()
        XSetErrorHandler { _, event in
            if let event { XServer.logError(Int32(event.pointee.error_code), request: Int32(event.pointee.request_code), minor: Int32(event.pointee.minor_code)) }
            return 0
        }
        XSetIOErrorHandler { _ in
            let code = errno
            XServer.connectionLost("Xlib's I/O error, errno \(code): \(String(cString: strerror(code)))")
        }
    }

    /// An X error: logged, never fatal. Those of requests with a reply reach Xlib's
    /// handler; those of requests without one come among the events (drainInput).
    static func logError(_ code: Int32, request: Int32, minor: Int32) {
        // A followed window that closed before a request about it reached the server.
        if code == BadWindow {
            Log.write(.debug, "X error BadWindow on request \(request): a window closed")
        } else {
            Log.write(.warning, "X error \(code) on request \(request).\(minor)")
        }
    }

    /// `how`: what said so, for the cause (libxcb's error code, or Xlib's errno).
    static func connectionLost(_ how: String) -> Never {
        Log.write(.error, "lost the connection to the X server (\(how)); exiting (a running locker is left alone)")
        exit(1)
    }

    /// libxcb's `xcb_connection_has_error` codes, in words.
    static func xcbFailure(_ code: Int32) -> String {
        let words = [1: "the socket failed", 2: "an extension is not supported", 3: "out of memory",
                     4: "a request longer than the server takes", 5: "a reply it could not parse", 6: "no such screen",
                     7: "descriptor passing failed"]
        return "libxcb error \(code): \(words[Int(code)] ?? "unknown")"
    }

    /// Selects or deselects raw key, button, motion and touch events: from every
    /// master device, or under `--ignore-xtest` from each real slave device only, so
    /// that the server never sends the XTEST devices' events (a flood of them costs
    /// the agent nothing, where reading and looking each up cost about 3 µs).
    func listen(_ on: Bool) {
        guard on != listening else { return }
        listening = on
        counts.selections += 1
        if xtestDevices == nil {
            select([(XIAllMasterDevices, on)])
        } else {
            // Off: every device selected now (those gone since went with their selection).
            select(on ? realDevices.map { ($0, true) } : selectedDevices.sorted().map { ($0, false) })
        }
    }

    /// The raw-input selection of each device given: on or off.
    private func select(_ devices: [(id: Int32, on: Bool)]) {
        var bits = [UInt8](repeating: 0, count: 4)  // XIMaskLen(XI_LASTEVENT)
        var events = [XI_RawKeyPress, XI_RawKeyRelease, XI_RawButtonPress, XI_RawButtonRelease, XI_RawMotion]
        if supportsTouch { events += [XI_RawTouchBegin, XI_RawTouchUpdate, XI_RawTouchEnd] }
        for event in events { xil_xi_set_mask(&bits, event) }
        for device in devices {
            if device.on { selectedDevices.insert(device.id) } else { selectedDevices.remove(device.id) }
        }
        guard !devices.isEmpty else { return }
        bits.withUnsafeMutableBufferPointer { buffer in
            var masks = devices.map { XIEventMask(deviceid: $0.id, mask_len: $0.on ? Int32(buffer.count) : 0, mask: buffer.baseAddress) }
            _ = XISelectEvents(display, root, &masks, Int32(masks.count))
        }
        XFlush(display)
    }

    /// The devices whose raw input is selected now (`--ignore-xtest`).
    private var selectedDevices: Set<Int32> = []
    /// The slave devices attached to a master that are not XTEST devices (`--ignore-xtest`):
    /// the devices of the user's own input. A floating slave sends nothing through a
    /// master, and is not heard either way.
    private var realDevices: [Int32] = []

    /// Stops counting raw events from XTEST devices as input: raw input is selected
    /// from the other devices only, and the devices are followed as they come and go
    /// (a mouse plugged in; `xinput create-master` makes a master with XTEST slaves of
    /// its own). The hierarchy is selected before it is read: a change in between is
    /// then seen as an event, and read again.
    func ignoreXtest() {
        var bits = [UInt8](repeating: 0, count: 4)  // XIMaskLen(XI_LASTEVENT)
        xil_xi_set_mask(&bits, XI_HierarchyChanged)
        bits.withUnsafeMutableBufferPointer { buffer in
            var mask = XIEventMask(deviceid: XIAllDevices, mask_len: Int32(buffer.count), mask: buffer.baseAddress)
            _ = XISelectEvents(display, root, &mask, 1)
        }
        let wasListening = listening
        if wasListening { listen(false) }
        readDevices()
        if wasListening { listen(true) }
    }

    /// Reads which slave devices are XTEST devices and which are real: one round trip for
    /// the list, one per slave for its "XTEST Device" property; at start and at each change
    /// of the hierarchy. While listening, the selection follows at once: a device plugged
    /// in counts from its first event.
    private func readDevices() {
        let property = XInternAtom(display, "XTEST Device", 1)  // only if it exists
        var count: Int32 = 0
        var found = XtestDevices()
        var real: [Int32] = []
        var present: Set<Int32> = []
        if let devices = XIQueryDevice(display, XIAllDevices, &count) {
            for device in UnsafeBufferPointer(start: devices, count: Int(count))
            where device.use == XISlavePointer || device.use == XISlaveKeyboard || device.use == XIFloatingSlave {
                present.insert(device.deviceid)
                let name = device.name.map { String(cString: $0) } ?? ""
                if XtestDevices.isXtest(name: name, hasXtestProperty: property != 0 && hasProperty(device.deviceid, property)) {
                    found.insert(device.deviceid)
                } else if device.use != XIFloatingSlave {
                    real.append(device.deviceid)
                }
            }
            XIFreeDeviceInfo(devices)
        }
        if found != xtestDevices || real != realDevices {
            Log.write(.debug, "input devices: raw input from \(real.map(String.init).joined(separator: ", ")); XTEST devices (not selected, their input is not activity): \(found.ids.map(String.init).joined(separator: ", "))")
        }
        xtestDevices = found
        // Devices gone took their selection with them.
        selectedDevices.formIntersection(present)
        let before = realDevices
        realDevices = real
        guard listening, real != before else { return }
        let wanted = Set(real)
        select(real.filter { !selectedDevices.contains($0) }.map { ($0, true) }
               + selectedDevices.subtracting(wanted).sorted().map { ($0, false) })
    }

    private func hasProperty(_ device: Int32, _ property: Atom) -> Bool {
        var type: Atom = 0
        var format: Int32 = 0
        var count: UInt = 0
        var after: UInt = 0
        var data: UnsafeMutablePointer<UInt8>?
        guard XIGetProperty(display, device, property, 0, 1, 0, 0, &type, &format, &count, &after, &data) == Success else { return false }
        if let data { XFree(data) }
        return type != 0  // None: the device has no such property
    }

    /// The server's idle counter (what xprintidle prints), or nil if it cannot be read.
    /// A round trip: events may be buffered afterwards, so drain before waiting.
    func idleTime() -> Millis? {
        guard XScreenSaverQueryInfo(display, root, info) != 0 else { return nil }
        return Millis(Int64(clamping: info.pointee.idle))
    }

    /// The grab probe: whether another client holds the keyboard grab and the pointer
    /// grab, and, when the keyboard is grabbed and `lockerProcesses` run, whether one
    /// of their windows shows (see `lockerWindowShown`). `lockerProcesses` nil: no
    /// locker runs (the reading before a start). Two round trips when both are free,
    /// about five when the keyboard is grabbed.
    func probeGrabs(lockerProcesses: Set<pid_t>?) -> GrabReading {
        let keyboard = grabbedByOther(.keyboard)
        let pointer = grabbedByOther(.pointer)
        guard keyboard == true, let lockerProcesses else {
            return GrabReading(grabbed: keyboard, pointerGrabbed: pointer, lockerRuns: lockerProcesses != nil)
        }
        return GrabReading(grabbed: true, pointerGrabbed: pointer, lockerRuns: true, lockerWindowShown: lockerWindowShown(lockerProcesses))
    }

    /// Does another client hold the grab of `device`? X never tells which client:
    /// our own XGrabKeyboard or XGrabPointer answers AlreadyGrabbed (or GrabFrozen) for
    /// anyone's grab; if we get the grab, it is released at once (one round trip; the
    /// locker's own grab attempts retry). Nil when the server gives no usable answer.
    func grabbedByOther(_ device: GrabbedDevice) -> Bool? {
        let result = switch device {
        case .keyboard: XGrabKeyboard(display, root, 0, GrabModeAsync, GrabModeAsync, 0)
        // No events asked for, no confinement, no cursor change.
        case .pointer: XGrabPointer(display, root, 0, 0, GrabModeAsync, GrabModeAsync, 0, 0, 0)
        }
        switch result {
        case GrabSuccess:
            switch device {
            case .keyboard: XUngrabKeyboard(display, 0)
            case .pointer: XUngrabPointer(display, 0)
            }
            XFlush(display)
            return false
        case AlreadyGrabbed, GrabFrozen:
            return true
        default:
            return nil
        }
    }

    // MARK: Whose windows show (X-Resource)

    /// Whether the server tells each client's pid: the X-Resource extension 1.2 or later
    /// on the server, and libXRes here (loaded at run time). Without it the grab probe
    /// cannot tell the locker's grab from another client's (see `lockerWindowShown`).
    private(set) lazy var clientOwners: Result<Void, XResUnavailable> = {
        var reason = [CChar](repeating: 0, count: 256)
        guard xil_xres_load(&reason, reason.count) == 0 else {
            return .failure(XResUnavailable(reason: String(nulTerminated: reason) + " (install libxres1)"))
        }
        var event: Int32 = 0
        var error: Int32 = 0
        guard XResQueryExtension(display, &event, &error) != 0 else {
            return .failure(XResUnavailable(reason: "the X server has no X-Resource extension"))
        }
        var major: Int32 = 0
        var minor: Int32 = 0
        guard XResQueryVersion(display, &major, &minor) != 0, major > 1 || (major == 1 && minor >= 2) else {
            return .failure(XResUnavailable(reason: "the X server's X-Resource is older than 1.2 (no client pids)"))
        }
        return .success(())
    }()

    /// The bits of an XID that name its client (the same for every client of a server).
    private var clientBits: XID?

    /// Whether a viewable window on the root belongs to one of `processes` (the locker
    /// and its descendants): the windows' clients and their pids from X-Resource
    /// (`XResQueryClientIds`; the server knows a local client's pid from its socket).
    /// Nil when X cannot tell: no X-Resource, or a query failed. What it cannot tell: a
    /// locker whose window belongs to a client of another pid (over TCP, from another
    /// pid namespace, or made by a helper that is not its descendant) is not seen, and
    /// its grab is not taken for proof. Three or four round trips; only at probe time.
    func lockerWindowShown(_ processes: Set<pid_t>) -> Bool? {
        guard case .success = clientOwners else { return nil }
        // Every client's pid (one round trip); the locker's clients by their XID base.
        var spec = XResClientIdSpec(client: 0, mask: UInt32(XRES_CLIENT_ID_PID_MASK.rawValue))
        var count = 0
        var ids: UnsafeMutablePointer<XResClientIdValue>?
        // Unlike XResQueryClients and XResQueryVersion, this one answers Success (0).
        guard XResQueryClientIds(display, 1, &spec, &count, &ids) == Success, let ids else { return nil }
        var lockerClients: Set<XID> = []
        for k in 0..<count where processes.contains(XResGetClientPid(ids + k)) {
            lockerClients.insert(ids[k].spec.client)
        }
        XResClientIdsDestroy(count, ids)
        guard !lockerClients.isEmpty else { return false }
        guard let bits = clientBits ?? readClientBits() else { return nil }
        clientBits = bits
        // The root's children, and the attributes of the locker's only.
        var rootReturn: Window = 0
        var parent: Window = 0
        var children: UnsafeMutablePointer<Window>?
        var childCount: UInt32 = 0
        guard XQueryTree(display, root, &rootReturn, &parent, &children, &childCount) != 0 else { return nil }
        defer { if let children { XFree(children) } }
        guard let children else { return false }
        // From the top of the stack down: a locker's window is usually the top one.
        for k in (0..<Int(childCount)).reversed() where lockerClients.contains(children[k] & bits) {
            var attributes = XWindowAttributes()
            if XGetWindowAttributes(display, children[k], &attributes) != 0, attributes.map_state == IsViewable {
                return true
            }
        }
        return false
    }

    /// The clients that suspend the server's saver now (XScreenSaverSuspend), with their
    /// pids: the server keeps a resource of type "SaverSuspend" for each, from the
    /// suspension to its end (the client's resume or disconnection). Nil when X cannot
    /// tell (no X-Resource 1.2, a query failed): then a suspension shows only past the
    /// saver timeout. One round trip for the clients, one per client for its resource
    /// types (X-Resource filters by type only by a server-internal number, not by the
    /// type's name), one for the suspenders' pids; only at the agent's own wake-ups
    /// (deadlines, the periodic look while the X server holds, status).
    func saverSuspenders() -> [XSaverSuspender]? {
        guard case .success = clientOwners else { return nil }
        let suspendType = saverSuspendAtom ?? XInternAtom(display, "SaverSuspend", 0)
        saverSuspendAtom = suspendType
        var count: Int32 = 0
        var clients: UnsafeMutablePointer<XResClient>?
        guard XResQueryClients(display, &count, &clients) != 0 else { return nil }
        defer { if let clients { XFree(clients) } }
        var suspending: [XID] = []
        for k in 0..<Int(clients == nil ? 0 : count) {
            let base = clients![k].resource_base
            var typeCount: Int32 = 0
            var types: UnsafeMutablePointer<XResType>?
            // A client gone since the list was made answers BadValue: no suspension of its.
            guard XResQueryClientResources(display, base, &typeCount, &types) != 0, let types else { continue }
            if (0..<Int(typeCount)).contains(where: { types[$0].resource_type == suspendType && types[$0].count > 0 }) {
                suspending.append(base)
            }
            XFree(types)
        }
        guard !suspending.isEmpty else { return [] }
        // Their pids, in one round trip (a remote client has none).
        var specs = suspending.map { XResClientIdSpec(client: $0, mask: UInt32(XRES_CLIENT_ID_PID_MASK.rawValue)) }
        var idCount = 0
        var ids: UnsafeMutablePointer<XResClientIdValue>?
        var pids: [XID: pid_t] = [:]
        if XResQueryClientIds(display, specs.count, &specs, &idCount, &ids) == Success, let ids {
            for k in 0..<idCount {
                let pid = XResGetClientPid(ids + k)
                if pid > 0 { pids[ids[k].spec.client] = pid }
            }
            XResClientIdsDestroy(idCount, ids)
        }
        return suspending.map { base in
            let pid = pids[base]
            return XSaverSuspender(client: UInt(base), pid: pid.map { Int32($0) }, name: pid.map { processName($0) } ?? "")
        }
    }

    /// The atom naming the suspension's resource type.
    private var saverSuspendAtom: Atom?

    /// The client bits of an XID: the complement of a client's resource mask (XResQueryClients).
    private func readClientBits() -> XID? {
        var count: Int32 = 0
        var clients: UnsafeMutablePointer<XResClient>?
        guard XResQueryClients(display, &count, &clients) != 0, let clients else { return nil }
        defer { XFree(clients) }
        guard count > 0 else { return nil }
        return ~clients[0].resource_mask & 0x1FFF_FFFF  // XIDs are 29 bits
    }

    /// A token naming this X server instance, kept on its root window: a new
    /// server on the same display number has another (or none yet), so a locker
    /// record made for an earlier server is not mistaken for this one's.
    func serverToken() -> String {
        let atom = XInternAtom(display, "_XIDLELOCK_SERVER", 0)
        let xaString: Atom = 31  // XA_STRING, a cast macro Swift does not import
        var type: Atom = 0
        var format: Int32 = 0
        var count: UInt = 0
        var after: UInt = 0
        var data: UnsafeMutablePointer<UInt8>?
        if XGetWindowProperty(display, root, atom, 0, 16, 0, xaString, &type, &format, &count, &after, &data) == Success,
           let data, type == xaString, format == 8, count > 0 {
            defer { XFree(data) }
            return String(decoding: UnsafeBufferPointer(start: data, count: Int(count)), as: UTF8.self)
        }
        let token = String(UInt64.random(in: .min ... .max), radix: 16) + String(UInt64.random(in: .min ... .max), radix: 16)
        var bytes = Array(token.utf8)
        XChangeProperty(display, root, atom, xaString, 8, PropModeReplace, &bytes, Int32(bytes.count))
        XFlush(display)
        return token
    }

    /// The screensaver as the server sees it, with the idle counter: one round trip,
    /// two when the reading needs the saver timeout too.
    func saverReading() -> ScreenSaverReading? {
        guard XScreenSaverQueryInfo(display, root, info) != 0 else { return nil }
        let state: ScreenSaverReading.State = switch info.pointee.state {
        case 1: .on       // ScreenSaverOn
        case 3: .disabled  // ScreenSaverDisabled
        default: .off
        }
        let tilOrSince = Millis(Int64(clamping: info.pointee.til_or_since))
        // The timeout takes a round trip of its own: asked for only when the reading
        // could mean a client's suspension (Off, nothing left to wait) or an activation
        // (On); Disabled is a timeout of 0; otherwise the last one known serves.
        let previousTimeout = knownSaverTimeout
        if state == .disabled {
            knownSaverTimeout = .zero
        } else if state == .on || (state == .off && tilOrSince == .zero) || knownSaverTimeout == nil {
            knownSaverTimeout = saverSettings().timeout
        }
        // A presentation turns DPMS off with the saver: said with the saver-off hold.
        let dpmsOff = state == .disabled && dpmsDisabled()
        let now = SystemClock.now().monotonic
        // Another client set the timeout (xdg-screensaver's resume after its `xset s
        // off`): the server's saver timer restarted then, at the latest now.
        if let previousTimeout, knownSaverTimeout != previousTimeout { saverTimeoutSetAt = now }
        return ScreenSaverReading(state: state, idle: Millis(Int64(clamping: info.pointee.idle)),
                                  tilOrSince: tilOrSince, timeout: knownSaverTimeout ?? .zero,
                                  sinceTimeoutSet: saverTimeoutSetAt.map { now - $0 }, dpmsOff: dpmsOff)
    }

    /// Whether the server's DPMS is disabled (`xset -dpms`); false when it cannot tell.
    private func dpmsDisabled() -> Bool {
        if dpmsAvailable == nil {
            var error = [CChar](repeating: 0, count: 256)
            var event: Int32 = 0
            var base: Int32 = 0
            dpmsAvailable = xil_xext_load(&error, error.count) == 0 && DPMSQueryExtension(display, &event, &base) != 0
                && DPMSCapable(display) != 0
        }
        guard dpmsAvailable == true else { return false }
        var level: CARD16 = 0
        var enabled: BOOL = 0
        return DPMSInfo(display, &level, &enabled) != 0 && enabled == 0
    }

    private var dpmsAvailable: Bool?

    /// The server's saver timeout as last read (see `saverReading`).
    private var knownSaverTimeout: Millis?
    /// When the saver timeout was last set, by the agent or (seen at the latest) by
    /// another client: the server's saver timer restarts then.
    private var saverTimeoutSetAt: MonotonicInstant?

    /// The server's saver settings (XGetScreenSaver); the timeout in ms.
    func saverSettings() -> (timeout: Millis, interval: Int32, preferBlanking: Int32, allowExposures: Int32) {
        var timeout: Int32 = 0
        var interval: Int32 = 0
        var prefer: Int32 = 0
        var allow: Int32 = 0
        XGetScreenSaver(display, &timeout, &interval, &prefer, &allow)
        return (.seconds(Int64(timeout)), interval, prefer, allow)
    }

    /// Sets the saver timeout, keeping the other settings. Waits for the server to
    /// have done it (a round trip, twice in the agent's life): at exit the agent's
    /// last word must be applied before a next client asks.
    func setSaverTimeout(_ timeout: Millis) {
        knownSaverTimeout = timeout
        let current = saverSettings()
        XSetScreenSaver(display, Int32(clamping: timeout.value / 1000), current.interval, current.preferBlanking, current.allowExposures)
        XSync(display, 0)
        saverTimeoutSetAt = SystemClock.now().monotonic
    }

    /// Asks for ScreenSaverNotify events: the server's saver turning on (`xset s activate`).
    func watchSaver() {
        XScreenSaverSelectInput(display, root, UInt(1))  // ScreenSaverNotifyMask
        XFlush(display)
    }

    /// Where the pointer is on the root window, and in which corner of `areas` (each
    /// monitor's rectangle) it lies, corners being `size` pixels square. One round trip.
    func pointerRest(cornerSize size: Int32, areas: [ScreenArea]) -> PointerRest? {
        var rootReturn: Window = 0
        var child: Window = 0
        var x: Int32 = 0
        var y: Int32 = 0
        var winX: Int32 = 0
        var winY: Int32 = 0
        var mask: UInt32 = 0
        // False when the pointer is on another screen of this display: in no corner of ours.
        guard XQueryPointer(display, root, &rootReturn, &child, &x, &y, &winX, &winY, &mask) != 0 else { return nil }
        let position = PointerPosition(x: x, y: y)
        return PointerRest(corner: areas.lazy.compactMap { $0.corner(of: position, size: size) }.first, position: position)
    }

    /// The root window's rectangle: the corners when RandR tells no monitors.
    func rootArea() -> ScreenArea {
        let screen = XDefaultScreen(display)
        return ScreenArea(x: 0, y: 0, width: XDisplayWidth(display, screen), height: XDisplayHeight(display, screen))
    }

    /// What one drain of the event queue found.
    struct Drained {
        /// Raw input events (key, button, motion, touch).
        var input = 0
        /// Raw events read after the deselection (sent before the server took it):
        /// not input, the input before them was counted.
        var late = 0
        /// The server's own saver turned on.
        var saverOn = false
        /// Property changes and ends of windows the agent follows (`--not-when-fullscreen`).
        var windowChanges: [WindowChange] = []
    }

    struct WindowChange: Equatable {
        var window: Window
        /// The property that changed; nil when the window was destroyed.
        var property: Atom?
    }

    /// Reads every event XCB has, and with `readingSocket` every one it can read
    /// without blocking. Raw input events are only counted (in C, each freed as it is
    /// read): the agent needs to know that input happened, not what it was, and which
    /// devices are selected says whose. `stoppingAtInput`: while listening, it stops
    /// at the first input (the state machine pauses listening then, and the sooner the
    /// deselection goes out, the fewer events a flood sends before the server takes it).
    func drainInput(readingSocket: Bool = true, stoppingAtInput: Bool = false) -> Drained {
        var drained = Drained()
        var raw: UInt = 0
        var event = xil_x_event()
        reading: while true {
            let got = xil_xcb_next_event(display, readingSocket ? 1 : 0, xinputOpcode, saverEventBase, listening && stoppingAtInput ? 1 : 0, &raw, &event)
            if got < 0 { XServer.connectionLost(XServer.xcbFailure(-got)) }
            if got == 0 { break }
            switch xil_x_event_kind(UInt32(event.kind)) {
            case XIL_X_INPUT: break reading
            case XIL_X_HIERARCHY: readDevices()
            case XIL_X_SAVER_ON: drained.saverOn = true
            case XIL_X_PROPERTY: drained.windowChanges.append(WindowChange(window: Window(event.window), property: Atom(event.atom)))
            case XIL_X_DESTROYED: drained.windowChanges.append(WindowChange(window: Window(event.window), property: nil))
            case XIL_X_ERROR: XServer.logError(event.error_code, request: event.request_code, minor: event.minor_code)
            default: break
            }
        }
        counts.rawEvents += Int(raw)
        // Read after the deselection: sent before the server took it, input already counted.
        if listening {
            drained.input = Int(raw)
        } else {
            drained.late = Int(raw)
            counts.lateEvents += Int(raw)
        }
        return drained
    }

    // MARK: Other clients' windows (EWMH)

    func atom(_ name: String) -> Atom { XInternAtom(display, name, 0) }

    func hasExtension(_ name: String) -> Bool {
        var opcode: Int32 = 0
        var event: Int32 = 0
        var error: Int32 = 0
        return XQueryExtension(display, name, &opcode, &event, &error) != 0
    }

    /// Asks for these core events of a window (0: none); a window that is gone is
    /// ignored (its BadWindow is logged at debug level).
    func follow(_ window: Window, events mask: Int) {
        XSelectInput(display, window, mask)
        XFlush(display)
    }

    /// A property of format 32 (atoms, windows) as its values; empty when it is
    /// missing, of another type, or the window is gone.
    func property32(_ window: Window, _ property: Atom, type: Atom, max: Int = 64) -> [UInt] {
        var actualType: Atom = 0
        var format: Int32 = 0
        var count: UInt = 0
        var after: UInt = 0
        var data: UnsafeMutablePointer<UInt8>?
        guard XGetWindowProperty(display, window, property, 0, max, 0, type, &actualType, &format, &count, &after, &data) == Success,
              let data else { return [] }
        defer { XFree(data) }
        guard actualType == type, format == 32 else { return [] }
        // Xlib hands format-32 items as C longs.
        return data.withMemoryRebound(to: UInt.self, capacity: Int(count)) { Array(UnsafeBufferPointer(start: $0, count: Int(count))) }
    }

    /// A text property (format 8) decoded as UTF-8, at most `max` bytes; nil when missing.
    func propertyText(_ window: Window, _ property: Atom, type: Atom, max: Int = 256) -> String? {
        var actualType: Atom = 0
        var format: Int32 = 0
        var count: UInt = 0
        var after: UInt = 0
        var data: UnsafeMutablePointer<UInt8>?
        guard XGetWindowProperty(display, window, property, 0, (max + 3) / 4, 0, type, &actualType, &format, &count, &after, &data) == Success,
              let data else { return nil }
        defer { XFree(data) }
        guard actualType == type, format == 8 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(count)), as: UTF8.self)
    }
}

/// Why the grab probe cannot tell whose windows show.
struct XResUnavailable: Error {
    var reason: String
}
