import IdleCore
import Platform

/// What the desktop services need from the agent.
protocol DesktopAgent: AnyObject {
    @discardableResult func perform(_ event: Event) -> Answer?
    /// A report or a client's request, with the idle time brought up to date first.
    @discardableResult func request(_ event: Event) -> Answer?
    /// The locker holds the screen (org.freedesktop.ScreenSaver's "active").
    var screenCovered: Bool { get }
    var lockedFor: Millis? { get }
    var idleTime: Millis { get }
    /// What logind was last told (LockedHint, IdleHint): told again to a new connection.
    var hints: (locked: Bool, idle: Bool) { get }
    /// Whether a hold of this source is in place now.
    func holds(from source: InhibitorSource) -> Bool
    func addSource(_ source: EventSource)
    /// Where the holds of the session bus's services go, when the callers' sessions can
    /// be told apart (logind named this agent's session).
    var holdRouting: HoldRouting? { get }
}
