import CX11
import Glibc

/// The monitors' rectangles, from RandR 1.5 (`XRRGetMonitors`: what `xrandr
/// --listmonitors` shows, so a monitor set up with `xrandr --setmonitor` counts).
/// libXrandr is loaded at run time: only `--corners` needs it, and every other
/// process of the binary (`xidlelock idle` above all) starts faster without it.
final class Monitors {
    private typealias QueryVersion = @convention(c) (OpaquePointer?, UnsafeMutablePointer<Int32>?, UnsafeMutablePointer<Int32>?) -> Int32
    private typealias GetMonitors = @convention(c) (OpaquePointer?, Window, Int32, UnsafeMutablePointer<Int32>?) -> UnsafeMutablePointer<XRRMonitorInfo>?
    private typealias FreeMonitors = @convention(c) (UnsafeMutablePointer<XRRMonitorInfo>?) -> Void

    private let getMonitors: GetMonitors
    private let freeMonitors: FreeMonitors

    /// Nil, with the reason, when the library or RandR 1.5 is missing.
    static func load(on x: XServer) -> Result<Monitors, MonitorsUnavailable> {
        guard let library = dlopen("libXrandr.so.2", RTLD_NOW | RTLD_LOCAL) else {
            return .failure(MonitorsUnavailable(reason: "libXrandr.so.2 cannot be loaded"))
        }
        guard let version = dlsym(library, "XRRQueryVersion"), let get = dlsym(library, "XRRGetMonitors"),
              let free = dlsym(library, "XRRFreeMonitors")
        else {
            return .failure(MonitorsUnavailable(reason: "libXrandr.so.2 has no XRRGetMonitors"))
        }
        var event: Int32 = 0
        var error: Int32 = 0
        var opcode: Int32 = 0
        guard XQueryExtension(x.display, "RANDR", &opcode, &event, &error) != 0 else {
            return .failure(MonitorsUnavailable(reason: "the X server has no RandR extension"))
        }
        var major: Int32 = 1
        var minor: Int32 = 5
        guard unsafeBitCast(version, to: QueryVersion.self)(x.display, &major, &minor) != 0,
              major > 1 || minor >= 5
        else {
            return .failure(MonitorsUnavailable(reason: "the X server's RandR is older than 1.5"))
        }
        return .success(Monitors(get: unsafeBitCast(get, to: GetMonitors.self), free: unsafeBitCast(free, to: FreeMonitors.self)))
    }

    private init(get: GetMonitors, free: FreeMonitors) {
        getMonitors = get
        freeMonitors = free
    }

    /// The active monitors now (one round trip); empty if the server tells none.
    func areas(on x: XServer) -> [ScreenArea] {
        var count: Int32 = 0
        guard let list = getMonitors(x.display, x.root, 1, &count) else { return [] }
        defer { freeMonitors(list) }
        return (0..<Int(max(count, 0))).map { k in
            let m = list[k]
            return ScreenArea(x: m.x, y: m.y, width: m.width, height: m.height)
        }
    }
}

struct MonitorsUnavailable: Error {
    var reason: String
}
