import Foundation
import Glibc
import Testing

/// Issue #10, "fail closed", on the control socket: what a client holds ends with it, a
/// client cannot make the agent's memory grow or crowd others out, and a client never
/// talks to another user's agent.
@Suite(.serialized) struct FailClosedControlTests {
    static let statusLine = "{\"v\":1,\"cmd\":\"status\"}\n"

    // Case 14.
    @Test("a client refuses, before sending anything, a socket served by another user", .enabled(if: getuid() == 0))
    func socketOfAnotherUser() async throws {
        try await Sandbox.with { s in
            // A directory both users can reach; the agent runs as nobody.
            let shared = s.path("shared")
            try #require(mkdir(shared, 0o777) == 0 && chmod(shared, 0o777) == 0)
            let socket = shared + "/agent.sock"
            let asNobody = ["--reuid=65534", "--regid=65534", "--clear-groups"]
            let agent = try s.startAgent(["--socket", socket, "--lock-after", "1h", "--locker", "true"],
                                         shell: "exec setpriv \(asNobody.joined(separator: " ")) \"$0\" \"$@\"")
            func statusAsNobody() async throws -> CommandResult {
                try await s.run("setpriv", asNobody + [agentBinary, "status", "--json", "--socket", socket])
            }
            try await s.waitUntil("the other user's agent to answer its user") { try await statusAsNobody().exit == .exited(0) }
            let result = try await s.run(agentBinary, ["disable", "--socket", socket])
            #expect(result.exit == .exited(69), "\(result.stderr)")
            #expect(result.stderr.contains("xidlelock: error: refusing the socket \(socket): it is served by uid 65534 (pid \(agent.pid)), not by you"),
                    "\(result.stderr)")
            let status = jsonObject(try await statusAsNobody().stdout)
            #expect(status?["state"] as? String == "active", "the disable reached the agent: \(status ?? [:])")
        }
    }

    // Case 17.
    @Test("two open-ended inhibits on one connection both end when it closes")
    func twoInhibitsOnOneConnection() async throws {
        try await Sandbox.with { s in
            _ = try await s.startAnsweringAgent(["--lock-after", "1h", "--locker", "true"])
            var connection: LineReader? = LineReader(try RawSocketClient(s.socket))
            connection?.client.send(Array("{\"v\":1,\"cmd\":\"inhibit\",\"why\":\"first\"}\n{\"v\":1,\"cmd\":\"inhibit\",\"why\":\"second\"}\n".utf8))
            #expect(connection?.next()?.contains("\"ok\":true") == true)
            #expect(connection?.next()?.contains("\"ok\":true") == true)
            let inhibitors = try #require(try await s.status()["inhibitors"] as? [[String: Any]])
            #expect(inhibitors.compactMap { $0["why"] as? String } == ["first", "second"], "\(inhibitors)")
            connection = nil  // closes it
            try await s.waitForStatus("both inhibitors to end") {
                ($0["inhibitors"] as? [Any])?.isEmpty == true && $0["state"] as? String == "active"
            }
        }
    }

    // Case 17.
    @Test("an events subscriber that never reads is dropped after 1 MiB of pending output; the agent keeps answering others")
    func subscriberThatNeverReads() async throws {
        try await Sandbox.with { s in
            let agent = try await s.startAnsweringAgent(["--lock-after", "1h", "--locker", "true", "--verbose"])
            let subscriber = LineReader(try RawSocketClient(s.socket))
            subscriber.client.send(Array("{\"v\":1,\"cmd\":\"events\"}\n".utf8))
            // Each disable for a millisecond is two events (disabled, enabled) of about 100 bytes.
            // (Inhibitors would not do: the agent takes at most one a second from a client.)
            let flooder = LineReader(try RawSocketClient(s.socket))
            let inhibit = "{\"v\":1,\"cmd\":\"disable\",\"for_ms\":1}\n"
            var requests = 0
            while requests < 20_000 && !subscriber.peerClosed {
                flooder.client.send(Array(String(repeating: inhibit, count: 64).utf8))
                for _ in 0..<64 {
                    let reply = try #require(flooder.next(timeout: .seconds(10)), "the agent stopped answering after \(requests) requests")
                    #expect(reply.contains("\"ok\":true"), "\(reply)")
                    requests += 1
                }
            }
            #expect(subscriber.peerClosed, "the subscriber was not dropped after \(requests) requests")
            #expect(agent.log.contains("dropping pid"), "\(agent.log.suffix(2000))")
            // What it still finds to read is bounded, and then its stream ends.
            #expect(subscriber.drainToEnd(timeout: .seconds(10)), "the dropped subscriber's connection stays open")
            #expect(subscriber.bytesRead < 3 << 20, "\(subscriber.bytesRead) bytes for the subscriber")
            let asked = ContinuousClock.now
            #expect(try await s.client("status").exit == .exited(0))
            #expect(ContinuousClock.now - asked < .seconds(5))
            flooder.client.send(Array(Self.statusLine.utf8))
            #expect(flooder.next(timeout: .seconds(5))?.contains("\"ok\":true") == true)
        }
    }

    // Case 17.
    @Test("at the limit of 128 clients a new client is served, and the one that asked nothing for longest is closed with a clear line")
    func clientLimit() async throws {
        try await Sandbox.with { s in
            let agent = try await s.startAnsweringAgent(["--lock-after", "1h", "--locker", "true"])
            // 128 clients, each answered and staying (within its 10 s).
            var clients: [LineReader] = []
            for _ in 0..<128 {
                let client = LineReader(try RawSocketClient(s.socket))
                client.client.send(Array(Self.statusLine.utf8))
                let reply = try #require(client.next(timeout: .seconds(10)), "no reply\n\(agent.log)")
                #expect(reply.contains("\"ok\":true"), "\(reply)")
                clients.append(client)
            }
            // Two more are served; the two that asked first make room.
            for _ in 0..<2 {
                let client = LineReader(try RawSocketClient(s.socket))
                client.client.send(Array(Self.statusLine.utf8))
                #expect(client.next(timeout: .seconds(10))?.contains("\"ok\":true") == true, "\(agent.log)")
                clients.append(client)
            }
            for k in 0..<2 {
                let line = clients[k].next(timeout: .seconds(10)) ?? "nothing"
                #expect(line.contains("closed: 128 clients are connected, and this one asked nothing for longest"), "client \(k): \(line)")
            }
            #expect(clients[2].next(timeout: .milliseconds(200)) == nil, "a later client was closed too")
            #expect(agent.log.contains("to make room for pid"), "\(agent.log)")
        }
    }
}
