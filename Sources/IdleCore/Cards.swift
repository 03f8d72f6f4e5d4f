// Lock on smart card removal (`--lock-on-card-removal`). The edge reports only what
// pcscd sees: each reader, the card in it (its ATR) and pcscd's event counter of the
// reader. Which cards count, which change is a removal and when two removals are one
// is decided here, with the time passed in.

/// A card's Answer To Reset: the bytes that tell what kind of card it is.
public struct CardATR: Hashable, Sendable, CustomStringConvertible {
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) { self.bytes = bytes }

    /// Hex digits in pairs; spaces and colons between them are allowed (`3B:95:13`).
    public init(hex text: String) throws(UsageError) {
        let digits = Array(text.filter { $0 != " " && $0 != ":" && $0 != "\t" })
        // ISO 7816-3: at most 33 bytes.
        guard !digits.isEmpty, digits.count % 2 == 0, digits.count <= 66, digits.allSatisfy(\.isHexDigit) else {
            throw UsageError("'\(text)' is not a card's ATR (hex bytes, at most 33, e.g. 3b951381018073ff01000b)")
        }
        bytes = stride(from: 0, to: digits.count, by: 2).map {
            UInt8(digits[$0].hexDigitValue! * 16 + digits[$0 + 1].hexDigitValue!)
        }
    }

    public var description: String {
        let hex = Array("0123456789abcdef")
        return String(bytes.flatMap { [hex[Int($0 >> 4)], hex[Int($0 & 15)]] })
    }

    /// A comma-separated list of ATRs; `name` says which setting it is in errors.
    static func list(_ text: String, for name: String) throws(UsageError) -> [CardATR] {
        var atrs: [CardATR] = []
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            do throws(UsageError) {
                atrs.append(try CardATR(hex: item.trimmingCharacters(in: " \t")))
            } catch {
                throw UsageError("\(name): \(error.message)")
            }
        }
        return atrs
    }
}

/// One reader as pcscd reports it.
public struct CardReader: Equatable, Sendable {
    public var name: String
    /// The card in it; nil when it holds none.
    public var atr: CardATR?
    /// pcscd's count of card events (insertions and removals) of this reader: a rise
    /// of two or more with a card there both times is a removal and a return.
    public var events: Int

    public init(name: String, atr: CardATR?, events: Int) {
        self.name = name
        self.atr = atr
        self.events = events
    }
}

/// What the edge tells of pcscd.
public enum CardReport: Equatable, Sendable {
    /// Every reader there now (a reader missing from the list was unplugged).
    case readers([CardReader])
    /// No pcscd, pcscd lost, no libpcsclite: why, in words.
    case unavailable(String)
}

/// `--lock-on-card-removal` and `--card-atr`.
public struct CardSettings: Equatable, Sendable {
    /// The cards that count; nil: every card.
    public var atrs: [CardATR]?
    /// The admin's policy asks for it: a card removal that cannot be seen is an error.
    public var byPolicy = false
    /// A card that goes again this soon after its last removal, while the screen is
    /// still locked for it, is the same removal: one lock, one audit entry.
    public var mergeWindow = Millis.seconds(1)

    public init(atrs: [CardATR]? = nil, byPolicy: Bool = false) {
        self.atrs = atrs
        self.byPolicy = byPolicy
    }

    func counts(_ atr: CardATR) -> Bool { atrs?.contains(atr) ?? true }
}

/// The machine's record of the readers, for removals and status.
struct CardBook: Sendable {
    struct Slot: Sendable {
        var reader: CardReader
        /// Its card counts: present at the start or inserted since, and listed (if a list is given).
        var counts: Bool
    }

    var slots: [Slot] = []
    /// Why pcscd cannot be watched now; nil while it can (or before the first report).
    var error: String?
    /// pcscd was away since the last list: its event counters began again.
    var afterOutage = false
    var removalLocks = 0
    /// When each reader's card last went (boottime), for the merge window.
    var lastRemoval: [String: BoottimeInstant] = [:]
}

