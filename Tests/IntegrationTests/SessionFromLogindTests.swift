import Foundation
import Glibc
import Testing

/// Issue #28, row 1: under a policy the session, its display and its type come from
/// logind, not from the environment the session's own user sets. Run in the guard's
/// machine (`GuardSession`: python-dbusmock's logind, whose GetSessionByPID knows the
/// user's processes, a second local user, the guard verifying the agent).
@Suite(.serialized, .enabled(if: getuid() == 0, "the session's user is nobody, started by root"))
struct SessionFromLogindTests {
    @Test("DISPLAY pointed at the user's own X server: the agent watches the session's display (logind's), the guard verifies it, its locker runs there; status names the disagreement")
    func displayFromLogind() async throws {
        try await GuardSession.with { g in
            let other = try await g.startOtherServer()
            let agent = try g.startAgent(display: other)
            try await g.waitForVerified(agent)
            let status = try #require(try await g.userStatus(), "no status on the session display's socket\n\(agent.log)")
            let session = status["session"] as? [String: Any] ?? [:]
            #expect(session["display"] as? String == g.display && session["from"] as? String == "logind", "\(session)")
            #expect((session["problems"] as? [String] ?? []).contains { $0.hasPrefix("DISPLAY=\(other) is not the session's display \(g.display)") },
                    "\(session)")
            #expect(agent.log.contains("error: session: DISPLAY=\(other)"), "\(agent.log)")

            let asked = ContinuousClock.now
            let lock = try await g.runAsUser(agentBinary, ["lock"])
            #expect(lock.exit == .exited(0), "xidlelock lock: \(lock.stderr)")
            let (pid, after) = try await g.waitForLocker(since: asked)
            print("figure (DISPLAY=\(other), the session's \(g.display)): the locker held the session's keyboard \(after.milliseconds) ms after the lock")
            #expect(ProcInfo.environment(pid, "DISPLAY") == g.display, "the locker runs on \(ProcInfo.environment(pid, "DISPLAY") ?? "?")")
        }
    }

    @Test("WAYLAND_DISPLAY and XDG_SESSION_TYPE=wayland set in a session logind says is X11: the agent runs (no exit 69) and is verified")
    func waylandVariablesInAnX11Session() async throws {
        try await GuardSession.with { g in
            let agent = try g.startAgent(environment: ["WAYLAND_DISPLAY": "wayland-0", "XDG_SESSION_TYPE": "wayland"])
            try await g.waitForVerified(agent)
            let problems = (try await g.userStatus())?["session"].flatMap { ($0 as? [String: Any])?["problems"] as? [String] } ?? []
            #expect(problems.contains("WAYLAND_DISPLAY=wayland-0 in a session logind says is x11: ignored"), "\(problems)")
        }
    }

    @Test("XDG_SESSION_ID of another session, the policy's lock-on-switch: the agent follows its own session (logind's), and locks when it leaves the front")
    func sessionIDFromLogind() async throws {
        try await GuardSession.with { g in
            try g.s.write(g.policyText + "lock-on-switch\n", to: "etc/policy")
            let agent = try g.startAgent(environment: ["XDG_SESSION_ID": "c99"])
            try await g.waitForVerified(agent)
            try await agent.waitForLog(containing: "logind session: /org/freedesktop/login1/session/\(guardSessionID)")
            // Root's check: lock-on-switch met, on logind's session.
            try g.s.write("lock-on-switch\n", to: "switch.profile")
            let doctor = try await g.s.run(agentBinary, ["doctor", "--policy", g.s.path("switch.profile")], environment: g.guardEnvironment)
            #expect(doctor.exit == .exited(0) && doctor.stdout.contains("logind's session \(guardSessionID)"), "\(doctor.stdout)\(doctor.stderr)")
            let switched = ContinuousClock.now
            _ = try await g.s.bus("session-active", guardSessionID, "false")
            let (_, after) = try await g.waitForLocker(since: switched)
            print("figure (XDG_SESSION_ID=c99, lock-on-switch): locked \(after.milliseconds) ms after the session left the front")
        }
    }
}
