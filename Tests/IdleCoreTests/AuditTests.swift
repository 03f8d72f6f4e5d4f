import IdleCore
import Testing

@Suite("The audit trail's entries")
struct AuditRecordTests {
    static let inhibitor = Inhibitor(id: 7, who: "pid 42 (mpv)", why: "film\nnight", until: nil, source: .socket)

    @Test("each kind the trail keeps is an entry with its event, priority and fields; the others are not", arguments: [
        (Announcement.locked(idle: .minutes(10), requested: false), "lock", 5, ["XIDLELOCK_IDLE_MS=600000", "XIDLELOCK_REQUESTED=0"]),
        (.unlocked(lockedFor: .seconds(90)), "unlock", 5, ["XIDLELOCK_LOCKED_MS=90000"]),
        (.lockerFailed(kind: "exited", reason: "exited with status 1", retryIn: .seconds(2)), "locker-failure", 3,
         ["XIDLELOCK_FAILURE=exited", "XIDLELOCK_REASON=exited with status 1", "XIDLELOCK_RETRY_MS=2000"]),
        (.lockerNotCovering(runningFor: .seconds(3)), "locker-failure", 3, ["XIDLELOCK_FAILURE=not-covering", "XIDLELOCK_RUNNING_MS=3000"]),
        (.inhibited(inhibitor), "inhibit", 5,
         ["XIDLELOCK_INHIBITOR_ID=7", "XIDLELOCK_SOURCE=socket", "XIDLELOCK_WHO=pid 42 (mpv)", "XIDLELOCK_WHY=film\nnight"]),
        (.uninhibited(inhibitor), "uninhibit", 5,
         ["XIDLELOCK_INHIBITOR_ID=7", "XIDLELOCK_SOURCE=socket", "XIDLELOCK_WHO=pid 42 (mpv)", "XIDLELOCK_WHY=film\nnight"]),
        (.disabled(remaining: .hours(1), by: "pid 9 (xidlelock)"), "disable", 5, ["XIDLELOCK_BY=pid 9 (xidlelock)", "XIDLELOCK_FOR_MS=3600000"]),
        (.enabled(by: "the end of its time"), "enable", 5, ["XIDLELOCK_BY=the end of its time"]),
        (.suspendGap(length: .hours(8)), "suspend-gap", 6, ["XIDLELOCK_GAP_MS=28800000"]),
    ])
    func entries(_ announcement: Announcement, _ event: String, _ priority: Int, _ fields: [String]) throws {
        let entry = try #require(AuditRecord.of(announcement))
        #expect(entry.event == event)
        #expect(entry.priority == priority)
        let journal = entry.journalFields
        #expect(journal.contains("XIDLELOCK_EVENT=\(event)"))
        #expect(journal.contains("SYSLOG_IDENTIFIER=xidlelock"))
        #expect(journal.contains("PRIORITY=\(priority)"))
        #expect(journal.contains("MESSAGE_ID=\(AuditRecord.messageIDs[event] ?? "?")"))
        #expect(journal.first?.hasPrefix("MESSAGE=") == true)
        #expect(Array(journal.dropFirst(5)) == fields)
    }

    @Test("what the trail does not keep", arguments: [
        Announcement.stageFired(name: "dim", idle: .minutes(4)), .locking(idle: .minutes(5), requested: false, attempt: 1),
        .activityResumed(idleBefore: .minutes(1)), .sleeping(covered: true), .resumed,
    ])
    func notKept(_ announcement: Announcement) {
        #expect(AuditRecord.of(announcement) == nil)
    }

    @Test("every kind has its own message id of 128 bits")
    func messageIDs() {
        let ids = Array(AuditRecord.messageIDs.values)
        #expect(Set(ids).count == ids.count)
        #expect(ids.allSatisfy { $0.count == 32 && $0.allSatisfy(\.isHexDigit) })
    }

    @Test("the plain line stays one line: values are quoted, newlines escaped")
    func plainLine() throws {
        let entry = try #require(AuditRecord.of(.inhibited(Self.inhibitor)))
        #expect(!entry.plainLine.contains("\n"))
        #expect(entry.plainLine.contains(#"XIDLELOCK_WHY="film\nnight""#))
        #expect(entry.plainLine.hasPrefix("audit inhibit: inhibited by pid 42 (mpv) (socket): film"))
    }

    @Test("the policy's errors and changes are entries, errors first")
    func policy() {
        let report = PolicyReport(path: "/etc/xidlelock/policy", changes: ["secure: nothing may hold the lock off or stop the agent"],
                                  errors: ["/etc/xidlelock/policy:3: unknown setting 'x'; enforcing secure"])
        let entries = AuditRecord.policy(report)
        #expect(entries.map(\.priority) == [3, 4])
        #expect(entries.allSatisfy { $0.fields.map(\.value) == ["/etc/xidlelock/policy"] })
    }
}
