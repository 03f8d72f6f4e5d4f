/// A Wayland session is not the agent's to watch: XInput2 through XWayland sees only
/// the input of X clients, so the agent would lock while the user types in Wayland
/// windows.
public enum WaylandSession {
    /// Why the agent refuses this session, or nil for an X11 one.
    public static func refusal(sessionType: String?, waylandDisplay: String?) -> String? {
        var signs: [String] = []
        if sessionType == "wayland" { signs.append("XDG_SESSION_TYPE=wayland") }
        if let waylandDisplay, !waylandDisplay.isEmpty { signs.append("WAYLAND_DISPLAY=\(ClientText.sanitized(waylandDisplay, maxBytes: 64))") }
        guard !signs.isEmpty else { return nil }
        return "this is a Wayland session (\(signs.joined(separator: ", "))): through XWayland xidlelock would see only X programs' input and lock while you type in Wayland windows; use swayidle (sway and other wlroots compositors), hypridle (Hyprland) or your desktop's own screen lock"
    }
}
