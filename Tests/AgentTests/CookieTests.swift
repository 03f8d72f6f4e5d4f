@testable import Agent
@testable import Platform
import IdleCore
import Testing

/// Issue #29, row 5: a client that holds three cookies of its own must not be able to
/// tell the next client's (SplitMix64's state gives itself away from three outputs).
@Suite struct CookieTests {
    @Test("the agent's inhibitor cookies are drawn from the kernel's random source, each one, not from a seeded generator")
    func kernelCookies() throws {
        guard case .agent(let options) = try Invocation.parse(["--lock-after", "10s"]) else { throw UsageError("not the agent") }
        var machine = Agent.machine(config: options.config(locker: "i3lock -n"), now: Instant(monotonic: .zero, boottime: .zero))
        #expect(machine.cookiesFromTheKernel)
        let now = Instant(monotonic: .seconds(1), boottime: .seconds(1))
        let ids = (0..<4).compactMap { k in
            machine.handle(.holdAsked(HoldOwner(.dbus, ":1.\(k)"), HoldClaim(key: "", who: "w", why: "")), at: now).compactMap { action -> Int? in
                if case .answer(.granted(let id)) = action { id } else { nil }
            }.first
        }
        #expect(ids.count == 4 && Set(ids).count == 4 && ids.allSatisfy { $0 > 0 && $0 <= Int(Int32.max) })
    }
}
