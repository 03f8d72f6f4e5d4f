import CBus
import Glibc
import IdleCore
import Platform

/// A D-Bus object the agent serves on the session bus, declared as a table: its
/// name, interface, paths, signals, and each method with its handler. The C layer
/// (cservice.h) reads the arguments, learns the caller's pid where a method needs
/// it, and tells of callers that leave; each service is one Swift file that says
/// what its methods mean.
final class BusService {
    struct Method {
        let name: String
        /// Basic D-Bus types only (`Limits.basicTypes`).
        let takes: String
        let returns: String
        /// The call waits for the bus to tell the caller's pid (a hold names its holder).
        let needsCaller: Bool
        let handler: (BusCall) -> BusReply

        init(_ name: String, takes: String = "", returns: String = "", needsCaller: Bool = false,
             _ handler: @escaping (BusCall) -> BusReply) {
            self.name = name
            self.takes = takes
            self.returns = returns
            self.needsCaller = needsCaller
            self.handler = handler
        }
    }

    /// The C layer's limits on one table (cservice.h), read from there: a service is
    /// declared within them or not at all.
    enum Limits {
        static let names = Int(XIL_SERVICE_NAMES_MAX)
        static let paths = Int(XIL_SERVICE_PATHS_MAX)
        static let methods = Int(XIL_SERVICE_METHODS_MAX)
        static let signals = Int(XIL_SERVICE_SIGNALS_MAX)
        /// A method's arguments.
        static let arguments = Int(XIL_SERVICE_ARGS_MAX)
        /// A method's return values, and a signal's.
        static let values = Int(XIL_SERVICE_VALUES_MAX)
        static let basicTypes = Set(XIL_SERVICE_BASIC_TYPES)
    }

    /// What a service says it serves, before the C layer is asked to serve it.
    struct Declaration {
        let names: [String]
        let interface: String
        let paths: [String]
        let methods: [Method]
        /// Each as (name, signature).
        let signals: [(String, String)]

        /// Every limit of the C layer (`Limits`) it goes past, each in words that name
        /// the limit; empty when it can be served. Every service goes through this
        /// (`BusService.init`), and AgentTests through it for every service declared.
        var limitsBroken: [String] {
            var broken: [String] = []
            func atMost(_ count: Int, _ limit: Int, _ what: String, _ constant: String) {
                if count > limit { broken.append("\(interface): \(count) \(what), at most \(limit) (\(constant) in cservice.h)") }
            }
            func basic(_ signature: String, atMost limit: Int, _ what: String, _ constant: String) {
                if signature.count > limit {
                    broken.append("\(interface): \(what) \"\(signature)\" has \(signature.count) values, at most \(limit) (\(constant) in cservice.h)")
                }
                if !signature.allSatisfy(Limits.basicTypes.contains) {
                    broken.append("\(interface): \(what) \"\(signature)\" is not of basic types only (\(XIL_SERVICE_BASIC_TYPES), XIL_SERVICE_BASIC_TYPES in cservice.h)")
                }
            }
            atMost(names.count, Limits.names, "names", "XIL_SERVICE_NAMES_MAX")
            atMost(paths.count, Limits.paths, "paths", "XIL_SERVICE_PATHS_MAX")
            atMost(methods.count, Limits.methods, "methods", "XIL_SERVICE_METHODS_MAX")
            atMost(signals.count, Limits.signals, "signals", "XIL_SERVICE_SIGNALS_MAX")
            for method in methods {
                basic(method.takes, atMost: Limits.arguments, "method \(method.name) takes", "XIL_SERVICE_ARGS_MAX")
                basic(method.returns, atMost: Limits.values, "method \(method.name) returns", "XIL_SERVICE_VALUES_MAX")
            }
            for (signal, signature) in signals {
                basic(signature, atMost: Limits.values, "signal \(signal) carries", "XIL_SERVICE_VALUES_MAX")
            }
            return broken
        }
    }

    /// What it was declared with.
    let declaration: Declaration
    /// Its well-known names (the first is its own; another is one that older clients call).
    let names: [String]
    var name: String { names.first ?? interface }
    let interface: String
    private let methods: [Method]
    private let signals: [String]
    private var service: OpaquePointer?
    private var callbacks: UnsafeMutablePointer<xil_service_callbacks>
    /// Callers that left the bus.
    var onCallerGone: (String) -> Void = { _ in }
    /// The bus's answer to asking for a name: 1 ours, 0 another's (its pid), -errno.
    var onServed: (String, Int32, UInt32) -> Void = { _, _, _ in }
    /// The names the bus said are ours.
    private(set) var owned: Set<String> = []
    /// Its own name is ours.
    var ownsName: Bool { owned.contains(name) }

