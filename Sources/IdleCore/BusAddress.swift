/// Where a D-Bus bus listens, as libsystemd finds it, so that the agent can watch for
/// the socket of a bus that is not there yet (a `startx` before the bus).
public enum BusAddress {
    /// The socket of the session bus: DBUS_SESSION_BUS_ADDRESS, else
    /// $XDG_RUNTIME_DIR/bus (nil without either, or for an address with no socket file).
    public static func sessionSocket(_ environment: (String) -> String?) -> String? {
        if let address = environment("DBUS_SESSION_BUS_ADDRESS"), !address.isEmpty { return socketPath(of: address) }
        guard let runtime = environment("XDG_RUNTIME_DIR"), runtime.hasPrefix("/") else { return nil }
        return runtime + "/bus"
    }

    /// The socket of the system bus: DBUS_SYSTEM_BUS_ADDRESS, else Debian's.
    public static func systemSocket(_ environment: (String) -> String?) -> String? {
        if let address = environment("DBUS_SYSTEM_BUS_ADDRESS"), !address.isEmpty { return socketPath(of: address) }
        return "/run/dbus/system_bus_socket"
    }

    /// The file of the first `unix:path=` in an address (`unix:path=/run/user/1000/bus`,
    /// alternatives split by `;`, keys by `,`, bytes %-escaped); nil when it names none
    /// (an abstract socket, tcp).
    public static func socketPath(of address: String) -> String? {
        for alternative in address.split(separator: ";") {
            guard let colon = alternative.firstIndex(of: ":"), alternative[..<colon] == "unix" else { continue }
            for pair in alternative[alternative.index(after: colon)...].split(separator: ",") {
                guard pair.hasPrefix("path=") else { continue }
                guard let path = unescaped(pair.dropFirst(5)), path.hasPrefix("/") else { return nil }
                return path
            }
        }
        return nil
    }

    private static func unescaped(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var utf8 = text.utf8.makeIterator()
        while let byte = utf8.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = utf8.next().flatMap(hexValue), let low = utf8.next().flatMap(hexValue) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
