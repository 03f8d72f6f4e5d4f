import IdleCore
import Testing

@Test func lockStageFiresAtTheLockTime() {
    let config = AgentOptions().config(locker: "i3lock -n")
    var machine = IdleMachine(config: config, now: Instant(monotonic: .zero, boottime: .zero))
    _ = machine.handle(.start(serverIdle: .zero), at: Instant(monotonic: .zero, boottime: .zero))
    #expect(machine.nextDeadline == .minutes(10))
    let at = Instant(monotonic: .minutes(10), boottime: .minutes(10))
    let actions = machine.handle(.wake(serverIdle: .minutes(10)), at: at)
    #expect(actions.contains { if case .run(.locker, "i3lock -n", _) = $0 { true } else { false } })
}
