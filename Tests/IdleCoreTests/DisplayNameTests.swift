import IdleCore
import Testing

@Suite("One agent per display, whatever the spelling")
struct DisplayNameTests {
    @Test("spellings of one local display name one socket", arguments: [":0", ":0.0", "unix:0", "unix:0.0", "unix/:0", ":0.1"])
    func localDisplayZero(text: String) {
        #expect(DisplayName(text)?.socketName == "0")
    }

    @Test("other displays and hosts", arguments: [
        (":1", "1"), (":10.0", "10"), ("host:1.0", "host_1"), ("Host.Example:2", "host.example_2"),
        ("localhost:10.0", "localhost_10"), ("tcp/host:3", "host_3"),
    ])
    func others(text: String, name: String) {
        #expect(DisplayName(text)?.socketName == name)
    }

    @Test("what is not a display name", arguments: ["", "0", ":", ":x", ":0.", ":0.a", "host::0", "a b:0", ":1234567", "../x:0"])
    func invalid(text: String) {
        #expect(DisplayName(text) == nil)
    }
}
