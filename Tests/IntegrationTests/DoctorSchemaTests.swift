import Foundation
import Glibc
import Testing

/// Issue #38: root's `doctor --policy --json` is a contract: every answer (sessions
/// guarded, a session lost, no guard at all) validates against the JSON Schema the
/// package ships (packaging/examples/doctor-policy.schema.json), read by Debian's
/// python3-jsonschema.
private let schemaFile = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("packaging/examples/doctor-policy.schema.json").path

private let jsonschemaInstalled = FileManager.default.fileExists(atPath: "/usr/lib/python3/dist-packages/jsonschema/__init__.py")

@Suite(.serialized, .enabled(if: getuid() == 0, "the guard runs as root and the session's user is nobody"),
       .enabled(if: jsonschemaInstalled, "python3-jsonschema is not installed: sh .ci/install-packages test"))
struct DoctorSchemaTests {
    /// Validates `json` against the schema; the errors, one a line ("" when valid).
    static func violations(_ json: String, in s: Sandbox) async throws -> String {
        try s.write(json, to: "doctor.json")
        let script = """
            import json, sys, jsonschema
            schema = json.load(open(sys.argv[1]))
            errors = jsonschema.Draft202012Validator(schema).iter_errors(json.load(open(sys.argv[2])))
            print("\\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors))
            """
        let result = try await s.run("/usr/bin/python3", ["-c", script, schemaFile, s.path("doctor.json")])
        guard result.exit == .exited(0) else { throw CommandFailed(command: ["python3", "jsonschema"], result: result) }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("root's doctor --policy --json validates against the shipped schema (schema 1): a guarded session, the same session after its agent was killed, and no guard at all")
    func answersValidate() async throws {
        try await GuardSession.with(startGuard: false) { g in
            let none = try await g.rootDoctor(json: true)
            #expect(none.exit == .exited(1), "\(none.stdout)\(none.stderr)")
            #expect(try await Self.violations(none.stdout, in: g.s) == "", "no guard:\n\(none.stdout)")
            #expect(jsonObject(none.stdout)?["schema"] as? Int == 1 && jsonObject(none.stdout)?["problem"] is String, "\(none.stdout)")

            try await g.startGuard()
            let agent = try await g.startVerifiedAgent()
            let guarded = try await g.rootDoctor(json: true)
            #expect(guarded.exit == .exited(0), "\(guarded.stdout)\(guarded.stderr)")
            #expect(try await Self.violations(guarded.stdout, in: g.s) == "", "guarded:\n\(guarded.stdout)")
            let sessions = jsonObject(guarded.stdout)?["sessions"] as? [[String: Any]]
            #expect(sessions?.count == 1 && sessions?.first?["met"] as? Bool == true, "\(guarded.stdout)")

            agent.send(SIGKILL)
            _ = try await agent.waitForExit()
            var lost = CommandResult(exit: .exited(0), stdout: "", stderr: "")
            try await g.wait("root's doctor to say the session is not guarded") {
                lost = try await g.rootDoctor(json: true)
                return lost.exit == .exited(1)
            }
            #expect(try await Self.violations(lost.stdout, in: g.s) == "", "lost:\n\(lost.stdout)")
        }
    }

    @Test("the schema can fail: an answer without its version, or with a session lacking its requirements, is refused")
    func schemaRefuses() async throws {
        try await Sandbox.with(display: false) { s in
            let bad = #"{"profile":"p","met":true,"source":"guard","problem":null,"sessions":[{"id":"c2","user":"alice","met":true}]}"#
            let found = try await Self.violations(bad, in: s)
            #expect(found.contains("'schema' is a required property") && found.contains("'requirements' is a required property"), "\(found)")
        }
    }
}
