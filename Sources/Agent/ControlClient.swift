import CLinux
import Glibc
import IdleCore

/// The script-facing commands: each connects to the agent's socket, sends one
/// request and shows the reply.
public enum ControlClient {
    public static func run(_ command: ClientCommand) throws(AgentError) -> Int32 {
        let (path, _) = try SocketPath.resolve(command.socket)
        let fd = xil_unix_connect(path)
        guard fd >= 0 else {
            let reason = errno
            if reason == ENOENT || reason == ECONNREFUSED {
                throw .unavailable("no xidlelock agent is running for this display (nothing listens on \(path))")
            }
            throw .unavailable("cannot reach the agent at \(path): \(String(cString: strerror(reason)))")
        }
        var reader = Reader(fd: fd)
        // A refused client is answered and closed at once: its write may then fail,
        // but the refusal is still there to read.
        signal(SIGPIPE, SIG_IGN)
        _ = writeAll(fd, command.request.line + "\n")
        let reply = try reader.reply()
        switch command.request {
        case .status:
            _ = writeAll(1, (command.json ? reply.text : HumanText.status(reply)) + "\n")
        case .toggle:
            _ = writeAll(1, (reply["disabled"]?.bool == true ? "disabled" : "enabled") + "\n")
        case .events:
            while let line = try reader.line(timeout: -1) {
                if command.json {
                    _ = writeAll(1, line + "\n")
                } else if let event = try? JSONValue(parsing: line) {
                    _ = writeAll(1, HumanText.event(event) + "\n")
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
                throw .failed("the agent sent a reply that is not JSON: \(line.prefix(200))")
            }
            guard reply["ok"]?.bool == true else {
                throw .failed("the agent refused: \(reply["error"]?.string ?? line)")
            }
            return reply
        }
    }
}

/// `xidlelock inhibit -- CMD ARGS`: runs CMD in the foreground, forwards the
/// signals a terminal or a service manager sends, and exits as CMD did.
enum InhibitingCommand {
    static func run(_ argv: [String]) throws(AgentError) -> Int32 {
        let forwarded: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH]
        let watched = forwarded + [SIGCHLD, 0]
        let signals = watched.withUnsafeBufferPointer { xil_signalfd_for($0.baseAddress) }
        guard signals >= 0 else { throw .failed("cannot watch signals: \(String(cString: strerror(errno)))") }
        var pid: pid_t = 0
        let err = withCStrings(argv) { strings in
            var terminated = Array(strings) + [nil]
            return terminated.withUnsafeMutableBufferPointer { xil_spawn_argv($0.baseAddress, &pid) }
        }
        guard err == 0 else {
            throw .failed("inhibit: cannot run '\(argv[0])': \(String(cString: strerror(err)))")
        }
        while true {
            var pfd = pollfd(fd: signals, events: Int16(POLLIN), revents: 0)
            if poll(&pfd, 1, -1) < 0 && errno != EINTR { break }
            while case let signal = xil_signalfd_read(signals), signal > 0 {
                if signal != SIGCHLD {
                    _ = kill(pid, signal)
                    continue
                }
                var status: Int32 = 0
                var killedBy: Int32 = 0
                while true {
                    let ended = xil_reap_one(&status, &killedBy)
                    if ended == pid { return killedBy != 0 ? 128 + killedBy : status }
                    if ended <= 0 { break }
                }
            }
        }
        throw .failed("inhibit: lost track of '\(argv[0])'")
    }
}
