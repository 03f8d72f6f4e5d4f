import CBus
import Glibc
import IdleCore

/// Writes the audit trail: to the systemd journal as structured entries when one
/// listens, else as plain lines on stderr (never filtered by --quiet: an admin's
/// record is not chatter).
enum AuditTrail {
    nonisolated(unsafe) private static var journal: Bool?

    static func record(_ entry: AuditRecord) {
        if journal == nil { journal = xil_journal_load() == 0 }
        if journal == true {
            let fields = entry.journalFields
            let sent = withCStrings(fields) { xil_journal_send($0, Int32(fields.count)) }
            if sent == 0 { return }
            // No journald listens (or it went away): stderr from now on, said once.
            journal = false
            Log.write(.warning, "the systemd journal does not take entries (\(String(cString: strerror(-sent)))): the audit trail goes to stderr")
        }
        Log.write(.audit, entry.plainLine)
    }

    private static func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
        let copies = strings.map { strdup($0) }
        defer { copies.forEach { free($0) } }
        let pointers = copies.map { UnsafePointer($0) }
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}
