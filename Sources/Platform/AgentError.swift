/// Errors that end the agent or a command, with the exit status of the convention.
public enum AgentError: Error, Equatable {
    /// Something the agent needs is not there: the display, an X extension, a locker. Exit 69.
    case unavailable(String)
    /// Another agent already runs for this user and display. Exit 73 (EX_CANTCREAT:
    /// its socket cannot be created), which a service manager should not restart.
    case alreadyRunning(String)
    /// Anything else that stops the agent. Exit 1.
    case failed(String)
    /// The command needs rights it does not have (`xidlelock guard` as a user). Exit 77.
    case permission(String)

    public var message: String {
        switch self {
        case .unavailable(let m), .alreadyRunning(let m), .failed(let m), .permission(let m): m
        }
    }

    public var exitStatus: Int32 {
        switch self {
        case .unavailable: 69
        case .alreadyRunning: 73
        case .failed: 1
        case .permission: 77
        }
    }
}
