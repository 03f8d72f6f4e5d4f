import IdleCore

extension Event {
    /// A hold asked for as `xidlelock inhibit` or ScreenSaver.Inhibit asks: by one client of a source.
    static func hold(_ who: String = "w", why: String = "", for span: Millis? = nil,
                     source: InhibitorSource = .socket, client: String = "client 1") -> Event {
        .holdAsked(HoldOwner(source, client), HoldClaim(key: "", who: who, why: why, span: span))
    }

    /// The same client ends one of its holds.
    static func release(_ id: Int, source: InhibitorSource = .socket, client: String = "client 1") -> Event {
        .holdReleased(HoldOwner(source, client), id: id)
    }
}

extension [Action] {
    /// The machine's answer to the request these actions follow.
    var answer: Answer? { compactMap { if case .answer(let a) = $0 { a } else { nil } }.first }

    /// The id a granted hold got.
    var grantedID: Int? { if case .granted(let id)? = answer { id } else { nil } }
}
