import IdleCore

/// What the agent tells the desktop (logind): carried out by the bus sources.
protocol DesktopLink: AnyObject {
    func carryOut(_ action: Action)
}
