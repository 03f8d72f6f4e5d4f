import IdleCore
import Testing

@Suite("The socket a bus listens on, watched for when the bus is not there yet")
struct BusAddressTests {
    @Test("the first unix:path of an address", arguments: [
        ("unix:path=/run/user/1000/bus", "/run/user/1000/bus"),
        ("unix:path=/tmp/a%20b/bus,guid=0123456789abcdef", "/tmp/a b/bus"),
        ("unix:abstract=/tmp/dbus-x;unix:path=/run/dbus/system_bus_socket", "/run/dbus/system_bus_socket"),
        ("unix:guid=1,path=/x/bus", "/x/bus"),
    ])
    func socketPath(address: String, path: String) {
        #expect(BusAddress.socketPath(of: address) == path)
    }

    @Test("addresses with no socket file", arguments: [
        "unix:abstract=/tmp/dbus-x", "tcp:host=localhost,port=1", "unix:path=relative/bus", "unix:path=/bad%2", "", "nonsense",
    ])
    func noSocket(address: String) {
        #expect(BusAddress.socketPath(of: address) == nil)
    }

    @Test("the defaults libsystemd uses")
    func defaults() {
        #expect(BusAddress.sessionSocket { ["XDG_RUNTIME_DIR": "/run/user/1000"][$0] } == "/run/user/1000/bus")
        #expect(BusAddress.sessionSocket { _ in nil } == nil)
        #expect(BusAddress.sessionSocket { ["DBUS_SESSION_BUS_ADDRESS": "unix:path=/tmp/s.bus", "XDG_RUNTIME_DIR": "/run/user/1"][$0] } == "/tmp/s.bus")
        #expect(BusAddress.systemSocket { _ in nil } == "/run/dbus/system_bus_socket")
        #expect(BusAddress.systemSocket { ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/tmp/y.bus"][$0] } == "/tmp/y.bus")
    }
}
