import Foundation
import Glibc
import IdleCore
import Testing

/// Issue #38: packaging/xidlelock.catalog explains every audit entry in `journalctl -x`.
/// The MESSAGE_IDs come from the code (`AuditRecord.messageIDs`, and every 32-hex-digit
/// MESSAGE_ID written anywhere in Sources/), never from a list kept here; the catalog
/// is compiled by journalctl itself (`--update-catalog` under a root of the test's own,
/// never the machine's catalog) and, where a journald runs, an entry written to it is
/// read back with its explanation (`journalctl -x`).
private let catalogRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
private let catalogFile = catalogRoot.appendingPathComponent("packaging/xidlelock.catalog").path

/// Every MESSAGE_ID the sources write: the table's, and every 32-hex-digit string
/// literal anywhere in Sources/ (a C file's `MESSAGE_ID=…`, a second table): a new ID
/// written outside the table is found all the same.
private func sourceMessageIDs() throws -> Set<String> {
    var ids = Set(AuditRecord.messageIDs.values)
    let sources = catalogRoot.appendingPathComponent("Sources")
    let files = FileManager.default.enumerator(atPath: sources.path)?.compactMap { $0 as? String } ?? []
    for file in files where file.hasSuffix(".swift") || file.hasSuffix(".c") || file.hasSuffix(".h") {
        let text = try String(contentsOfFile: sources.appendingPathComponent(file).path, encoding: .utf8)
        for match in text.matches(of: /"(?:MESSAGE_ID=)?([0-9a-f]{32})/) { ids.insert(String(match.output.1)) }
    }
    return ids
}

/// The catalog's entries: id, and the lines of its text (header and body).
private func catalogEntries() throws -> [String: [String]] {
    let text = try String(contentsOfFile: catalogFile, encoding: .utf8)
    var entries: [String: [String]] = [:]
    var current: String?
    for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
        if line.hasPrefix("-- ") {
            current = String(line.dropFirst(3))
            #expect(entries[current!] == nil, "two entries for \(current!)")
            entries[current!] = []
        } else if let current {
            entries[current]?.append(line)
        }
    }
    return entries
}

/// A root of the test's own with the catalog compiled by `journalctl --update-catalog`.
private func compiledCatalog(_ s: Sandbox) async throws -> String {
    let root = s.path("catalog-root")
    try FileManager.default.createDirectory(atPath: root + "/usr/lib/systemd/catalog", withIntermediateDirectories: true)
    try FileManager.default.copyItem(atPath: catalogFile, toPath: root + "/usr/lib/systemd/catalog/xidlelock.catalog")
    let update = try await s.run("journalctl", ["--root=\(root)", "--update-catalog"])
    #expect(update.exit == .exited(0) && !update.stderr.contains("rror"), "journalctl --update-catalog: \(update.exit) \(update.stderr)")
    return root
}

@Suite(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/journalctl") || FileManager.default.isExecutableFile(atPath: "/bin/journalctl"),
                "journalctl (the systemd package) is not installed"))
struct CatalogTests {
    @Test("every MESSAGE_ID the sources write has an entry in packaging/xidlelock.catalog, and none is left over; each says what happened, why it matters to an auditor, what to do")
    func everyMessageIDExplained() throws {
        let ids = try sourceMessageIDs()
        #expect(ids.count >= 20, "\(ids.count) MESSAGE_IDs found in the sources")
        let entries = try catalogEntries()
        for id in ids.sorted() {
            let kind = AuditRecord.messageIDs.first { $0.value == id }?.key ?? "?"
            guard let lines = entries[id] else {
                Issue.record("packaging/xidlelock.catalog has no entry for MESSAGE_ID \(id) (\(kind))")
                continue
            }
            let body = lines.joined(separator: "\n")
            #expect(lines.contains { $0.hasPrefix("Subject: ") } && lines.contains("Defined-By: xidlelock"), "\(id) (\(kind)) has no Subject or Defined-By")
            #expect(body.contains("For an auditor:"), "\(id) (\(kind)) does not say why it matters to an auditor")
            #expect(body.contains("What to do") || body.contains("Nothing to do"), "\(id) (\(kind)) does not say what to do")
        }
        #expect(Set(entries.keys).subtracting(ids).isEmpty, "catalog entries for no MESSAGE_ID of the sources: \(Set(entries.keys).subtracting(ids).sorted())")
    }

    @Test("journalctl --update-catalog compiles the catalog: --list-catalog names every entry with its subject")
    func journalctlCompilesIt() async throws {
        try await Sandbox.with(display: false) { s in
            let root = try await compiledCatalog(s)
            let list = try await s.run("journalctl", ["--root=\(root)", "--list-catalog"])
            #expect(list.exit == .exited(0), "\(list.stderr)")
            let listed = Set(list.stdout.split(separator: "\n").map { String($0.prefix(32)) })
            for (kind, id) in AuditRecord.messageIDs.sorted(by: { $0.key < $1.key }) {
                #expect(listed.contains(id), "journalctl --list-catalog does not list \(id) (\(kind)):\n\(list.stdout)")
            }
        }
    }

    /// Whether a journald takes entries here (`make test` starts one where it can).
    static let journaldRuns: Bool = {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/systemd-cat")
        process.arguments = ["true"]
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }()

    @Test("journalctl -x shows the explanation beside a guard entry written to the real journal (the catalog compiled under a root of the test's own, mounted over the machine's in a mount namespace)",
          .enabled(if: getuid() == 0, "root writes the guard's entries and mounts the compiled catalog in a namespace of its own"),
          .enabled(if: journaldRuns, "no journald runs here (make test starts one: .ci/start-journald)"))
    func journalctlExplains() async throws {
        try await Sandbox.with(display: false) { s in
            let root = try await compiledCatalog(s)
            let tag = "xidlelock-catalog-test-\(getpid())"
            let id = try #require(AuditRecord.messageIDs["guard-agent-lost"])
            try s.write("MESSAGE=session c9 (alice) is NOT guarded: the agent ended\nMESSAGE_ID=\(id)\nPRIORITY=3\nSYSLOG_IDENTIFIER=\(tag)\nXIDLELOCK_SESSION=c9\nXIDLELOCK_USER=alice\n",
                        to: "entry")
            let logged = try await s.run("logger", ["--journald=\(s.path("entry"))"])
            #expect(logged.exit == .exited(0), "\(logged.stderr)")
            try await waitUntil("the entry in the journal") {
                try await s.run("journalctl", ["--no-pager", "-t", tag, "-o", "cat"]).stdout.contains("NOT guarded")
            }
            // journalctl -x reads /var/lib/systemd/catalog/database whatever --root says:
            // the compiled one is mounted there in a mount namespace of its own, so the
            // machine's catalog is never touched.
            let shown = try await s.run("unshare", ["-m", "--propagation", "private", "sh", "-c",
                                                    "mount --bind '\(root)/var/lib/systemd' /var/lib/systemd && exec journalctl --no-pager -x -t '\(tag)'"])
            #expect(shown.stdout.contains("Subject: The guard: the session is NOT guarded")
                    && shown.stdout.contains("For an auditor:") && shown.stdout.contains("░░ session c9 (alice) is NOT guarded: the agent ended"),
                    "journalctl -x does not explain the entry:\n\(shown.stdout)\(shown.stderr)")
        }
    }
}
