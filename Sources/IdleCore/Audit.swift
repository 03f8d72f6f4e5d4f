// The audit trail: what an admin of a managed machine reads back to learn what
// happened (`journalctl --user -t xidlelock XIDLELOCK_EVENT=lock`): each lock and
// unlock, locker failure, inhibitor start and end, disable and enable, policy
// change, suspend gap, change of power source, smart card event, config line
// skipped and runtime file not made, as one structured journal entry (and the
// guard's own, guard-*).

/// One entry of the audit trail.
public struct AuditRecord: Equatable, Sendable {
    /// `XIDLELOCK_EVENT`: lock, unlock, locker-failure, inhibit, uninhibit, disable,
    /// enable, suspend-gap, power-source, policy, config, runtime-files, card,
    /// card-removal, card-watch; the guard's guard-agent, guard-agent-lost,
    /// guard-action, guard-locker-failure, guard-refused (the keys of `messageIDs`).
    public var event: String
    /// syslog's: 3 error, 4 warning, 5 notice, 6 info.
    public var priority: Int
    public var message: String
    /// The event's own fields, `XIDLELOCK_*`, in a stable order.
    public var fields: [(name: String, value: String)]

    public static func == (a: AuditRecord, b: AuditRecord) -> Bool {
        a.event == b.event && a.priority == b.priority && a.message == b.message
            && a.fields.map(\.name) == b.fields.map(\.name) && a.fields.map(\.value) == b.fields.map(\.value)
    }

    /// `MESSAGE_ID` per kind (journalctl MESSAGE_ID=…, and catalogues): fixed for ever.
    public static let messageIDs: [String: String] = [
        "lock": "33f4aa3521f84341af05baeccf12149c",
        "unlock": "69f3d653c7dc4fbaa6e8886fa378070c",
        "locker-failure": "df53ddae9c64440b8e836ffbb7353992",
        "inhibit": "276823f55bba4a3b887a1326c130c5e0",
        "uninhibit": "0c6fb634fec14cf699e866da3ceb08d4",
        "disable": "a25144cca9534e319e6333c14169bda8",
        "enable": "207bcf5a58b240b89af1c155118d6e75",
        "suspend-gap": "dd92ee1ba16a4528b0a5d9d5f50c2c51",
        "policy": "e11c3bce5eb94f94a494ca1395072aab",
        "config": "27615f6eb56943b58c3fb23372ab3cca",
        "runtime-files": "44b4938a83194549ad3441bbe334d254",
        "power-source": "e49d99ec587041a0b6a407756cf53fa2",
        "card": "9ea662da25fe4ac7a1b0b81bd49b5446",
        "card-removal": "035b6ef789674a018b22cb34fee6281e",
        "card-watch": "ac3f14f442664b4694b312b58e123f64",
        "guard-agent": "df2b09d59a27435f8eca14c3608fb855",
        "guard-agent-lost": "0177b8b6a54c4e53adbf56ec29cdcae4",
        "guard-action": "e59b5e05a8ac4386befb85c4645d458c",
        "guard-locker-failure": "b2c8eed518dd42f59cca965ae6fe7898",
        "guard-refused": "af2fccadda5646dcab69d5d9a1810aa8",
    ]

