import Glibc
import IdleCore
import Platform

/// What the agent does with a client's lines.
protocol ControlRequestHandler: AnyObject {
    func handle(_ line: String, from connection: ControlConnection)
    func connectionClosed(_ connection: ControlConnection)
}

/// One client of the control socket, a source of its own: readable for its
/// requests, writable while replies or events wait, and a deadline by which a
/// client that holds nothing must have asked something.
final class ControlConnection: EventSource {
    let fd: Int32
    let pid: pid_t
    /// `pid 1234 (mpv)`, for status and logs; the process name is escaped.
    let who: String
    weak var handler: ControlRequestHandler?
    private var input = LineBuffer(limit: ControlRequest.maxLineBytes)
    private(set) var output: [UInt8] = []
    /// The request deadline, for clients that hold nothing and follow no events; at the
    /// connection limit the one nearest it is closed first.
    var requestDeadline: MonotonicInstant?
    /// It has sent a whole line.
    private(set) var asked = false
    var subscribed = false
    /// It holds the lock off while it stays open: no request deadline, and its holds
    /// end when it closes.
    var holds = false
    /// The holds' owner: this connection, and no other, may end them.
    let owner: HoldOwner
    /// The owner of the hold another session's agent passed on over this connection
    /// (of the service's source): it ends when the connection closes.
    var passedOn: HoldOwner?
    /// Close once the output is written.
    private var closing = false
    private(set) var isFinished = false

    /// A reader that lets more than this pile up (an events subscriber that never
    /// reads) is dropped: the agent's memory stays bounded.
    static let maxPendingOutput = 1 << 20
    /// Lines handled per wake-up, so that one flooding client cannot starve the rest.
    static let maxLinesPerWake = 64

    init(fd: Int32, pid: pid_t, who: String, handler: ControlRequestHandler?) {
        self.fd = fd
        self.pid = pid
        self.who = who
        self.handler = handler
        ControlConnection.opened += 1
        owner = HoldOwner(.socket, "connection \(ControlConnection.opened) of pid \(pid)")
    }

    /// Connections opened so far: each owner is a connection of its own, even when a
    /// descriptor or a pid is used again.
    nonisolated(unsafe) private static var opened = 0

    var pollInterest: (fd: Int32, events: PollEvents)? {
        isFinished ? nil : (fd, output.isEmpty ? .readable : [.readable, .writable])
    }

    var deadline: MonotonicInstant? { isFinished ? nil : requestDeadline }

    /// Queues a line and writes what the client takes now.
    func send(_ line: String) {
        guard !isFinished else { return }
        output.append(contentsOf: line.utf8)
        output.append(0x0A)
        flush()
        if output.count > ControlConnection.maxPendingOutput {
            Log.debug("dropping \(who): it does not read what it is sent")
            output.removeAll()
            close()
        }
    }

    /// Answers what came, then closes.
    func finish() {
        closing = true
        if output.isEmpty { close() }
    }

    func dispatch(_ events: PollEvents) {
        guard !isFinished else { return }
        if events.isEmpty {
            send(ControlRequest.errorReply("no request within \(asked ? ControlServerLimits.requestTimeout : ControlServerLimits.firstLineTimeout)"))
            close()
            return
        }
        flush()
        if !events.isDisjoint(with: [.readable, .hangUp, .error]) {
            for line in readLines() where !isFinished {
                asked = true
                handler?.handle(line, from: self)
            }
        }
        if closing && output.isEmpty { close() }
    }

    private func flush() {
        while !output.isEmpty {
            let result = try? output.withUnsafeBytes { bytes throws(SystemError) in try FileIO.writeSome(fd, bytes) }
            switch result {
            case .done(let n)?: output.removeFirst(n)
            case .wouldBlock?: return
            case nil:
                // The client is gone: nothing more can reach it.
                output.removeAll()
                closing = true
                return
            }
        }
    }

    /// The complete lines the client sent; marks it closing at the end of its
    /// stream, an error, or a line over the limit.
    private func readLines() -> [String] {
        var lines: [String] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while lines.count < ControlConnection.maxLinesPerWake {
            let result = try? chunk.withUnsafeMutableBytes { buffer throws(SystemError) in
                try Syscall.nonBlocking("read") { read(fd, buffer.baseAddress, buffer.count) }
            }
            guard case .done(let n)? = result else {
                if result == nil { closing = true }
                return lines
            }
            guard n > 0 else {
                closing = true
                return lines
            }
            chunk.withUnsafeBytes { input.append(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
            while let line = input.nextLine() { lines.append(line) }
            if input.overflowed {
                send(ControlRequest.errorReply("request longer than \(ControlRequest.maxLineBytes) bytes"))
                closing = true
                return lines
            }
        }
        return lines
    }

    func close() {
        guard !isFinished else { return }
        isFinished = true
        _ = Glibc.close(fd)
        handler?.connectionClosed(self)
    }
}

enum ControlServerLimits {
    static let maxConnections = 128
    /// How long a new client may take to send its first line: the agent's own commands
    /// send theirs at once.
    static let firstLineTimeout = Millis.seconds(2)
    /// How long a client that holds nothing may stay without sending a request.
    static let requestTimeout = Millis.seconds(10)
    /// Clients accepted a turn of the loop, fewer than the limit: a client accepted in
    /// one turn is read in the next, before a crowd behind it can push it out.
    static let acceptsPerTurn = 32
    /// After running out of descriptors, how long the listener rests: level-triggered
    /// poll would otherwise report the waiting client again at once, for ever.
    static let acceptBackoff = Millis.seconds(1)
}
