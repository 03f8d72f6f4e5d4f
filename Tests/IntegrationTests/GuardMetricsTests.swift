import Foundation
import Glibc
import Testing

/// Issue #38: the guard's metrics file read by the real tools of a fleet: Debian's
/// node_exporter (its textfile collector pointed at the guard's `metrics-directory`,
/// every other collector off) on the loopback, a real Prometheus scraping it every
/// second, and PromQL through Prometheus's HTTP API. Every version of the file the test
/// sees passes `promtool check metrics`.
let nodeExporterBinary = "/usr/bin/prometheus-node-exporter"
let prometheusBinary = "/usr/bin/prometheus"
let promtoolBinary = "/usr/bin/promtool"
private let prometheusInstalled = [nodeExporterBinary, prometheusBinary, promtoolBinary]
    .allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }

@Suite(.serialized, .enabled(if: getuid() == 0, "the guard runs as root and the session's user is nobody"),
       .enabled(if: prometheusInstalled, "prometheus-node-exporter and prometheus (promtool) are not installed: sh .ci/install-packages test"))
struct GuardMetricsTests {
    static let scrapeInterval: Duration = .seconds(1)

    @Test("an agent killed in a guarded session is unguarded in a real Prometheus within a scrape interval of the guard's file saying so; guarded again when the agent is back; every file passes promtool check metrics; the file goes when the guard stops")
    func prometheusSeesTheGuard() async throws {
        try await GuardSession.with(startGuard: false) { g in
            let metrics = MetricsVersions(path: g.metricsDirectory + "/xidlelock.prom")
            guard mkdir(g.metricsDirectory, 0o755) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
            try await g.startGuard()
            try await g.wait("the guard's metrics file") { metrics.sample() }
            let prometheus = try await FleetPrometheus(g.s, textfileDirectory: g.metricsDirectory, interval: Self.scrapeInterval)
            func waitFor(_ query: String, _ what: String, _ expected: (([[String: Any]]) -> Bool)? = nil) async throws {
                try await g.wait("Prometheus to answer \(query) with \(what)", extra: { prometheus.logs }) {
                    _ = metrics.sample()
                    let result = try await prometheus.query(query)
                    return expected.map { $0(result) } ?? !result.isEmpty
                }
            }
            let agent = try await g.startVerifiedAgent()
            try await waitFor("xidlelock_session_guarded{session=\"\(guardSessionID)\",user=\"\(guardUserName)\",display=\"\(g.display)\",remote=\"no\"} == 1",
                              "the session guarded")
            try await waitFor("xidlelock_session_policy_met{session=\"\(guardSessionID)\"} == 1", "the session's agent under the policy")
            try await waitFor("xidlelock_policy_info{sha256=\"\(try sha256sum(g.etc + "/policy"))\"}", "the policy file's sha256sum")

            agent.send(SIGKILL)
            _ = try await agent.waitForExit()
            let unguardedLine = "xidlelock_session_guarded{session=\"\(guardSessionID)\""
            try await g.wait("the guard's file to say the session is not guarded") {
                _ = metrics.sample()
                return metrics.latest.contains { $0.hasPrefix(unguardedLine) && $0.hasSuffix(" 0") }
            }
            let written = ContinuousClock.now
            try await waitFor("xidlelock_session_guarded == 0", "the session unguarded") { result in
                result.contains { ($0["metric"] as? [String: String])?["session"] == guardSessionID }
            }
            let seen = ContinuousClock.now - written
            print("guard figure (metrics: unguarded in Prometheus \(seen.milliseconds) ms after the guard's file said so; scrape interval \(Self.scrapeInterval.milliseconds) ms)")
            #expect(seen <= Self.scrapeInterval + .seconds(2),
                    "Prometheus answered \(seen.milliseconds) ms after the file changed, above one scrape interval (and the query's own time)\n\(prometheus.logs)")
            try await waitFor("xidlelock_agents_lost_total{how=\"ended\"} == 1", "the loss counted")

            // The guard's locker after agent-grace: locked, and counted.
            _ = try await g.waitForLocker(since: written)
            try await waitFor("xidlelock_session_locked{session=\"\(guardSessionID)\"} == 1", "the session locked by the guard's locker")
            try await waitFor("xidlelock_guard_locks_total == 1", "the guard's lock counted")

            _ = try g.startAgent()
            try await waitFor("xidlelock_session_guarded{session=\"\(guardSessionID)\"} == 1", "the session guarded again")
            try await waitFor("node_textfile_scrape_error == 0", "node_exporter reading the file without error")

            _ = metrics.sample()
            #expect(metrics.versions.count >= 4, "the test saw \(metrics.versions.count) versions of the file")
            for (k, version) in metrics.versions.enumerated() {
                try g.s.write(version, to: "metrics-version-\(k).prom")
                let check = try await g.s.run("/bin/sh", ["-c", "\(promtoolBinary) check metrics < metrics-version-\(k).prom"])
                #expect(check.exit == .exited(0) && check.stdout.isEmpty && check.stderr.isEmpty,
                        "promtool check metrics on version \(k): \(check.exit) \(check.stdout)\(check.stderr)\n\(version)")
            }
            print("guard figure (metrics: \(metrics.versions.count) versions of the file seen, each passes promtool check metrics)")

