import Foundation
import Glibc

/// What /proc tells about a process, for tests that check what really runs.
enum ProcInfo {
    /// Its name (/proc/PID/comm), or nil once it is gone.
    static func name(_ pid: Int32) -> String? {
        (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?.trimmingCharacters(in: .newlines)
    }

    /// The fields of /proc/PID/stat after the name: [0] is the state, [1] the parent,
    /// [11] utime, [12] stime, [19] the start time.
    static func statFields(_ pid: Int32) -> [String]? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")")
        else { return nil }
        return stat[stat.index(after: close)...].split(separator: " ").map(String.init)
    }

    static func parent(_ pid: Int32) -> Int32? { statFields(pid).flatMap { Int32($0[1]) } }

    /// The start time in clock ticks since boot, as the agent's locker record keeps it.
    static func startTime(_ pid: Int32) -> String? { statFields(pid).map { $0[19] } }

    /// User plus system CPU time so far, in clock ticks (100 a second).
    static func cpuTicks(_ pid: Int32) -> Int? {
        guard let fields = statFields(pid), let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
        return user + system
    }

    /// The value of an environment variable of a process (root reads anyone's).
    static func environment(_ pid: Int32, _ name: String) -> String? {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/environ") else { return nil }
        for entry in data.split(separator: 0) {
            let text = String(decoding: entry, as: UTF8.self)
            if text.hasPrefix(name + "=") { return String(text.dropFirst(name.count + 1)) }
        }
        return nil
    }

    /// How many descriptors it has open.
    static func descriptorCount(_ pid: Int32) -> Int? {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd"))?.count
    }

    static var allPids: [Int32] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap(Int32.init)
    }
}

/// The i3lock lockers running on `display`, one session each: the agent starts every
/// locker in a session of its own, and what one i3lock forks (the helper that keeps its
/// window raised, the copy that stays when it forks and returns) stays in its session.
/// Live processes named i3lock whose DISPLAY is that display, one per session (the lowest pid).
func i3lockInstances(on display: String) -> [Int32] {
    var sessions: [String: Int32] = [:]
    for pid in ProcInfo.allPids where ProcInfo.name(pid) == "i3lock" && isAlive(pid)
        && ProcInfo.environment(pid, "DISPLAY") == display {
        guard let session = ProcInfo.statFields(pid)?[3] else { continue }
        sessions[session] = min(sessions[session] ?? pid, pid)
    }
    return sessions.values.sorted()
}

/// A display number no running server uses, high enough that the servers other tests
/// start with `-displayfd` (which take the lowest free numbers) do not reach it.
func unusedDisplayNumber() -> Int {
    while true {
        let n = Int.random(in: 400...899)
        if !FileManager.default.fileExists(atPath: "/tmp/.X\(n)-lock"),
           !FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(n)") {
            return n
        }
    }
}

/// A duration as the agent prints it (`2s315ms`, `980ms`, `1m5s`), in ms.
func parseAgentDuration(_ text: Substring) -> Int? {
    let units: [(String, Int)] = [("ms", 1), ("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)]
    var rest = text
    var total = 0
    var any = false
    while !rest.isEmpty {
        let digits = rest.prefix { $0.isNumber }
        guard let value = Int(digits) else { return any ? total : nil }
        rest = rest.dropFirst(digits.count)
        guard let unit = units.first(where: { rest.hasPrefix($0.0) }) else { return nil }
        rest = rest.dropFirst(unit.0.count)
        total += value * unit.1
        any = true
    }
    return any ? total : nil
}

/// The durations that follow `prefix` in `log`, in ms: `the locker exited with status 1 after 2s315ms`.
func durations(after prefix: String, in log: String) -> [Int] {
    log.components(separatedBy: prefix).dropFirst().compactMap { tail in
        parseAgentDuration(tail.prefix { $0.isLetter || $0.isNumber })
    }
}

/// Reads newline-terminated lines from a raw client of the control socket.
final class LineReader {
    let client: RawSocketClient
    private var buffer: [UInt8] = []
    private(set) var closed = false
    private(set) var bytesRead = 0

    init(_ client: RawSocketClient) { self.client = client }

    /// The next line, or nil when the agent closed the connection or nothing came within `timeout`.
    func next(timeout: Duration = generousTimeout) -> String? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            guard !closed, ContinuousClock.now < deadline else { return nil }
            fill(waiting: 50)
        }
    }

    /// Reads what is there within `ms`; notes the end of the stream.
    private func fill(waiting ms: Int32) {
        var pfd = pollfd(fd: client.fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, ms) > 0 else { return }
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        let n = recv(client.fd, &chunk, chunk.count, 0)
        if n <= 0 {
            closed = true
            return
        }
        bytesRead += n
        buffer += chunk[..<n]
    }

    /// Whether the agent has closed its end (what it sent may still wait to be read).
    var peerClosed: Bool {
        let rdhup: Int16 = 0x2000  // POLLRDHUP, which Glibc's module does not export
        var pfd = pollfd(fd: client.fd, events: rdhup, revents: 0)
        return poll(&pfd, 1, 0) > 0 && pfd.revents & (Int16(POLLHUP) | rdhup) != 0
    }

    /// Reads until the agent closes the connection (true) or `timeout` passes (false).
    func drainToEnd(timeout: Duration) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !closed && ContinuousClock.now < deadline {
            fill(waiting: 50)
            buffer.removeAll(keepingCapacity: true)
        }
        return closed
    }
}

extension Sandbox {
    /// The agent's locker record beside this test's socket.
    var lockerRecord: String { socket + ".locker" }

    /// Starts an agent on this test's socket (through `shell` if given) and waits until it answers.
    func startAnsweringAgent(_ arguments: [String], environment: [String: String?] = [:],
                             shell: String? = nil) async throws -> AgentProcess {
        let agent = try startAgent(arguments + ["--socket", socket], environment: environment, shell: shell)
        try await IntegrationTests.waitUntil("the agent's socket to answer", context: { agent.log }) {
            guard agent.process.isRunning else { throw AgentExited(waitingFor: "its socket", exit: Exit(agent.process), log: agent.log) }
            return (try? await self.client("status").exit) == .exited(0)
        }
        return agent
    }

    /// Waits until status says the locker holds the keyboard, and returns its pid.
    func waitForCoveringLocker(other previous: Int32? = nil) async throws -> Int32 {
        var pid: Int32 = 0
        try await waitUntil("a locker that holds the keyboard" + (previous.map { " (not pid \($0))" } ?? "")) {
            let status = try await self.status()
            guard status["state"] as? String == "locked", let locker = status["locker_pid"] as? Int,
                  Int32(locker) != previous
            else { return false }
            pid = Int32(locker)
            return true
        }
        return pid
    }

    /// One request on a raw connection, and its reply.
    func request(_ line: String) throws -> String? {
        let reader = LineReader(try RawSocketClient(socket))
        reader.client.send(Array((line + "\n").utf8))
        return reader.next(timeout: .seconds(10))
    }
}

/// A parsed JSON object (a status reply, an event line).
func jsonObject(_ line: String) -> [String: Any]? {
    try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
}
