import Platform
/// The X server's XTEST devices by id (`--ignore-xtest`): each master has an XTEST
/// pointer and keyboard of its own, the slaves that xdotool, jigglers and x11vnc
/// send their input through. Raw input is selected from the other slaves only, so
/// the server never sends these devices' events (XServer.listen).
struct XtestDevices: Equatable {
    /// The server's device ids are below 256 (its MAXDEVICES).
    private var bits: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

    init(_ ids: [Int32] = []) {
        for id in ids { insert(id) }
    }

    mutating func insert(_ id: Int32) {
        guard (0..<256).contains(id) else { return }
        let bit = UInt64(1) << UInt64(id & 63)
        switch id >> 6 {
        case 0: bits.0 |= bit
        case 1: bits.1 |= bit
        case 2: bits.2 |= bit
        default: bits.3 |= bit
        }
    }

    /// An id outside the server's range counts as XTEST: input that cannot be placed
    /// is not trusted to keep the screen unlocked.
    func contains(_ id: Int32) -> Bool {
        guard (0..<256).contains(id) else { return true }
        let word = switch id >> 6 {
        case 0: bits.0
        case 1: bits.1
        case 2: bits.2
        default: bits.3
        }
        return word & (UInt64(1) << UInt64(id & 63)) != 0
    }

    var ids: [Int32] { (0..<256).filter(contains) }

    static func == (a: XtestDevices, b: XtestDevices) -> Bool { a.bits == b.bits }

    /// Whether a slave device is an XTEST device: the server marks its own with the
    /// property "XTEST Device"; its name (" XTEST pointer", " XTEST keyboard" after
    /// the master's) tells on a server without the property. Either suffices: a real
    /// device taken for XTEST makes the screen lock sooner, never later.
    static func isXtest(name: String, hasXtestProperty: Bool) -> Bool {
        hasXtestProperty || name.hasSuffix(" XTEST pointer") || name.hasSuffix(" XTEST keyboard")
    }
}
