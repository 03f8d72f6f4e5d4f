/// A switch the admin's policy can turn on (`secure`, `lock-at-start`, …), declared
/// once: its name, where it lives in the policy and in the agent's options, and its
/// words. The policy's grammar (`Policy.specs`), its enforcement over the user's
/// options (`AgentOptions.enforce`), what the agent reports of it
/// (`AgentOptions.settingsReport`) and doctor's check (`PolicyCheck`) come from these
/// rows; a new switch is a new row (and its fields in `Policy` and `AgentOptions`).
struct PolicySwitch: Sendable {
    /// As written in the policy file, and the agent's flag without its "--".
    let name: String
    let policy: WritableKeyPath<Policy, Bool> & Sendable
    let option: WritableKeyPath<AgentOptions, Bool> & Sendable
    /// The policy's help line.
    let help: String
    /// What enforcing it changed, in words (after "NAME: ").
    let change: String
    /// What it means when in force, for doctor.
    let meaning: String
    /// What `secure` set by the policy already gives of it, for doctor (nil: nothing).
    var coveredBySecure: String? = nil
    /// The agent reports it to doctor even when off (`secure`: "no" tells an agent
    /// without it from an older one that does not say); the others only when on.
    var reportedWhenOff = false
    /// The policy claims it even when the user asked for it too (its origin is the
    /// policy's, so a failure is the policy's error).
    var ownedWhenAsked = false
    /// Where it is enforced among the valued settings, which keeps the order of the
    /// policy's change lines as it always was.
    var enforced = Place.afterMaxInhibit

    enum Place: Sendable { case beforeLocker, afterMaxInhibit, afterCardATRs }

    var spec: OptionSpec<Policy> {
        let policy = policy
        return OptionSpec("--" + name, nil, help) { p, _ in p[keyPath: policy] = true }
    }

    /// In the order the agent reports them (lock-on-card-removal last: card-atr follows it).
    static let all: [PolicySwitch] = [
        PolicySwitch(name: "secure", policy: \.secure, option: \.secure,
                     help: "As --secure: nothing may hold the lock off or stop the agent.",
                     change: "nothing may hold the lock off or stop the agent",
                     meaning: "nothing may hold the lock off or stop the agent (no disable, inhibit or quit)",
                     reportedWhenOff: true, enforced: .beforeLocker),
        PolicySwitch(name: "ignore-screensaver-reset", policy: \.ignoreScreensaverReset, option: \.ignoreScreensaverReset,
                     help: "As --ignore-screensaver-reset: only real input counts as activity.",
                     change: "only real input counts as activity",
                     meaning: "only real input counts as activity",
                     coveredBySecure: "counts only real input", enforced: .afterCardATRs),
        PolicySwitch(name: "ignore-xtest", policy: \.ignoreXtest, option: \.ignoreXtest,
                     help: "As --ignore-xtest: input faked through XTEST (xdotool, jigglers, remote sessions) is not activity.",
                     change: "input faked through XTEST (xdotool, jigglers, remote sessions) is not activity",
                     meaning: "XTEST input (xdotool, jigglers, remote sessions) is not activity",
                     coveredBySecure: "counts no XTEST input", enforced: .afterCardATRs),
        PolicySwitch(name: "lock-on-switch", policy: \.lockOnSwitch, option: \.lockOnSwitch,
                     help: "As --lock-on-switch: lock the moment another session comes to the front.",
                     change: "the screen locks the moment another session comes to the front",
                     meaning: "the screen locks when another session comes to the front"),
        PolicySwitch(name: "lock-at-start", policy: \.lockAtStart, option: \.lockAtStart,
                     help: "As --lock-at-start: lock the moment the agent starts.",
                     change: "the screen locks the moment the agent starts",
                     meaning: "the screen locks the moment the agent starts"),
        PolicySwitch(name: "lock-on-card-removal", policy: \.lockOnCardRemoval, option: \.lockOnCardRemoval,
                     help: "As --lock-on-card-removal: lock the moment a smart card is taken out; the user's --card-atr does not narrow it.",
                     change: "the screen locks the moment a smart card is taken out",
                     meaning: "removing the smart card locks the screen",
                     ownedWhenAsked: true),
    ]

    static var lockOnSwitch: PolicySwitch { named("lock-on-switch")! }
    static var lockOnCardRemoval: PolicySwitch { named("lock-on-card-removal")! }

    static func named(_ name: String) -> PolicySwitch? { all.first { $0.name == name } }
}