extension IdleMachine {
    /// A report of pcscd's readers: a card that counted and is no longer there
    /// (taken out, swapped, its reader unplugged, gone and back between two reports,
    /// or gone while pcscd was away) locks now.
    mutating func cardsReported(_ report: CardReport, _ now: Instant, _ out: inout [Action]) {
        guard let settings = config.cardRemoval else { return }
        switch report {
        case .unavailable(let reason):
            guard cards.error != reason else { return }
            cards.error = reason
            cards.afterOutage = true
            out.append(.log(settings.byPolicy ? .error : .warning,
                            "smart cards: \(reason): a card taken out is not seen until pcscd is back"
                                + (settings.byPolicy ? " (the policy's lock-on-card-removal asks for it: locking)" : "")))
            out.append(.announce(.cardWatch(error: reason)))
            // The admin asked that removing the card lock: without the watch no removal
            // can be seen, so the screen locks (once per outage; the watch keeps trying).
            // The user's own setting only says so: pcscd is restarted by updates.
            if settings.byPolicy { lockRequest(from: "the policy's lock-on-card-removal, as the card watch cannot run (\(reason))", now, &out) }
        case .readers(let readers):
            if cards.error != nil {
                cards.error = nil
                out.append(.log(.info, "smart cards: pcscd answers again; watching \(readers.count) reader\(readers.count == 1 ? "" : "s")"))
                out.append(.announce(.cardWatch(error: nil)))
            }
            var removals: [CardReader] = []
            for old in cards.slots {
                guard let atr = old.reader.atr else { continue }
                let new = readers.first { $0.name == old.reader.name }
                let blip = !cards.afterOutage && (new?.events ?? 0) >= old.reader.events + 2
                guard new?.atr != atr || blip else { continue }
                if old.counts {
                    removals.append(old.reader)
                } else {
                    out.append(.announce(.cardRemoved(reader: old.reader.name, atr: atr.description, locks: false)))
                }
            }
            let before = cards.slots
            cards.slots = readers.map { CardBook.Slot(reader: $0, counts: $0.atr.map(settings.counts) ?? false) }
            cards.afterOutage = false
            for slot in cards.slots {
                guard let atr = slot.reader.atr else { continue }
                let was = before.first { $0.reader.name == slot.reader.name }?.reader
                if was?.atr != atr || removals.contains(where: { $0.name == slot.reader.name }) {
                    out.append(.announce(.cardInserted(reader: slot.reader.name, atr: atr.description, counts: slot.counts)))
                }
            }
            for removed in removals { cardRemoved(removed, settings, now, &out) }
        }
    }

    mutating func cardRemoved(_ reader: CardReader, _ settings: CardSettings, _ now: Instant, _ out: inout [Action]) {
        let name = reader.name
        defer { cards.lastRemoval[name] = now.boottime }
        // Merged only while the lock of the first still holds (or is being retried):
        // a removal is never a reason to skip a lock, only to skip a second one.
        if lockerActive, let last = cards.lastRemoval[name], now.boottime - last <= settings.mergeWindow {
            out.append(.log(.info, "smart cards: the card of \(name) went again \(now.boottime - last) after it last went: the same removal (the screen is locked for it)"))
            return
        }
        cards.removalLocks += 1
        out.append(.announce(.cardRemoved(reader: name, atr: reader.atr?.description ?? "", locks: true)))
        lockRequest(from: "the removal of the card from \(name) (--lock-on-card-removal)", now, &out)
    }

    /// The `card` object of status.
    var cardFields: JSONValue {
        .object([
            ("lock_on_removal", .bool(config.cardRemoval != nil)),
            ("atrs", config.cardRemoval?.atrs.map { .array($0.map { .string($0.description) }) } ?? .null),
            ("error", cards.error.map(JSONValue.string) ?? .null),
            ("readers", .array(cards.slots.map { slot in
                .object([
                    ("name", .string(slot.reader.name)),
                    ("card", .string(slot.reader.atr == nil ? "absent" : "present")),
                    ("atr", slot.reader.atr.map { .string($0.description) } ?? .null),
                    ("counts", .bool(slot.counts)),
                ])
            })),
            ("removal_locks", .number(Double(cards.removalLocks))),
        ])
    }
}
