import Foundation
import Glibc

/// A private pcscd for one test, with vsmartcard's virtual reader driver (vpcd, two
/// readers "Virtual PCD 00 00" and "… 00 01") listening on ports of the test's own,
/// and `vicc` as the card in the first. pcscd 1.9.9 always listens on
/// /run/pcscd/pcscd.comm (only the client library reads PCSCLITE_CSOCK_NAME), so
/// there is one pcscd at a time on a machine: the suites that use this are
/// serialized, and a pcscd of the system's own must not run meanwhile.
final class SmartCards {
    let port: Int
    private let sandbox: Sandbox
    private var pcscd: Process?
    private var card: Process?
    private var starts = 0
    private var cards = 0

    /// What a PC/SC client needs to reach this pcscd: the default socket.
    var environment: [String: String?] { ["PCSCLITE_CSOCK_NAME": nil] }
    static let socket = "/run/pcscd/pcscd.comm"

    init(in sandbox: Sandbox) throws {
        self.sandbox = sandbox
        port = try SmartCards.freePortPair()
        try readerConfig(readers: true)
        // vicc imports PyCrypto's `Crypto`, which Debian ships as `Cryptodome`.
        let python = sandbox.path("vicc-python")
        try FileManager.default.createDirectory(atPath: python, withIntermediateDirectories: true)
        try? FileManager.default.createSymbolicLink(atPath: python + "/Crypto", withDestinationPath: "/usr/lib/python3/dist-packages/Cryptodome")
    }

    /// pcscd's reader configuration: vpcd on this test's ports, or (`readers` false)
    /// none, as after the reader was unplugged.
    func readerConfig(readers: Bool) throws {
        let directory = sandbox.path("reader.conf.d")
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        guard readers else { return }
        try """
        FRIENDLYNAME "Virtual PCD"
        DEVICENAME   /dev/null:\(port)
        LIBPATH      /usr/lib/pcsc/drivers/serial/libifdvpcd.so
        CHANNELID    \(port)

        """.write(toFile: directory + "/vpcd", atomically: true, encoding: .utf8)
    }

    /// Starts pcscd and returns once it answers on its socket.
    func start() async throws {
        starts += 1
        let log = "pcscd-\(starts).log"
        try FileManager.default.createDirectory(atPath: "/run/pcscd", withIntermediateDirectories: true)
        // An earlier test's pcscd, killed at its clean-up, left its files: pcscd refuses
        // to start while its pid file names a live process.
        let pidFile = (try? String(contentsOfFile: "/run/pcscd/pcscd.pid", encoding: .utf8)) ?? ""
        if let pid = Int32(pidFile.trimmingCharacters(in: .whitespacesAndNewlines)), kill(pid, 0) != 0 {
            try? FileManager.default.removeItem(atPath: SmartCards.socket)
            try? FileManager.default.removeItem(atPath: "/run/pcscd/pcscd.pid")
        }
        let process = try sandbox.startBackground("/usr/sbin/pcscd", ["--foreground", "--info", "-c", sandbox.path("reader.conf.d")],
                                                  output: log, environment: environment)
        pcscd = process
        try await sandbox.waitUntil("pcscd to be ready") { [self] in
            if !process.isRunning {
                throw CommandFailed(command: ["pcscd"], result: CommandResult(exit: Exit(process), stdout: sandbox.contents(log), stderr: ""))
            }
            return sandbox.contents(log).contains("daemon ready")
        }
    }

    /// Stops pcscd at once (SIGKILL), as a crash would: its clients lose their connection.
    func stop() async throws {
        guard let pcscd, pcscd.isRunning else { return }
        kill(pcscd.processIdentifier, SIGKILL)
        _ = try await pcscd.waitForExit("pcscd")
        // A killed pcscd leaves its socket and pid file behind.
        try? FileManager.default.removeItem(atPath: SmartCards.socket)
        try? FileManager.default.removeItem(atPath: "/run/pcscd/pcscd.pid")
    }

    /// Puts vicc's card in the first reader; returns once pcscd has seen it.
    func insert() async throws {
        cards += 1
        let log = "vicc-\(cards).log"
        let before = inserted
        card = try sandbox.startBackground(systemPython, ["/usr/bin/vicc", "-P", String(port)], output: log, environment: [
            "PYTHONPATH": "/usr/lib/python3/site-packages/virtualsmartcard:" + sandbox.path("vicc-python"),
        ])
        try await sandbox.waitUntil("pcscd to see the card") { [self] in
            if let card, !card.isRunning {
                throw CommandFailed(command: ["vicc"], result: CommandResult(exit: Exit(card), stdout: sandbox.contents(log), stderr: ""))
            }
            return inserted > before
        }
    }

    /// Takes the card out (vicc ends: vpcd's reader is empty). Returns when it was taken out.
    @discardableResult
    func remove() async throws -> Date {
        guard let card, card.isRunning else { return Date() }
        let at = Date()
        kill(card.processIdentifier, SIGKILL)
        _ = try await card.waitForExit("vicc")
        return at
    }

    /// How many insertions pcscd has logged, over all its runs.
    private var inserted: Int {
        (1...max(starts, 1)).map { sandbox.contents("pcscd-\($0).log").components(separatedBy: "Card inserted into").count - 1 }.reduce(0, +)
    }

    /// Two consecutive free TCP ports (vpcd listens on one per reader).
    static func freePortPair() throws -> Int {
        for _ in 0..<50 {
            let port = Int.random(in: 20_000...60_000)
            if canBind(port) && canBind(port + 1) { return port }
        }
        throw CommandFailed(command: ["find a free port"], result: CommandResult(exit: .exited(1), stdout: "", stderr: "no free pair of ports"))
    }

    private static func canBind(_ port: Int) -> Bool {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = INADDR_ANY
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
