import CX11
import CXlib
import Glibc
import Platform

/// The monitors' rectangles, from RandR 1.5 (`XRRGetMonitors`: what `xrandr
/// --listmonitors` shows, so a monitor set up with `xrandr --setmonitor` counts).
/// libXrandr is loaded at run time: only `--corners` needs it, and every other
/// process of the binary (`xidlelock idle` above all) starts faster without it.
final class Monitors {
    /// Nil, with the reason, when the library or RandR 1.5 is missing.
    static func load(on x: XServer) -> Result<Monitors, MonitorsUnavailable> {
        var reason = [CChar](repeating: 0, count: 256)
        guard xil_xrandr_load(&reason, reason.count) == 0 else {
            return .failure(MonitorsUnavailable(reason: String(nulTerminated: reason)))
        }
        var event: Int32 = 0
        var error: Int32 = 0
        var opcode: Int32 = 0
        guard XQueryExtension(x.display, "RANDR", &opcode, &event, &error) != 0 else {
            return .failure(MonitorsUnavailable(reason: "the X server has no RandR extension"))
        }
        var major: Int32 = 1
        var minor: Int32 = 5
        guard XRRQueryVersion(x.display, &major, &minor) != 0, major > 1 || minor >= 5 else {
            return .failure(MonitorsUnavailable(reason: "the X server's RandR is older than 1.5"))
        }
        return .success(Monitors())
    }

    private init() {}

    /// The active monitors now (one round trip); empty if the server tells none.
    func areas(on x: XServer) -> [ScreenArea] {
        var count: Int32 = 0
        guard let list = XRRGetMonitors(x.display, x.root, 1, &count) else { return [] }
        defer { XRRFreeMonitors(list) }
        return (0..<Int(max(count, 0))).map { k in
            let m = list[k]
            return ScreenArea(x: m.x, y: m.y, width: m.width, height: m.height)
        }
    }
}

struct MonitorsUnavailable: Error {
    var reason: String
}
