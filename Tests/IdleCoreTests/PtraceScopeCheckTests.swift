@testable import IdleCore
import Testing

/// `ptrace-scope N` in a profile: a requirement of the machine (Yama's
/// kernel.yama.ptrace_scope at least N), so that the user cannot ptrace the lockers the
/// agent and the guard start. The edge reads /proc/sys/kernel/yama/ptrace_scope; a
/// kernel without Yama has no such directory, which never reads as met.
@Suite("doctor --policy: ptrace-scope")
struct PtraceScopeCheckTests {
    static let path = PolicyCheckTests.profilePath
    static let policy = "max-lock-after 10m\nsecure\n"

    func requirement(_ profile: String, _ scope: YamaPtraceScope, status: Bool = true) throws -> PolicyRequirement? {
        let status = status ? try PolicyCheckTests.status([], policy: Self.policy) : nil
        let report = PolicyCheck.check(try PolicyCheckTests.requirements(profile), path: Self.path, status: status,
                                       machine: MachineFacts(ptraceScope: scope), ownership: PolicyCheckTests.anyOwner)
        return report.requirements.first { $0.requirement.hasPrefix("ptrace-scope") }
    }

    @Test("a profile without ptrace-scope does not check it, whatever the kernel", arguments: [
        YamaPtraceScope.scope(0), .noYama, .notRead, .unreadable("cannot be read (Permission denied)"),
    ])
    func absentIsNotChecked(scope: YamaPtraceScope) throws {
        let status = try PolicyCheckTests.status([], policy: Self.policy)
        let report = PolicyCheck.check(try PolicyCheckTests.requirements("max-lock-after 15m\nsecure\n"), path: Self.path, status: status,
                                       machine: MachineFacts(ptraceScope: scope), ownership: PolicyCheckTests.anyOwner)
        #expect(report.met, "\(report.text)")
        #expect(!report.text.contains("ptrace"), "\(report.text)")
    }

    @Test("ptrace-scope 1 with Yama at 0 (Debian 12's default) is not met, and says how to meet it")
    func scopeZeroIsNotMet() throws {
        let r = try #require(try requirement("ptrace-scope 1\n", .scope(0)))
        #expect(!r.met)
        #expect(r.detail == "kernel.yama.ptrace_scope is 0: any process may ptrace another of its user, so the user can ptrace the lockers of the session (set kernel.yama.ptrace_scope = 1 in /etc/sysctl.d)", "\(r.detail)")
    }

    @Test("ptrace-scope 1 on a kernel without Yama (no /proc/sys/kernel/yama) is not met, with a clear reason; neither is a scope that could not be read, or was not read")
    func noYamaIsNotMet() throws {
        let noYama = try #require(try requirement("ptrace-scope 1\n", .noYama))
        #expect(!noYama.met)
        #expect(noYama.detail.hasPrefix("no Yama LSM in this kernel (no /proc/sys/kernel/yama)"), "\(noYama.detail)")
        let unreadable = try #require(try requirement("ptrace-scope 1\n", .unreadable("cannot be read (Permission denied)")))
        #expect(!unreadable.met && unreadable.detail == "kernel.yama.ptrace_scope cannot be read (Permission denied)", "\(unreadable.detail)")
        let notRead = try #require(try requirement("ptrace-scope 1\n", .notRead))
        #expect(!notRead.met, "\(notRead.detail)")
    }

    @Test("ptrace-scope 1 is met by Yama at 1, 2 and 3", arguments: [1, 2, 3])
    func higherScopesAreMet(scope: Int) throws {
        let r = try #require(try requirement("ptrace-scope 1\n", .scope(scope)))
        #expect(r.met, "\(r.detail)")
        #expect(r.detail.hasPrefix("kernel.yama.ptrace_scope is \(scope): "), "\(r.detail)")
    }

    @Test("ptrace-scope 2 is not met by 1; the whole report is not met")
    func belowTheProfileIsNotMet() throws {
        let status = try PolicyCheckTests.status([], policy: Self.policy)
        let report = PolicyCheck.check(try PolicyCheckTests.requirements("max-lock-after 15m\nptrace-scope 2\n"), path: Self.path,
                                       status: status, machine: MachineFacts(ptraceScope: .scope(1)), ownership: PolicyCheckTests.anyOwner)
        #expect(!report.met)
        #expect(report.text.contains("NOT MET  ptrace-scope 2: kernel.yama.ptrace_scope is 1"), "\(report.text)")
    }

    @Test("a machine requirement is checked when no agent answers too; root's check through the guard checks it for every session")
    func checkedWithoutAgentAndThroughTheGuard() throws {
        let met = try #require(try requirement("ptrace-scope 1\n", .scope(1), status: false))
        #expect(met.met, "\(met.detail)")
        let report = PolicyCheck.check(try PolicyCheckTests.requirements("ptrace-scope 1\n"), path: Self.path,
                                       guardReport: .object([("sessions", .array([.object([("id", .string("c1")), ("user", .string("u")), ("guarded", .bool(false))])]))]),
                                       machine: MachineFacts(ptraceScope: .noYama), ownership: PolicyCheckTests.anyOwner)
        #expect(report.text.contains("NOT MET  ptrace-scope 1: no Yama LSM in this kernel"), "\(report.text)")
    }

    @Test("the file's text: a scope, a missing Yama, junk", arguments: [
        (true, "1\n", YamaPtraceScope.scope(1)), (true, "0", .scope(0)), (false, nil, .noYama),
        (true, nil, .unreadable("cannot be read")), (true, "x\n", .unreadable("'x' is not a scope")),
    ] as [(Bool, String?, YamaPtraceScope)])
    func parsesTheFile(yamaExists: Bool, text: String?, expected: YamaPtraceScope) {
        #expect(YamaPtraceScope(yamaExists: yamaExists, text: text) == expected)
    }

    @Test("ptrace-scope takes 0 to 3: anything else is an error of the profile (and of a policy)", arguments: ["4", "-1", "one", ""])
    func badValues(value: String) {
        #expect(throws: UsageError.self) { try PolicyCheckTests.requirements("ptrace-scope \(value)\n") }
    }

    @Test("the agent reads ptrace-scope in its policy (no error, nothing enforced on it)")
    func policyReadsIt() {
        let read = Policy.read([(1, "ptrace-scope 1"), (2, "secure")], path: "/etc/xidlelock/policy")
        #expect(read.errors.isEmpty, "\(read.errors)")
        #expect(read.policy.ptraceScope == 1)
    }
}
