import CXCB
import Glibc
import IdleCore
import Platform

/// `xidlelock idle`: the server's idle counter, printed like xprintidle. It runs in
/// shell loops and status bars, so it speaks to the server through libxcb alone:
/// the binary does not link libX11, which only the agent needs (loaded at run time).
public enum IdleQuery {
    public static func run(_ format: IdleFormat) throws(AgentError) {
        let idle = try serverIdle()
        format.withLine(idle) { _ = try? FileIO.writeAll(1, $0) }
    }

    /// What `XScreenSaverQueryInfo` calls idle: the time since the last input the
    /// server saw (or its last reset). Three round trips, as Xlib's: the connection
    /// set-up, the extension query and the reading.
    static func serverIdle() throws(AgentError) -> Millis {
        var screenNumber: Int32 = 0
        let connection = xcb_connect(nil, &screenNumber)
        defer { xcb_disconnect(connection) }
        let failure = xcb_connection_has_error(connection)
        guard failure == 0 else {
            throw XDisplayName.cannotOpen(reason: failure == XCB_CONN_CLOSED_INVALID_SCREEN ? "it has no such screen" : nil)
        }
        guard let saver = xcb_get_extension_data(connection, xil_xcb_screensaver_extension()), saver.pointee.present != 0 else {
            throw XDisplayName.noScreenSaverExtension
        }
        var screens = xcb_setup_roots_iterator(xcb_get_setup(connection))
        for _ in 0..<screenNumber { xcb_screen_next(&screens) }
        guard let screen = screens.data,
              let reply = xcb_screensaver_query_info_reply(connection, xcb_screensaver_query_info(connection, screen.pointee.root), nil)
        else {
            throw .failed("the X server did not answer the idle-time query")
        }
        defer { free(reply) }
        return Millis(Int64(reply.pointee.ms_since_user_input))
    }
}

/// The errors about the display that the agent and `idle` share, in the same words.
enum XDisplayName {
    /// `$DISPLAY` could not be opened (or is not set).
    static func cannotOpen(reason: String? = nil) -> AgentError {
        guard let name = getenv("DISPLAY"), name.pointee != 0 else {
            return .unavailable("DISPLAY is not set: there is no X display to watch (run xidlelock inside an X session)")
        }
        return .unavailable("cannot open X display '\(String(cString: name))'" + (reason.map { ": \($0)" } ?? ""))
    }

    static let noScreenSaverExtension = AgentError.unavailable(
        "the X server has no MIT-SCREEN-SAVER extension: its idle counter cannot be read")

    static let noXInput2 = AgentError.unavailable("the X server has no XInput 2 extension: raw input cannot be watched")

    private static let xlibMissingPrefix = "cannot load Xlib"

    /// libX11 or libXss cannot be loaded (the binary does not link them).
    static func xlibMissing(_ reason: String) -> AgentError {
        .unavailable("\(xlibMissingPrefix) (\(reason)): install libx11-6 and libxss1")
    }

    /// What to do about one of these errors (`doctor`), when it is not the usual
    /// advice (DISPLAY naming no reachable server); nil for the others.
    static func fix(for error: AgentError) -> String? {
        if error == noScreenSaverExtension || error == noXInput2 {
            return "use an X server with the MIT-SCREEN-SAVER and XInput 2 extensions (Xorg and Xvfb have both)"
        }
        if error.message.hasPrefix(xlibMissingPrefix) {
            return "install libx11-6 and libxss1: the agent loads them when it starts"
        }
        return nil
    }
}
