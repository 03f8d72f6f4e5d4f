@testable import Agent
@testable import Platform
import Glibc
import IdleCore
import Testing

/// Records what the connection hands to the agent.
final class RecordingHandler: ControlRequestHandler {
    var lines: [String] = []
    var closed = 0
    var reply: ((String, ControlConnection) -> Void)?

    func handle(_ line: String, from connection: ControlConnection) {
        lines.append(line)
        reply?(line, connection)
    }

    func connectionClosed(_ connection: ControlConnection) { closed += 1 }
}

/// A connected pair: the agent's end (non-blocking, in a ControlConnection) and the client's.
func connectionPair(_ handler: RecordingHandler) -> (ControlConnection, client: Int32) {
    var fds: [Int32] = [0, 0]
    precondition(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0)
    let client = fds[1]
    let flags = fcntl(client, F_GETFL)
    _ = fcntl(client, F_SETFL, flags & ~O_NONBLOCK)
    return (ControlConnection(fd: fds[0], pid: getpid(), who: "pid \(getpid()) (test)", handler: handler), client)
}

func send(_ fd: Int32, _ text: String) {
    _ = text.withCString { write(fd, $0, strlen($0)) }
}

func readAvailable(_ fd: Int32) -> String {
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, 100) > 0 else { break }
        let n = read(fd, &buffer, buffer.count)
        guard n > 0 else { break }
        out += buffer[..<n]
    }
    return String(decoding: out, as: UTF8.self)
}

@Suite("A control connection over a socketpair")
struct ControlConnectionTests {
    @Test("complete lines reach the handler; a partial line waits for its end")
    func lines() {
        let handler = RecordingHandler()
        let (connection, client) = connectionPair(handler)
        defer { close(client) }
        send(client, "{\"v\":1,\"cmd\":\"status\"}\n{\"v\":1,")
        connection.dispatch(.readable)
        #expect(handler.lines == ["{\"v\":1,\"cmd\":\"status\"}"])
        send(client, "\"cmd\":\"lock\"}\r\n")
        connection.dispatch(.readable)
        #expect(handler.lines.last == "{\"v\":1,\"cmd\":\"lock\"}")
        #expect(!connection.isFinished)
    }

    @Test("a line over 64 KiB is refused with a reply naming the limit, and the connection closes")
    func overlongLine() {
        let handler = RecordingHandler()
        let (connection, client) = connectionPair(handler)
        defer { close(client) }
        let junk = [UInt8](repeating: 0x61, count: ControlRequest.maxLineBytes + 10)
        _ = junk.withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
        for _ in 0..<10 where !connection.isFinished { connection.dispatch(.readable) }
        #expect(connection.isFinished)
        #expect(handler.lines.isEmpty)
        #expect(handler.closed == 1)
        #expect(readAvailable(client).contains("request longer than 65536 bytes"))
    }

    @Test("the end of the client's stream closes the connection once, after answering what came")
    func endOfStream() {
        let handler = RecordingHandler()
        handler.reply = { _, connection in connection.send("{\"v\":1,\"ok\":true}") }
        let (connection, client) = connectionPair(handler)
        send(client, "a\n")
        shutdown(client, Int32(SHUT_WR))
        connection.dispatch([.readable, .hangUp])
        #expect(handler.lines == ["a"])
        #expect(connection.isFinished)
        #expect(handler.closed == 1)
        #expect(readAvailable(client) == "{\"v\":1,\"ok\":true}\n")
        connection.close()
        #expect(handler.closed == 1, "closing twice reports once")
        close(client)
    }

    @Test("a client that holds nothing and asks nothing is answered and closed at its deadline")
    func requestTimeout() {
        let handler = RecordingHandler()
        let (connection, client) = connectionPair(handler)
        defer { close(client) }
        connection.requestDeadline = .seconds(5)
        #expect(connection.deadline == .seconds(5))
        connection.dispatch([])
        #expect(connection.isFinished)
        // It never sent a line: the first line's deadline is the one it missed.
        #expect(readAvailable(client).contains("no request within 2s"))
    }

    @Test("a subscriber that never reads is dropped once 1 MiB waits for it; memory stays bounded")
    func boundedOutput() {
        let handler = RecordingHandler()
        let (connection, client) = connectionPair(handler)
        defer { close(client) }
        let event = String(repeating: "e", count: 1000)
        var sent = 0
        while !connection.isFinished && sent < 10_000 {
            connection.send(event)
            sent += 1
            #expect(connection.output.count <= ControlConnection.maxPendingOutput + 1001)
        }
        #expect(connection.isFinished)
        #expect(handler.closed == 1)
        #expect(connection.pollInterest == nil)
    }
}

@Suite("The log never stalls the agent")
struct LogTests {
    @Test("lines the sink cannot take are dropped and counted, then reported")
    func droppedLines() {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        for fd in fds { _ = fcntl(fd, F_SETFL, O_NONBLOCK) }
        defer { close(fds[0]); close(fds[1]) }
        let (oldSink, oldSocket, oldThreshold) = (Log.sink, Log.sinkIsSocket, Log.threshold)
        Log.sink = fds[1]
        Log.sinkIsSocket = false
        Log.threshold = .info
        defer { (Log.sink, Log.sinkIsSocket, Log.threshold) = (oldSink, oldSocket, oldThreshold) }
        let line = String(repeating: "x", count: 4000)
        for _ in 0..<100 { Log.write(.info, line) }  // a pipe holds 64 KiB: most are dropped, none block
        #expect(Log.dropped > 0)
        let flooded = readAvailable(fds[0])
        Log.write(.info, "after")
        let text = readAvailable(fds[0])
        // Another test's line may have carried the report first: it is in one of the two.
        #expect((flooded + text).contains("log lines were dropped: the log's reader was not reading"))
        #expect(text.contains("xidlelock: after\n"))
    }
}

@Suite("doctor's search for an agent without its socket")
struct SocketlessAgentTests {
    @Test("the agent's command lines count, a client command's or doctor's do not", arguments: [
        (nil, true), ("run", true), ("--lock-after", true), ("-h", false), ("--version", false),
        ("status", false), ("doctor", false), ("inhibit", false), ("idle", false),
    ] as [(String?, Bool)])
    func agentCommandLines(_ first: String?, _ isAgent: Bool) {
        #expect(SocketlessAgent.isAgent(first) == isAgent)
    }
}