    /// `signals`: each as (name, signature) with one basic type or none.
    init(names: [String], interface: String, paths: [String], methods: [Method], signals: [(String, String)] = []) {
        declaration = Declaration(names: names, interface: interface, paths: paths, methods: methods, signals: signals)
        // The table is fixed: a limit it goes past is a mistake in it, which AgentTests
        // find for every service declared (BusServiceTests), before any bus is there.
        let broken = declaration.limitsBroken
        precondition(broken.isEmpty, broken.joined(separator: "; "))
        self.names = names
        self.interface = interface
        self.methods = methods
        self.signals = signals.map(\.0)
        callbacks = .allocate(capacity: 1)
        callbacks.initialize(to: xil_service_callbacks())
        callbacks.pointee.context = Unmanaged.passUnretained(self).toOpaque()
        callbacks.pointee.call = { context, method, call in
            let service = Unmanaged<BusService>.fromOpaque(context!).takeUnretainedValue()
            service.answer(Int(method), call!)
        }
        callbacks.pointee.caller_gone = { context, sender in
            Unmanaged<BusService>.fromOpaque(context!).takeUnretainedValue().onCallerGone(String(cString: sender!))
        }
        callbacks.pointee.served = { context, name, result, owner in
            let service = Unmanaged<BusService>.fromOpaque(context!).takeUnretainedValue()
            let name = String(cString: name!)
            if result == 1 { service.owned.insert(name) } else { service.owned.remove(name) }
            service.onServed(name, result, owner)
        }
        // Within the limits, the C layer refuses only for want of memory.
        guard let service = xil_service_new(interface, callbacks) else { return }
        for name in names { precondition(xil_service_add_name(service, name) >= 0, "\(name): too many names") }
        for path in paths { precondition(xil_service_add_path(service, path) >= 0, "\(interface): path \(path)") }
        for method in methods {
            precondition(xil_service_add_method(service, method.name, method.takes, method.returns, method.needsCaller ? 1 : 0) >= 0,
                         "\(interface): method \(method.name)")
        }
        for (signal, signature) in signals {
            precondition(xil_service_add_signal(service, signal, signature) >= 0, "\(interface): signal \(signal)")
        }
        self.service = service
    }

    /// A service never served (a declaration a test made) is freed with its callbacks; one
    /// served lives as long as the agent, since the bus holds its table and callbacks.
    deinit {
        if let service, xil_service_free(service) == 0 { callbacks.deallocate() }
    }

    /// Serves it on a bus that has answered; the name's answer comes through `onServed`. 0 or -errno.
    func serve(on bus: OpaquePointer) -> Int32 {
        guard let service else { return -ENOMEM }
        return xil_service_serve(service, bus)
    }

    /// The bus is gone: its callers are forgotten (what they held ends with `sourceLost`).
    func forget() {
        owned = []
        if let service { xil_service_forget(service) }
    }

    func emit(_ signal: String, _ value: UInt32 = 0) {
        guard let service, let index = signals.firstIndex(of: signal) else { return }
        _ = xil_service_emit(service, Int32(index), value)
    }

    private func answer(_ index: Int, _ raw: OpaquePointer) {
        guard methods.indices.contains(index) else { return }
        let call = BusCall(raw)
        switch methods[index].handler(call) {
        case .done: xil_call_return(raw, 0)
        case .number(let value): xil_call_return(raw, value)
        case .flag(let value): xil_call_return(raw, value ? 1 : 0)
        case .text(let value): xil_call_return_string(raw, value)
        case .refused(let why): xil_call_fail(raw, "org.freedesktop.DBus.Error.AccessDenied", "refused: \(why)")
        case .invalid(let why): xil_call_fail(raw, "org.freedesktop.DBus.Error.InvalidArgs", why)
        case .later: break
        }
    }
}

/// One method call, as the bus vouches for its caller.
struct BusCall {
    fileprivate let raw: OpaquePointer
    fileprivate init(_ raw: OpaquePointer) { self.raw = raw }

    /// The caller's unique name (":1.42").
    var sender: String { String(cString: xil_call_sender(raw)) }
    /// Its pid, 0 when the bus did not tell.
    var pid: UInt32 { xil_call_pid(raw) }
    func text(_ i: Int32) -> String { String(cString: xil_call_string(raw, i)) }

