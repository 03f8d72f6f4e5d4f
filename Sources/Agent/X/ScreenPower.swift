import CX11
import CXlib
import IdleCore
import Platform

/// The monitor's power through the X server's DPMS extension, for
/// `--screen-off-after-lock`: no shell, no `xset`. The server turns the monitor on
/// at input by itself. DPMS must be enabled for a forced level to hold; the server's
/// own setting is put back when the lock ends and at exit.
final class ScreenPower {
    private let display: OpaquePointer
    /// Why the monitor cannot be turned off (no DPMS: Xvfb, Xorg's dummy driver), or nil.
    let unavailable: String?
    /// DPMS was disabled before the agent enabled it to turn the monitor off.
    private var enabledByAgent = false

    init(display: OpaquePointer) {
        self.display = display
        var error = [CChar](repeating: 0, count: 256)
        var event: Int32 = 0
        var base: Int32 = 0
        if xil_xext_load(&error, error.count) != 0 {
            unavailable = "\(String(nulTerminated: error)) (install libxext6)"
        } else if DPMSQueryExtension(display, &event, &base) == 0 {
            unavailable = "the X server has no DPMS extension"
        } else if DPMSCapable(display) == 0 {
            unavailable = "the X server's screen is not DPMS capable"
        } else {
            unavailable = nil
        }
    }

    /// Whether the monitor is on, as the server reports it (nil: unknown).
    var isOn: Bool? {
        guard unavailable == nil else { return nil }
        var level: CARD16 = 0
        var enabled: BOOL = 0
        guard DPMSInfo(display, &level, &enabled) != 0 else { return nil }
        return level == CARD16(DPMSModeOn)
    }

    /// Turns the monitor off; the reason it could not, or nil.
    func turnOff() -> String? {
        if let unavailable { return unavailable }
        var level: CARD16 = 0
        var enabled: BOOL = 0
        guard DPMSInfo(display, &level, &enabled) != 0 else { return "DPMSInfo failed" }
        if enabled == 0 {
            DPMSEnable(display)
            enabledByAgent = true
        }
        DPMSForceLevel(display, CARD16(DPMSModeOff))
        XSync(display, 0)
        return nil
    }

    /// Puts the server's own DPMS setting back (disabled, if it was).
    func restore() {
        guard enabledByAgent else { return }
        enabledByAgent = false
        DPMSDisable(display)
        XFlush(display)
    }
}
