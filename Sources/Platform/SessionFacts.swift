import CBus
import IdleCore

/// One logind session's facts, from C.
package struct SessionFacts {
    package var guarded: GuardedSession
    package var type: String
    package var sessionClass: String
    /// logind's `State`: online, active, closing.
    package var state: String
    package var leader: UInt32
    package var seat: String
    /// logind's object path of the session.
    package var path: String
    /// The process asked about is in no session (a systemd user unit's): this is its
    /// user's display session, as logind elects it.
    package var usersDisplay: Bool

    package init(_ info: xil_session_info) {
        var info = info
        func text<T>(_ field: inout T) -> String {
            withUnsafeBytes(of: &field) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        }
        guarded = GuardedSession(id: text(&info.id), uid: info.uid, userName: text(&info.user), display: text(&info.display),
                                 active: info.active != 0, lockedHint: info.locked_hint != 0, remote: info.remote != 0,
                                 seat: text(&info.seat))
        type = text(&info.type)
        sessionClass = text(&info.session_class)
        state = text(&info.state)
        leader = info.leader
        seat = text(&info.seat)
        path = text(&info.path)
        usersDisplay = info.users_display != 0
    }
}
