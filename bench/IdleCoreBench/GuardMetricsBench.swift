// `IdleCoreBench --guard-metrics N`: what the guard's metrics file costs per turn of
// its loop with N sessions (issue #38). Before every wait the guard takes its metrics
// and compares them with those last written (every turn); only when they differ does
// it render the text and write the file (a change). One JSON line per repeat:
// microseconds per take-and-compare, and per render, and the text's size.

import IdleCore

func guardMetricsBench(sessions count: Int, repeats: Int) {
    var machine = GuardMachine(settings: GuardSettings())
    let start = MonotonicInstant.seconds(100)
    var statuses: [String: JSONValue] = [:]
    // An agent's status as it registers: its settings in force (about 60) and its policy's.
    let settings = JSONValue.array((0..<60).map { k in
        .object([("name", .string("setting-\(k)")), ("value", .string("value \(k)")), ("from", .string("default"))])
    })
    let status = JSONValue.object([("state", .string("idle")), ("settings", settings),
                                   ("policy", .object([("file", .string("/etc/xidlelock/policy")),
                                                       ("settings", .array(Array(settings.arrayPrefix(8)))), ("errors", .array([]))]))])
    for k in 0..<count {
        let id = "c\(k)"
        _ = machine.handle(.sessionSeen(GuardedSession(id: id, uid: UInt32(1000 + k), userName: "user\(k)", display: ":\(k)",
                                                       active: true, seat: k == 0 ? "seat0" : "")), at: start)
        _ = machine.handle(.agentVerified(session: id, agent: VerifiedAgent(pid: Int32(2000 + k), executable: "/usr/bin/xidlelock")),
                           at: start)
        statuses[id] = status
    }
    func take() -> GuardMetrics {
        GuardMetrics(machine, policyFile: "/etc/xidlelock/policy", policySHA256: String(repeating: "a", count: 64), policyErrors: 0,
                     statuses: statuses, logindReachable: true, startTime: 1_700_000_000)
    }
    let clock = ContinuousClock()
    let turns = max(10, 200_000 / max(1, count))
    for r in 0..<repeats {
        let last = take()
        var same = 0
        var began = clock.now
        for _ in 0..<turns { if take() == last { same += 1 } }
        let compare = seconds(clock.now - began) / Double(turns) * 1e6
        var bytes = 0
        began = clock.now
        for _ in 0..<turns { bytes = take().text.utf8.count }
        let render = seconds(clock.now - began) / Double(turns) * 1e6
        print("{\"guard_metrics\": true, \"repeat\": \(r), \"sessions\": \(count), \"turns\": \(turns), \"unchanged\": \(same), "
            + "\"take_and_compare_us\": \(compare), \"take_and_render_us\": \(render), \"bytes\": \(bytes)}")
    }
}

private extension JSONValue {
    func arrayPrefix(_ n: Int) -> ArraySlice<JSONValue> {
        if case .array(let items) = self { return items.prefix(n) }
        return []
    }
}
