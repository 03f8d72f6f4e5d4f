import CCard
import Glibc
import IdleCore
import Platform

/// `--lock-on-card-removal`: pcscd's readers and cards. SCardGetStatusChange blocks
/// until something changes, so a thread of its own waits in it (ccard.c) and writes
/// each report to a pipe that this source reads: the loop never waits on pcscd, and
/// a removal reaches the machine as soon as pcscd tells it. The machine decides what
/// counts and what locks; this only turns the lines into facts.
final class CardWatch: EventSource {
    private let fd: Int32
    private weak var agent: DesktopAgent?
    /// The card thread's report lines (a report of every reader fits many times over).
    private var pending = LineBuffer(limit: 1 << 16)
    private var readers: [CardReader] = []

    /// Starts watching, or tells the machine why it cannot (no libpcsclite).
    static func start(for agent: DesktopAgent) -> CardWatch? {
        var error = [CChar](repeating: 0, count: 256)
        guard xil_card_load(&error, error.count) == 0 else {
            agent.perform(.cards(.unavailable("libpcsclite is not available (\(String(nulTerminated: error))); install pcscd and libpcsclite1")))
            return nil
        }
        let fd = xil_card_start()
        guard fd >= 0 else {
            agent.perform(.cards(.unavailable("cannot start watching the smart card readers: \(String(cString: strerror(-fd)))")))
            return nil
        }
        let watch = CardWatch(fd: fd, agent: agent)
        agent.addSource(watch)
        return watch
    }

    private init(fd: Int32, agent: DesktopAgent) {
        self.fd = fd
        self.agent = agent
    }

    /// At the agent's exit: the thread's wait ends (SCardCancel).
    func stop() { xil_card_stop() }

    var pollInterest: (fd: Int32, events: PollEvents)? { (fd, .readable) }

    func dispatch(_ events: PollEvents) {
        while pending.read(from: fd) == .data {}
        while let line = pending.nextLine() { handle(line) }
    }

    private func handle(_ line: String) {
        let parts = line.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false)
        switch parts.first {
        case "R" where parts.count == 4:
            let atr = parts[2] == "-" ? nil : try? CardATR(hex: String(parts[2]))
            readers.append(CardReader(name: ClientText.sanitized(String(parts[3]), maxBytes: 200), atr: atr,
                                      events: Int(parts[1]) ?? 0))
        case "E":
            let report = readers
            readers = []
            Log.debug("smart cards: " + (report.isEmpty ? "no reader" : report.map { "\($0.name): \($0.atr.map { "card \($0)" } ?? "no card") (\($0.events) events)" }.joined(separator: "; ")))
            agent?.perform(.cards(.readers(report)))
        case "U":
            readers = []
            agent?.perform(.cards(.unavailable(ClientText.sanitized(String(line.dropFirst(2)), maxBytes: 200))))
        default:
            Log.write(.warning, "smart cards: a report line not understood: \(ClientText.sanitized(line, maxBytes: 200))")
        }
    }
}
