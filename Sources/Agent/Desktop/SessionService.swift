import IdleCore
import Platform

/// A service of holds the agent serves on the session bus, declared in a file of
/// its own on `BusService`; `DesktopServices` serves each one the user follows
/// whenever the session bus is there.
protocol SessionService: AnyObject {
    /// Its source of holds (its row says what it is and which flag switches it).
    static var source: InhibitorSource { get }
    /// Its field in status: whether the agent owns the name.
    static var statusKey: String { get }
    init(agent: DesktopAgent)
    var bus: BusService { get }
    /// More objects it serves, under no name of their own.
    var also: [BusService] { get }
    /// Something the machine announced that the service tells its clients.
    func announce(_ announcement: Announcement)
}

extension SessionService {
    var also: [BusService] { [] }
    func announce(_ announcement: Announcement) {}
}