    /// The call, to be answered later (once, by `DeferredCall.answer`); nil without memory.
    func deferred() -> DeferredCall? { xil_call_defer(raw).map(DeferredCall.init) }
    func number(_ i: Int32) -> UInt32 { xil_call_uint(raw, i) }

    /// The real caller in the user's words, apart from what it says of itself.
    var caller: String {
        ClientText.sanitized(pid == 0 ? "\(sender) (pid unknown)" : "pid \(pid) (\(processName(pid_t(pid)))), \(sender)")
    }
}

/// A call whose answer waits on another question (logind's, another agent's).
final class DeferredCall {
    private var raw: OpaquePointer?
    fileprivate init(_ raw: OpaquePointer) { self.raw = raw }

    func answer(_ reply: BusReply) {
        guard let raw else { return }
        self.raw = nil
        switch reply {
        case .done: xil_deferred_return(raw, 0)
        case .number(let value): xil_deferred_return(raw, value)
        case .flag(let value): xil_deferred_return(raw, value ? 1 : 0)
        case .text: xil_deferred_fail(raw, "org.freedesktop.DBus.Error.Failed", "no value")
        case .refused(let why): xil_deferred_fail(raw, "org.freedesktop.DBus.Error.AccessDenied", "refused: \(why)")
        case .invalid(let why): xil_deferred_fail(raw, "org.freedesktop.DBus.Error.InvalidArgs", why)
        case .later: self.raw = raw
        }
    }

    /// Never left unanswered: a caller waits for its reply.
    deinit { answer(.refused("not answered")) }
}

enum BusReply {
    case done
    case number(UInt32)
    case flag(Bool)
    case text(String)
    case refused(String)
    case invalid(String)
    /// Deferred (`BusCall.deferred`): answered once the answer it waits on comes.
    case later
}

/// The inhibit calls every service of holds shares (ScreenSaver, PowerManagement,
/// the session manager): a hold asked by a caller, ended by its cookie or by the
/// caller leaving the bus, all through the one gate of the agent's core.
struct BusHolds {
    let source: InhibitorSource
    weak var agent: DesktopAgent?

    /// A hold for this caller: its cookie, or why not. Held here only when the caller
    /// runs in this agent's session (`HoldRouting`).
    func inhibit(_ call: BusCall, app: String, reason: String) -> BusReply {
        // The caller's own words are bounded on their own: however long, they never
        // push the real caller out of status, the log or the audit.
        let why = ClientText.appAndReason(app, reason)
        let owner = HoldOwner(source, call.sender), who = call.caller
        let here: () -> BusReply = { [weak agent] in
            switch agent?.request(.holdAsked(owner, HoldClaim(key: "", who: who, why: why))) {
            case .granted(let id)?: return .number(UInt32(truncatingIfNeeded: id))
            case .refused(let why)?: return .refused(why)
            default: return .refused("the agent is not running")
            }
        }
        guard let routing = agent?.holdRouting else { return here() }
        return routing.inhibit(call, owner: owner, who: who, why: why, here: here)
    }

    /// A question about the screen, answered for the caller's session: `here` in this
    /// agent's, else from that session's agent's status (`HoldRouting.query`).
    func query(_ call: BusCall, here: @escaping () -> BusReply, fromStatus: @escaping (JSONValue) -> BusReply?) -> BusReply {
        guard let routing = agent?.holdRouting else { return here() }
        return routing.query(call, owner: HoldOwner(source, call.sender), here: here, reply: fromStatus)
    }

    /// Whether this source holds the lock off, in a status (`inhibitors_by_source`
    /// lists the sources that hold, with their counts).
    func holds(in status: JSONValue) -> Bool? {
        status["inhibitors_by_source"].map { ($0[source.rawValue]?.integer ?? 0) > 0 }
    }

    func release(_ call: BusCall, cookie: UInt32) -> BusReply {
        let owner = HoldOwner(source, call.sender)
        if agent?.holdRouting?.release(owner, cookie: cookie) == true { return .done }
        return agent?.request(.holdReleased(owner, id: Int(cookie))) == .done
            ? .done : .invalid("no inhibitor \(cookie) of this connection")
    }

    func callerGone(_ sender: String) {
        agent?.holdRouting?.callerGone(HoldOwner(source, sender))
        agent?.request(.ownerGone(HoldOwner(source, sender)))
    }
}
