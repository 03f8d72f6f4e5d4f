import CBus
import Glibc
import IdleCore

/// Writes the audit trail: to the systemd journal as structured entries when one
/// listens, else as plain lines on stderr (never filtered by --quiet: an admin's
/// record is not chatter).
///
/// Writing never blocks the loop. A journald that does not read its socket makes
/// sd_journal_sendv wait in sendmsg for ever, so entries go to a writer thread
/// (journal.c) through a bounded queue, and this source collects their results. When
/// the journal has not taken an entry for `patience`, or the queue is full, the
/// entries waiting and all that follow go to stderr instead, counted, until it takes
/// one again. An entry is never lost without a line: the one stuck in sendmsg is
/// written to stderr too (it may reach the journal as well, later).
package final class AuditTrail: EventSource {
    /// The one trail of the agent; its results are collected once it is a source of the loop.
    nonisolated(unsafe) package static let shared = AuditTrail()

    package static func record(_ entry: AuditRecord) { shared.record(entry) }

    /// How long the journal may take one entry before it counts as not reading.
    package static let patience = Millis.seconds(1)

    private enum Journal {
        /// Not tried yet.
        case unknown
        case taking
        /// It has not taken an entry for `patience`, or the queue is full: entries go to stderr.
        case notReading
        /// None listens (no libsystemd, no socket, an error): stderr from now on.
        case none
    }

    private var journal = Journal.unknown
    private var notify: Int32 = -1
    private var nextID: UInt64 = 1
    /// Handed to the writer, no result yet; true once also written to stderr.
    private var pending: [UInt64: (entry: AuditRecord, onStderr: Bool)] = [:]
    /// Entries written to stderr because the journal did not take them, since it last did.
    private var sentToStderr = 0
    private let now: () -> MonotonicInstant

    package init(now: @escaping () -> MonotonicInstant = { SystemClock.now().monotonic }) {
        self.now = now
    }

    /// The session the agent answers for (`XIDLELOCK_SESSION`, `XIDLELOCK_DISPLAY`),
    /// known before the first entry: every entry names it, so that the entries of a
    /// user's several sessions can be told apart.
    nonisolated(unsafe) package static var session: [(name: String, value: String)] = []

    package func record(_ entry: AuditRecord) {
        var entry = entry
        entry.fields += AuditTrail.session
        if journal == .unknown { start() }
        switch journal {
        case .taking:
            let id = nextID
            nextID += 1
            let fields = entry.journalFields
            let submitted = withCStrings(fields) { xil_journal_submit(id, $0, Int32(fields.count)) }
            if submitted == 0 {
                pending[id] = (entry, false)
                return
            }
            if submitted == -EAGAIN {
                stopWaiting(because: "\(XIL_JOURNAL_QUEUE) entries wait for it")
                toStderr(entry)
            } else {
                Log.write(.audit, entry.plainLine)
            }
        case .notReading:
            toStderr(entry)
        case .none, .unknown:
            Log.write(.audit, entry.plainLine)
        }
    }

    private func start() {
        let fd = xil_journal_start()
        guard fd >= 0 else {
            journal = .none
            return
        }
        notify = fd
        journal = .taking
        atexit { AuditTrail.shared.flushAtExit() }
    }

    /// For status and `doctor`: where the trail goes, and how many entries went to
    /// stderr because the journal did not take them.
    package var statusFields: [(String, JSONValue)] {
        let to = switch journal {
        case .unknown, .taking: "journal"
        case .notReading: "stderr (the journal is not reading)"
        case .none: "stderr (no journal)"
        }
        return [("to", .string(to)), ("sent_to_stderr", .number(Double(sentToStderr))), ("waiting", .number(Double(pending.count)))]
    }

    // MARK: The loop's source

    package var pollInterest: (fd: Int32, events: PollEvents)? { notify >= 0 ? (notify, .readable) : nil }

    /// While an entry is in flight: when it will have waited too long.
    package var deadline: MonotonicInstant? {
        guard journal == .taking, !pending.isEmpty, let since = inFlightSince() else { return nil }
        return since.at + AuditTrail.patience
    }

    package func dispatch(_ events: PollEvents) {
        collect()
        if journal == .taking, let since = inFlightSince(), now() >= since.at + AuditTrail.patience {
            stopWaiting(because: "one has waited \(AuditTrail.patience)")
        }
    }

    private func inFlightSince() -> (id: UInt64, at: MonotonicInstant)? {
        var id: UInt64 = 0
        let since = xil_journal_in_flight(&id)
        return since < 0 ? nil : (id, .ms(since / 1_000_000))
    }

    /// The writer's results: an entry taken, or one it could not send.
    private func collect() {
        var ids = [UInt64](repeating: 0, count: Int(XIL_JOURNAL_QUEUE))
        var results = [Int32](repeating: 0, count: Int(XIL_JOURNAL_QUEUE))
        let n = Int(xil_journal_collect(&ids, &results, XIL_JOURNAL_QUEUE))
        for k in 0..<n {
            guard let (entry, onStderr) = pending.removeValue(forKey: ids[k]) else { continue }
            if results[k] == 0 {
                if journal == .notReading {
                    journal = .taking
                    Log.write(.warning, "the systemd journal takes audit entries again: \(sentToStderr) went to stderr while it did not")
                    sentToStderr = 0
                }
                continue
            }
            if !onStderr { Log.write(.audit, entry.plainLine) }
            if journal != .none {
                // No journald listens (or it went away): stderr from now on, said once.
                journal = .none
                Log.write(.warning, "the systemd journal does not take entries (\(String(cString: strerror(-results[k])))): the audit trail goes to stderr")
                takeBackWaiting(counted: false)
            }
        }
    }

    /// The journal does not read: the entries waiting go to stderr, and so do the
    /// next ones until it takes one again.
    private func stopWaiting(because reason: String) {
        guard journal == .taking else { return }
        journal = .notReading
        let before = sentToStderr
        takeBackWaiting(counted: true)
        // The entry in sendmsg may never get out: written here too.
        if let (id, _) = inFlightSince(), let stuck = pending[id], !stuck.onStderr {
            pending[id]?.onStderr = true
            Log.write(.audit, stuck.entry.plainLine)
            sentToStderr += 1
        }
        Log.write(.warning, "the systemd journal is not taking audit entries (\(reason)): \(sentToStderr - before) audit entries went to stderr, and the next ones go there until it takes one")
    }

    /// Takes the entries not yet sent back from the writer and writes them to stderr.
    private func takeBackWaiting(counted: Bool) {
        var ids = [UInt64](repeating: 0, count: Int(XIL_JOURNAL_QUEUE))
        let n = Int(xil_journal_cancel(&ids, XIL_JOURNAL_QUEUE))
        for id in ids[..<n] {
            guard let (entry, onStderr) = pending.removeValue(forKey: id), !onStderr else { continue }
            Log.write(.audit, entry.plainLine)
            if counted { sentToStderr += 1 }
        }
    }

    private func toStderr(_ entry: AuditRecord) {
        Log.write(.audit, entry.plainLine)
        sentToStderr += 1
    }

    /// At exit: a moment for the entries still waiting (a journal that reads takes
    /// them at once), then the rest to stderr, and the count if some did not get there.
    private func flushAtExit() {
        let deadline = now() + .ms(200)
        while !pending.isEmpty && journal == .taking && now() < deadline {
            var ready = pollfd(fd: notify, events: Int16(POLLIN), revents: 0)
            _ = poll(&ready, 1, 20)
            collect()
        }
        takeBackWaiting(counted: true)
        for (id, waiting) in pending where !waiting.onStderr {
            pending[id]?.onStderr = true
            toStderr(waiting.entry)
        }
        if journal == .notReading || sentToStderr > 0 {
            Log.write(.warning, "at exit: \(sentToStderr) audit entries went to stderr because the systemd journal did not take them")
        }
    }

}