            // A guard that stops takes its file with it: the file would vouch for sessions no one guards.
            let guardProcess = try #require(g.guardProcess)
            kill(guardProcess.processIdentifier, SIGTERM)
            try await g.wait("the guard's metrics file gone once the guard stopped") { !metrics.sample() }
        }
    }

    @Test("a metrics directory that does not exist: no file, said once in the guard's log however often the metrics change")
    func missingDirectory() async throws {
        try await GuardSession.with { g in
            let agent = try await g.startVerifiedAgent()
            agent.send(SIGKILL)
            _ = try await agent.waitForExit()
            _ = try await g.waitForLocker(since: .now)
            #expect(!FileManager.default.fileExists(atPath: g.metricsDirectory))
            #expect(g.guardLogCount(of: "metrics: \(g.metricsDirectory) is not a directory") == 1, "\(g.guardLog)")
        }
    }
}

/// The `sha256sum` of a file, as an admin prints it.
private func sha256sum(_ path: String) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
    process.arguments = [path]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(String(decoding: data, as: UTF8.self).prefix(64))
}

/// Each distinct content the metrics file had when the test looked.
final class MetricsVersions {
    let path: String
    private(set) var versions: [String] = []
    init(path: String) { self.path = path }

    /// Reads the file; true when it exists.
    @discardableResult
    func sample() -> Bool {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return false }
        if versions.last != text { versions.append(text) }
        return true
    }

    var latest: [String] { versions.last?.split(separator: "\n").map(String.init) ?? [] }
}

/// node_exporter with only its textfile collector, and a Prometheus scraping it, both
/// on free loopback ports, run in the sandbox (ended at its clean-up).
final class FleetPrometheus {
    let s: Sandbox
    let url: String

    init(_ s: Sandbox, textfileDirectory: String, interval: Duration) async throws {
        self.s = s
        let exporterPort = try freeLoopbackPort()
        _ = try s.startBackground(nodeExporterBinary, ["--web.listen-address=127.0.0.1:\(exporterPort)", "--collector.disable-defaults",
                                                       "--collector.textfile", "--collector.textfile.directory=\(textfileDirectory)"],
                                  output: "node-exporter.log")
        try s.write("""
            global:
              scrape_interval: \(interval.milliseconds)ms
              evaluation_interval: \(interval.milliseconds)ms
            scrape_configs:
              - job_name: node
                static_configs:
                  - targets: ['127.0.0.1:\(exporterPort)']

            """, to: "prometheus.yml")
        let port = try freeLoopbackPort()
        url = "http://127.0.0.1:\(port)"
        _ = try s.startBackground(prometheusBinary, ["--config.file=\(s.path("prometheus.yml"))", "--storage.tsdb.path=\(s.path("prometheus-data"))",
                                                     "--web.listen-address=127.0.0.1:\(port)"],
                                  output: "prometheus.log")
        try await waitUntil("Prometheus to be ready", context: { self.logs }) {
            try await s.run("/usr/bin/curl", ["-sf", "-o", "/dev/null", url + "/-/ready"]).exit == .exited(0)
        }
    }

    var logs: String { "node-exporter.log:\n\(s.contents("node-exporter.log"))\nprometheus.log:\n\(s.contents("prometheus.log"))" }

    /// The instant vector `query` gives now (`data.result`).
    func query(_ query: String) async throws -> [[String: Any]] {
        let result = try await s.run("/usr/bin/curl", ["-sf", "-G", url + "/api/v1/query", "--data-urlencode", "query=" + query])
        guard result.exit == .exited(0), let answer = jsonObject(result.stdout), answer["status"] as? String == "success",
              let data = answer["data"] as? [String: Any], let vector = data["result"] as? [[String: Any]] else {
            throw CommandFailed(command: ["curl", query], result: result)
        }
        return vector
    }
}

/// A TCP port of the loopback that nothing listens on now (bound, read, closed).
func freeLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
    return Int(UInt16(bigEndian: address.sin_port))
}
