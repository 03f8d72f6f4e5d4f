import Foundation
import Glibc
import Testing

/// The systemd user unit's Type=notify, against a real datagram socket standing in for
/// systemd's notify socket (the protocol is the socket and the datagram).
@Suite struct ServiceManagerTests {
    @Test("READY=1 comes once the control socket answers; hooks and the locker never see NOTIFY_SOCKET")
    func readyAfterTheSocket() async throws {
        try await Sandbox.with { s in
            let path = s.path("notify.sock")
            let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            try #require(fd >= 0)
            defer { close(fd) }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                for (k, byte) in path.utf8.enumerated() { raw[k] = byte }
            }
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            try #require(bound == 0, "bind \(path): \(String(cString: strerror(errno)))")
            try await s.x("xdotool", "key", "shift")
            _ = try s.startAgent(["--lock-after", "2s", "--socket", s.socket, "--locker", "env > locker.env; exec sleep 60"],
                         environment: ["NOTIFY_SOCKET": path])
            var message = ""
            try await s.waitUntil("the agent's READY=1") {
                var buffer = [UInt8](repeating: 0, count: 1024)
                let n = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                if n > 0 { message = String(decoding: buffer[..<n], as: UTF8.self) }
                return n > 0
            }
            // Ready means answering: the socket is up before the message is sent.
            #expect(try await s.client("status").exit == .exited(0))
            #expect(message.hasPrefix("READY=1\n"), "\(message)")
            #expect(message.contains("STATUS=watching \(s.display ?? "?"), lock after 2s"), "\(message)")
            let environment = try await s.waitForLines("locker.env")
            #expect(!environment.contains { $0.hasPrefix("NOTIFY_SOCKET=") }, "the locker inherited NOTIFY_SOCKET")
        }
    }
}
