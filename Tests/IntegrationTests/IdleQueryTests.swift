import Foundation
import Testing

/// `xidlelock idle` prints the same counter as xprintidle.
@Suite struct IdleQueryTests {
    @Test("xidlelock idle agrees with xprintidle")
    func agreesWithXprintidle() async throws {
        try await Sandbox.with { s in
            let inputAt = ContinuousClock.now
            try await s.x("xdotool", "key", "shift")
            for step in 1...4 {
                try await s.waitUntil("the server idle to pass \(step * 300) ms", every: .milliseconds(50)) {
                    try await s.serverIdle() >= step * 300
                }
                let before = ContinuousClock.now
                let ours = try await s.x(agentBinary, "idle")
                let theirs = try await s.serverIdle()
                let taken = (ContinuousClock.now - before).milliseconds
                let sinceInput = (ContinuousClock.now - inputAt).milliseconds
                let idle = try #require(Int(ours), "xidlelock idle printed '\(ours)'")
                // Read first, so never above; below by at most the time the two readings took.
                #expect(idle <= theirs + 5 && theirs - idle <= max(100, taken),
                        "xidlelock idle \(idle) ms, xprintidle \(theirs) ms, taken \(taken) ms apart")
                #expect(idle <= sinceInput, "idle \(idle) ms, but the key was sent \(sinceInput) ms ago")
            }
        }
    }

    @Test("xidlelock idle --format ms|s|human|json prints the right shapes")
    func formats() async throws {
        try await Sandbox.with { s in
            try await s.x("xdotool", "key", "shift")
            try await s.waitUntil("the server idle to pass 1.2 s", every: .milliseconds(100)) {
                try await s.serverIdle() >= 1200
            }
            func seconds(_ format: String) async throws -> (low: Int, value: String, high: Int) {
                let low = try await s.serverIdle()
                let value = try await s.x(agentBinary, "idle", "--format", format)
                let high = try await s.serverIdle()
                return (low, value, high)
            }
            let ms = try await seconds("ms")
            #expect(Int(ms.value).map { ms.low <= $0 && $0 <= ms.high } == true, "ms: \(ms)")

            let s_ = try await seconds("s")
            #expect(Int(s_.value).map { s_.low / 1000 <= $0 && $0 <= s_.high / 1000 } == true, "s: \(s_)")

            let human = try await seconds("human")
            #expect(human.value.wholeMatch(of: /\d+s/) != nil, "human: \(human)")
            #expect(Int(human.value.dropLast()).map { human.low / 1000 <= $0 && $0 <= human.high / 1000 } == true,
                    "human: \(human)")

            let json = try await seconds("json")
            let match = json.value.wholeMatch(of: /\{"idle_ms":(\d+)\}/)
            #expect(match.flatMap { Int($0.1) }.map { json.low <= $0 && $0 <= json.high } == true, "json: \(json)")
        }
    }

    /// `idle` speaks to the server through libxcb, not Xlib: the same authority file
    /// must let it in, and a refusal must name the display.
    @Test("xidlelock idle takes its cookie from XAUTHORITY, as xprintidle does, and a refusal names the display")
    func authority() async throws {
        let cookie = (0..<16).map { _ in String(UInt8.random(in: 0...255) | 0x10, radix: 16) }.joined()
        let directory = FileManager.default.temporaryDirectory.appending(path: "xidlelock-auth-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // The server loads every cookie of its file, whatever display an entry names;
        // clients look for their display's.
        let serverAuthority = directory.appending(path: "server").path
        let xauth = try startProcess("xauth", ["-f", serverAuthority, "add", ":0", "MIT-MAGIC-COOKIE-1", cookie],
                                     environment: ProcessInfo.processInfo.environment, in: directory,
                                     stdout: directory.appending(path: "xauth.out"), stderr: directory.appending(path: "xauth.out"))
        #expect(try await xauth.waitForExit("xauth") == .exited(0))
        try await Sandbox.with(serverArguments: ["-auth", serverAuthority]) { s in
            let display = try #require(s.display)
            let clientAuthority = s.path("client.authority")
            try await s.x("xauth", "-f", clientAuthority, "add", display, ".", cookie)
            let theirs = try await s.run("xprintidle", [], environment: ["XAUTHORITY": clientAuthority])
            try #require(theirs.exit == .exited(0), "the server refused xprintidle too: \(theirs.stderr)")
            let ours = try await s.run(agentBinary, ["idle"], environment: ["XAUTHORITY": clientAuthority])
            #expect(ours.exit == .exited(0) && Int(ours.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) != nil,
                    "\(ours.exit) \(ours.stdout) \(ours.stderr)")

            let refused = try await s.run(agentBinary, ["idle"], environment: ["XAUTHORITY": s.path("no-such-file")])
            #expect(refused.exit == .exited(69), "\(refused.stderr)")
            // libxcb writes the server's reason first, as Xlib does for xprintidle.
            #expect(refused.stderr.hasSuffix("\nxidlelock: error: cannot open X display '\(display)'\n"), "\(refused.stderr)")
            #expect(refused.stderr.contains("Authorization required"), "\(refused.stderr)")
            #expect(refused.stdout.isEmpty)
        }
    }
}