    /// The entry an announcement makes, if it is one the trail keeps.
    public static func of(_ announcement: Announcement) -> AuditRecord? {
        func ms(_ m: Millis) -> String { String(m.value) }
        switch announcement {
        case .locked(let idle, let requested):
            return AuditRecord(event: "lock", priority: 5,
                               message: "screen locked: the locker holds the keyboard (" + (requested ? "on request" : "after \(idle) idle") + ")",
                               fields: [("XIDLELOCK_IDLE_MS", ms(idle)), ("XIDLELOCK_REQUESTED", requested ? "1" : "0")])
        case .unlocked(let lockedFor):
            return AuditRecord(event: "unlock", priority: 5, message: "screen unlocked after \(lockedFor) locked",
                               fields: [("XIDLELOCK_LOCKED_MS", ms(lockedFor))])
        case .lockerFailed(let kind, let reason, let retryIn):
            return AuditRecord(event: "locker-failure", priority: 3,
                               message: "the locker \(reason): the screen may NOT be locked; starting it again in \(retryIn)",
                               fields: [("XIDLELOCK_FAILURE", kind), ("XIDLELOCK_REASON", reason), ("XIDLELOCK_RETRY_MS", ms(retryIn))])
        case .lockerNotCovering(let runningFor, false):
            return AuditRecord(event: "locker-failure", priority: 3,
                               message: "the locker has run for \(runningFor) without grabbing the keyboard: the screen may NOT be covered",
                               fields: [("XIDLELOCK_FAILURE", "not-covering"), ("XIDLELOCK_RUNNING_MS", ms(runningFor))])
        case .lockerNotCovering(let runningFor, true):
            return AuditRecord(event: "locker-failure", priority: 3,
                               message: "the locker let go of the keyboard (running for \(runningFor)): the screen may NOT be covered",
                               fields: [("XIDLELOCK_FAILURE", "let-go"), ("XIDLELOCK_RUNNING_MS", ms(runningFor))])
        case .grabHeldByOther(let device, let beforeStart):
            return AuditRecord(event: "locker-failure", priority: 3,
                               message: "another client holds the \(device.rawValue)" + (beforeStart ? " (since before the locker started)" : " (no window of the locker shows)")
                                   + ": the locker cannot cover the screen, which may NOT be locked",
                               fields: [("XIDLELOCK_FAILURE", "\(device.rawValue)-held-by-other"), ("XIDLELOCK_HELD_BEFORE_START", beforeStart ? "1" : "0")])
        case .inhibited(let i):
            return AuditRecord(event: "inhibit", priority: 5,
                               message: "inhibited by \(i.who) (\(i.source.rawValue))" + (i.why.isEmpty ? "" : ": \(i.why)"),
                               fields: inhibitorFields(i))
        case .uninhibited(let i):
            return AuditRecord(event: "uninhibit", priority: 5, message: "inhibitor of \(i.who) (\(i.source.rawValue)) ended",
                               fields: inhibitorFields(i))
        case .disabled(let remaining, let by):
            var fields = [("XIDLELOCK_BY", by)]
            if let remaining { fields.append(("XIDLELOCK_FOR_MS", ms(remaining))) }
            return AuditRecord(event: "disable", priority: 5,
                               message: "disabled" + (remaining.map { " for \($0)" } ?? " until enabled") + (by.isEmpty ? "" : " by \(by)"),
                               fields: fields)
        case .enabled(let by):
            return AuditRecord(event: "enable", priority: 5, message: "enabled" + (by.isEmpty ? "" : " by \(by)"),
                               fields: [("XIDLELOCK_BY", by)])
        case .suspendGap(let length):
            return AuditRecord(event: "suspend-gap", priority: 6, message: "the machine slept \(length)",
                               fields: [("XIDLELOCK_GAP_MS", ms(length))])
        case .powerSource(let onBattery):
            // The lock time in force changes with it: an auditor sees which applied when.
            return AuditRecord(event: "power-source", priority: 6, message: "on \(onBattery ? "battery" : "AC power"): the times for it are in force",
                               fields: [("XIDLELOCK_ON_BATTERY", onBattery ? "1" : "0")])
        case .cardInserted(let reader, let atr, let counts):
            return AuditRecord(event: "card", priority: 6, message: "card \(atr) in \(reader)" + (counts ? "" : " (its removal does not lock)"),
                               fields: [("XIDLELOCK_READER", reader), ("XIDLELOCK_ATR", atr), ("XIDLELOCK_CARD", "present"), ("XIDLELOCK_COUNTS", counts ? "1" : "0")])
        case .cardRemoved(let reader, let atr, let locks):
            return AuditRecord(event: locks ? "card-removal" : "card", priority: locks ? 5 : 6,
                               message: "card \(atr) taken out of \(reader)" + (locks ? ": locking (lock-on-card-removal)" : " (its removal does not lock)"),
                               fields: [("XIDLELOCK_READER", reader), ("XIDLELOCK_ATR", atr), ("XIDLELOCK_CARD", "absent"), ("XIDLELOCK_COUNTS", locks ? "1" : "0")])
        case .cardWatch(let error):
            return AuditRecord(event: "card-watch", priority: error == nil ? 5 : 4,
                               message: error.map { "smart cards: \($0): a card taken out is not seen" } ?? "smart cards: pcscd answers again",
                               fields: [("XIDLELOCK_REASON", error ?? "")])
        case .stageFired, .locking, .activityResumed, .sleeping, .resumed, .screenOff:
            return nil
        }
    }

    static func inhibitorFields(_ i: Inhibitor) -> [(name: String, value: String)] {
        [("XIDLELOCK_INHIBITOR_ID", String(i.id)), ("XIDLELOCK_SOURCE", i.source.rawValue),
         ("XIDLELOCK_WHO", i.who), ("XIDLELOCK_WHY", i.why)]
    }

    /// The policy's changes and errors, at the agent's start.
    public static func policy(_ report: PolicyReport) -> [AuditRecord] {
        report.errors.map {
            AuditRecord(event: "policy", priority: 3, message: "policy: \($0)", fields: [("XIDLELOCK_POLICY_FILE", report.path)])
        } + report.changes.map {
            AuditRecord(event: "policy", priority: 4, message: "policy \(report.path): \($0)", fields: [("XIDLELOCK_POLICY_FILE", report.path)])
        }
    }

    /// A config file or line skipped, at the agent's start.
    public static func config(_ problem: ConfigProblem) -> AuditRecord {
        var fields = [(name: "XIDLELOCK_CONFIG_FILE", value: problem.path)]
        if let line = problem.line { fields.append(("XIDLELOCK_CONFIG_LINE", String(line))) }
        return AuditRecord(event: "config", priority: 3, message: "config: \(problem)", fields: fields)
    }

    /// A file of the agent's beside its control socket (the socket, its lock, the
    /// locker's record) that cannot be made: the agent runs and locks without it.
    public static func runtimeFiles(path: String, problem: String, consequence: String) -> AuditRecord {
        AuditRecord(event: "runtime-files", priority: 3, message: "\(problem): \(consequence)",
                    fields: [("XIDLELOCK_PATH", path)])
    }

    /// The entry as the journal gets it: `FIELD=value` each.
    public var journalFields: [String] {
        ["MESSAGE=\(message)", "MESSAGE_ID=\(AuditRecord.messageIDs[event] ?? "")", "PRIORITY=\(priority)",
         "SYSLOG_IDENTIFIER=xidlelock", "XIDLELOCK_EVENT=\(event)"] + fields.map { "\($0.name)=\($0.value)" }
    }

    /// The entry as one line where there is no journal (stderr): the message, then the
    /// fields, each value quoted as a JSON string so that the line stays one line.
    public var plainLine: String {
        "audit \(event): \(ClientText.sanitized(message, maxBytes: 1024)) [" + fields.map { "\($0.name)=\(JSONValue.string($0.value).text)" }.joined(separator: " ") + "]"
    }
}
