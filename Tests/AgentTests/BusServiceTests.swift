@testable import Agent
@testable import Platform
import CBus
import IdleCore
import Testing

/// Issue #37: the C layer's limits on a served table (cservice.h) are checked where a
/// service is declared, in one function every declaration goes through.
@Suite struct BusServiceTests {
    /// Enough of an agent for a service to be declared; nothing is ever asked of it here.
    final class NoAgent: DesktopAgent {
        func perform(_ event: Event) -> Answer? { nil }
        func request(_ event: Event) -> Answer? { nil }
        var screenCovered: Bool { false }
        var lockedFor: Millis? { nil }
        var idleTime: Millis { .zero }
        var hints: (locked: Bool, idle: Bool) { (false, false) }
        func holds(from source: InhibitorSource) -> Bool { false }
        func addSource(_ source: EventSource) {}
        var holdRouting: HoldRouting? { nil }
    }

    static func method(_ name: String, takes: String = "", returns: String = "") -> BusService.Method {
        .init(name, takes: takes, returns: returns) { _ in .done }
    }

    @Test("every service the agent can serve is declared within the C layer's limits")
    func everyServiceWithinLimits() {
        let agent = NoAgent()
        let tables = DesktopServices.sessionServices.flatMap { type in
            let service = type.init(agent: agent)
            return [service.bus] + service.also
        }
        #expect(tables.count >= DesktopServices.sessionServices.count)
        for table in tables {
            #expect(table.declaration.limitsBroken == [], "\(table.declaration.interface)")
        }
    }

    @Test("the limits are the C layer's own")
    func limitsFromC() {
        #expect(BusService.Limits.names == 2 && BusService.Limits.paths == 4 && BusService.Limits.methods == 16)
        #expect(BusService.Limits.signals == 4 && BusService.Limits.arguments == 8 && BusService.Limits.values == 1)
        #expect(BusService.Limits.basicTypes == Set("souib"))
    }

    @Test("a declaration past a limit is refused, with the limit named")
    func oversizedRefused() {
        let methods = (0...BusService.Limits.methods).map { Self.method("M\($0)") }
        let tooMany = BusService.Declaration(
            names: ["org.example.A", "org.example.B", "org.example.C"], interface: "org.example.Big",
            paths: (0...BusService.Limits.paths).map { "/p\($0)" }, methods: methods,
            signals: (0...BusService.Limits.signals).map { ("S\($0)", "b") })
        #expect(tooMany.limitsBroken == [
            "org.example.Big: 3 names, at most 2 (XIL_SERVICE_NAMES_MAX in cservice.h)",
            "org.example.Big: 5 paths, at most 4 (XIL_SERVICE_PATHS_MAX in cservice.h)",
            "org.example.Big: 17 methods, at most 16 (XIL_SERVICE_METHODS_MAX in cservice.h)",
            "org.example.Big: 5 signals, at most 4 (XIL_SERVICE_SIGNALS_MAX in cservice.h)",
        ])

        let badSignatures = BusService.Declaration(
            names: ["org.example.A"], interface: "org.example.Odd", paths: ["/o"],
            methods: [Self.method("Many", takes: "sssssssss"), Self.method("Two", returns: "uu"),
                      Self.method("Dict", takes: "a{sv}")],
            signals: [("Changed", "d")])
        #expect(badSignatures.limitsBroken == [
            "org.example.Odd: method Many takes \"sssssssss\" has 9 values, at most 8 (XIL_SERVICE_ARGS_MAX in cservice.h)",
            "org.example.Odd: method Two returns \"uu\" has 2 values, at most 1 (XIL_SERVICE_VALUES_MAX in cservice.h)",
            "org.example.Odd: method Dict takes \"a{sv}\" is not of basic types only (souib, XIL_SERVICE_BASIC_TYPES in cservice.h)",
            "org.example.Odd: signal Changed carries \"d\" is not of basic types only (souib, XIL_SERVICE_BASIC_TYPES in cservice.h)",
        ])
    }

    @Test("at its limits a declaration passes, and the C layer takes it: the two agree")
    func atTheLimitsBoth() {
        let full = BusService.Declaration(
            names: (0..<BusService.Limits.names).map { "org.example.N\($0)" }, interface: "org.example.Full",
            paths: (0..<BusService.Limits.paths).map { "/p\($0)" },
            methods: (0..<BusService.Limits.methods).map { Self.method("M\($0)", takes: "souibsou", returns: "o") },
            signals: (0..<BusService.Limits.signals).map { ("S\($0)", "u") })
        #expect(full.limitsBroken == [])
        // One past each limit, the C layer refuses too.
        var callbacks = xil_service_callbacks()
        guard let service = xil_service_new("org.example.Full", &callbacks) else { Issue.record("no memory"); return }
        defer { _ = xil_service_free(service) }
        for (i, name) in full.names.enumerated() { #expect(xil_service_add_name(service, name) == Int32(i)) }
        #expect(xil_service_add_name(service, "org.example.One.More") < 0)
        for path in full.paths { #expect(xil_service_add_path(service, path) >= 0) }
        #expect(xil_service_add_path(service, "/one/more") < 0)
        for method in full.methods { #expect(xil_service_add_method(service, method.name, method.takes, method.returns, 0) >= 0) }
        #expect(xil_service_add_method(service, "OneMore", "", "", 0) < 0)
        for (signal, signature) in full.signals { #expect(xil_service_add_signal(service, signal, signature) >= 0) }
        #expect(xil_service_add_signal(service, "OneMore", "") < 0)
        // And signatures past theirs.
        guard let other = xil_service_new("org.example.Odd", &callbacks) else { Issue.record("no memory"); return }
        defer { _ = xil_service_free(other) }
        #expect(xil_service_add_method(other, "Many", "sssssssss", "", 0) < 0)
        #expect(xil_service_add_method(other, "Two", "", "uu", 0) < 0)
        #expect(xil_service_add_method(other, "Dict", "a{sv}", "", 0) < 0)
        #expect(xil_service_add_signal(other, "Changed", "d") < 0)
    }
}
