import Foundation
import Glibc
import Testing

/// Issue #40: several graphical sessions of one user (a local one beside xrdp's and
/// TigerVNC's), each agent answering for its own session only.
@Suite struct SessionsOfOneUserTests {
    // Row 3.
    @Test("JOURNAL_STREAM inherited from a service while stderr is a file: plain lines, no <N> prefixes; naming stderr itself: prefixed")
    func journalStreamCheckedAgainstStderr() async throws {
        try await Sandbox.with { s in
            // The device and inode of another file (the sandbox directory), as a session
            // started from tigervncserver@:1.service inherits its unit's stream.
            var other = stat()
            #expect(stat(s.directory.path, &other) == 0)
            let inherited = try s.startAgent(["--lock-after", "1h", "--socket", s.path("inherited.sock")],
                                             environment: ["JOURNAL_STREAM": "\(other.st_dev):\(other.st_ino)"])
            try await inherited.waitForLog(containing: "started; idle for")
            #expect(!inherited.log.contains("<6>"), "\(inherited.log)")
            #expect(inherited.log.contains("xidlelock: "), "\(inherited.log)")
            // sd-daemon's rule holds both ways: a stream that is stderr is the journal's.
            let journal = try s.startAgent(["--lock-after", "1h", "--socket", s.path("journal.sock")],
                                           shell: "JOURNAL_STREAM=$(stat -L -c %d:%i /proc/$$/fd/2) && export JOURNAL_STREAM && exec \"$0\" \"$@\"")
            try await waitUntil("a prefixed line", context: { journal.log }) { journal.log.contains("<6>") }
            #expect(!journal.log.contains("xidlelock: started"), "\(journal.log)")
        }
    }
}
