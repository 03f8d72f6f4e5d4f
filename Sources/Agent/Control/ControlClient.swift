import CLinux
import Glibc
import IdleCore
import Platform

/// The script-facing commands: each connects to the agent's socket, sends one
/// request and shows the reply.
public enum ControlClient {
    public static func run(_ command: ClientCommand) throws(AgentError) -> Int32 {
        let fd = try connect(command.socket).fd
        var reader = Reader(fd: fd)
        // A refused client is answered and closed at once: its write may then fail,
        // but the refusal is still there to read.
        signal(SIGPIPE, SIG_IGN)
        _ = try? FileIO.writeAll(fd, command.request.line + "\n")
        let reply = try reader.reply()
        switch command.request {
        case .status:
            _ = try? FileIO.writeAll(1, (command.json ? reply.text : HumanText.status(reply)) + "\n")
        case .toggle:
            _ = try? FileIO.writeAll(1, (reply["disabled"]?.bool == true ? "disabled" : "enabled") + "\n")
        case .events:
            while let line = try reader.line(timeout: -1) {
                if command.json {
                    _ = try? FileIO.writeAll(1, line + "\n")
                } else if let event = try? JSONValue(parsing: line) {
                    _ = try? FileIO.writeAll(1, HumanText.event(event) + "\n")
                }
            }
            Log.write(.info, "the agent has stopped")
        case .inhibit where !command.command.isEmpty:
            // The connection stays open while the command runs: when this process
            // ends, however it ends, the kernel closes it and the inhibition ends.
            return try InhibitingCommand.run(command.command)
        default:
            break
        }
        return 0
    }

    /// The agent's status reply (for `doctor`), and the socket it came from.
    static func status(socket: String?) throws(AgentError) -> JSONValue {
        let fd = try connect(socket).fd
        defer { close(fd) }
        signal(SIGPIPE, SIG_IGN)
        _ = try? FileIO.writeAll(fd, ControlRequest.status.line + "\n")
        var reader = Reader(fd: fd)
        return try reader.reply()
    }

    /// Connects to this user's agent; refuses a socket served by anyone else.
    static func connect(_ socket: String?) throws(AgentError) -> (fd: Int32, path: String) {
        let (path, _) = try SocketPath.resolve(socket)
        let fd = xil_unix_connect(path)
        guard fd >= 0 else {
            let reason = errno
            if reason == ENOENT || reason == ECONNREFUSED {
                throw .unavailable("no xidlelock agent is running for this display (nothing listens on \(path))")
            }
            throw .unavailable("cannot reach the agent at \(path): \(String(cString: strerror(reason)))")
        }
        // The agent must be this user's: a socket served by anyone else (a planted
        // one in a shared /tmp) gets no request, least of all `lock` or `inhibit`.
        var agentPid: pid_t = 0
        var agentUid: uid_t = 0
        guard xil_peer_credentials(fd, &agentPid, &agentUid) == 0, agentUid == getuid() else {
            close(fd)
            throw .unavailable("refusing the socket \(path): it is served by uid \(agentUid) (pid \(agentPid)), not by you")
        }
        return (fd, path)
    }

    /// Reads reply and event lines from the agent.
    struct Reader {
        let fd: Int32
        var buffer = LineBuffer(limit: 4 << 20)

        init(fd: Int32) { self.fd = fd }

        /// The next line, or nil at the end of the stream. `timeout` in ms, -1 for none.
        mutating func line(timeout: Int32) throws(AgentError) -> String? {
            while true {
                if let line = buffer.nextLine() { return line }
                var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let ready = poll(&pfd, 1, timeout)
                if ready < 0 && errno == EINTR { continue }
                guard ready > 0 else { throw .failed("the agent did not answer within \(timeout / 1000) s") }
                var chunk = [UInt8](repeating: 0, count: 16 * 1024)
                let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return nil }
                chunk.withUnsafeBytes { buffer.append(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
            }
        }

        /// The reply to the request; an error reply becomes an error naming the agent's reason.
        mutating func reply() throws(AgentError) -> JSONValue {
            guard let line = try line(timeout: 5000) else {
                throw .failed("the agent closed the connection without answering")
            }
            guard let reply = try? JSONValue(parsing: line) else {
                throw .failed("the agent sent a reply that is not JSON: \(ClientText.sanitized(line, maxBytes: 200))")
            }
            guard reply["ok"]?.bool == true else {
                throw .failed("the agent refused: \(ClientText.sanitized(reply["error"]?.string ?? line, maxBytes: 400))")
            }
            return reply
        }
    }
}
