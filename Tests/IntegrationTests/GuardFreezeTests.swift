import Foundation
import Glibc
import Testing

/// Issue #35: the guard vouches only for what it verified. Under systemd the user owns
/// a delegated cgroup tree (`user@UID.service`): they may move their processes between
/// any of its cgroups and freeze any of them. The guard must see a freeze of the agent
/// wherever in that tree the user puts it, not only in the agent's own cgroup and the
/// ones the user makes below it (GuardTests b2).
///
/// Each test builds the tree as systemd does: `…/user@65534.service` made by root and
/// handed to the user (the directory and its `cgroup.procs`, `cgroup.subtree_control`,
/// `cgroup.threads`), `app.slice/xidlelock.service` made in it by the user, and the agent
/// started there (root moves it in, as systemd starts a unit in its cgroup).
@Suite(.serialized, .enabled(if: getuid() == 0, "the guard runs as root and the session's user is nobody"))
struct GuardFreezeTests {
    /// `user@65534.service` under a root-owned slice of the test's, handed to the user as
    /// systemd delegates it; removed (leaves first, thawed) by `remove()`.
    struct DelegatedTree {
        let slice: String
        var service: String { slice + "/user@\(guardUserID).service" }
        var apps: String { service + "/app.slice" }
        var unit: String { apps + "/xidlelock.service" }

        init(_ name: String) throws {
            slice = try #require(GuardTests.cgroupMount) + "/xidlelock-it-\(getpid())-\(name)"
            DelegatedTree.remove(slice)
            for path in [slice, slice + "/user@\(guardUserID).service"] {
                guard mkdir(path, 0o755) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
            }
            for file in ["", "/cgroup.procs", "/cgroup.subtree_control", "/cgroup.threads"] {
                guard chown(service + file, guardUserID, guardUserID) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EPERM) }
            }
        }

        func remove() { DelegatedTree.remove(slice) }

        /// Thaws and removes a cgroup tree, leaves first (its processes must be gone).
        static func remove(_ path: String) {
            guard FileManager.default.fileExists(atPath: path) else { return }
            _ = try? "0".write(toFile: path + "/cgroup.freeze", atomically: false, encoding: .utf8)
            for child in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
                var info = stat()
                if lstat(path + "/" + child, &info) == 0, info.st_mode & S_IFMT == S_IFDIR { remove(path + "/" + child) }
            }
            // The processes killed at clean-up leave their cgroup a moment later.
            for _ in 0..<100 where rmdir(path) != 0 && errno == EBUSY { usleep(20_000) }
        }
    }

    /// Runs a shell command as the session's user; it must succeed.
    func asUser(_ g: GuardSession, _ script: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let result = try await g.runAsUser("sh", ["-c", script])
        try #require(result.exit == .exited(0), "as the user: \(script): \(result.exit) \(result.stderr)", sourceLocation: sourceLocation)
    }

    /// Where the other cgroup the agent is moved to comes from.
    enum Sideways: String, CaseIterable, CustomTestStringConvertible {
        case siblingBefore = "a sibling (app.slice/x) the user made before the agent registered"
        case deeperAfter = "a cgroup two levels below the service (app.slice/y/z) the user made after the agent registered"
        var testDescription: String { rawValue }
    }

    @Test("b5. the sideways freeze: a sleep of the user's left in xidlelock.service, the agent moved (by the user) into another cgroup of the user's delegated tree and frozen there: the guard's locker within agent-grace + 2 s; thawed, the agent guards again",
          .enabled(if: GuardTests.cgroupMount != nil, "no cgroup v2 hierarchy this test may write"), arguments: Sideways.allCases)
    func sidewaysFreeze(how: Sideways) async throws {
        let tree = try DelegatedTree(how == .siblingBefore ? "side-a" : "side-b")
        defer { tree.remove() }
        try await GuardSession.with { g in
            let other = how == .siblingBefore ? tree.apps + "/x" : tree.apps + "/y/z"
            try await asUser(g, "mkdir '\(tree.apps)' '\(tree.unit)'")
            if how == .siblingBefore { try await asUser(g, "mkdir '\(other)'") }
            let agent = try await g.startVerifiedAgent(cgroup: tree.unit)

            // A process of the user's stays in the agent's unit, so that the unit's
            // cgroup.events does not change as the agent leaves it (root puts it there, as
            // the unit's start would; the sleep runs as the user).
            let sleeper = try g.s.startBackground("sh", ["-c", "echo $$ > '\(tree.unit)/cgroup.procs' && exec setpriv --reuid=\(guardUserID) --regid=\(guardUserID) --clear-groups sleep 600"],
                                                  output: "sleeper.log", environment: g.userEnvironment(g.user))
            try await g.wait("the user's sleep in \(tree.unit)") {
                (try? String(contentsOfFile: tree.unit + "/cgroup.procs", encoding: .utf8))?.split(separator: "\n")
                    .contains("\(sleeper.processIdentifier)") == true && ProcInfo.realUID(sleeper.processIdentifier) == guardUserID
            }
            if how == .deeperAfter { try await asUser(g, "mkdir -p '\(other)'") }

            // The move, as the user: not a loss by itself.
            try await asUser(g, "echo \(agent.pid) > '\(other)/cgroup.procs'")
            let moved = (try? String(contentsOfFile: "/proc/\(agent.pid)/cgroup", encoding: .utf8)) ?? ""
            try #require(moved.contains(String(other.dropFirst(try #require(GuardTests.cgroupMount).count))),
                         "the agent is not in \(other) after the move: \(moved)")
            #expect(try await g.rootDoctor().exit == .exited(0), "a move alone was taken for a loss\n\(g.logs)")

            // The freeze, as the user, where nothing else of the agent's unit is.
            try await asUser(g, "echo 1 > '\(other)/cgroup.freeze'")
            let frozenAt = ContinuousClock.now
            defer { _ = try? "0".write(toFile: other + "/cgroup.freeze", atomically: false, encoding: .utf8) }
            try await g.wait("the agent's cgroup to be frozen") {
                ((try? String(contentsOfFile: other + "/cgroup.events", encoding: .utf8)) ?? "").contains("frozen 1")
            }
            let locker = try await g.expectGuardLocker(since: frozenAt, figure: "b5. sideways freeze, \(how.rawValue)")
            #expect(g.guardLog.contains("control group was frozen"), "the guard's log does not say why\n\(g.logs)")
            #expect(isAlive(sleeper.processIdentifier), "the user's sleep ended: the test no longer shows a sideways freeze")

            // Thawed: the same agent guards again; it adopts the guard's locker.
            try "0".write(toFile: other + "/cgroup.freeze", atomically: false, encoding: .utf8)
            try await g.waitForVerified(agent)
            #expect(g.lockerPids == [locker], "a second locker after the thaw\n\(g.logs)")
        }
    }

    @Test("b6. a tree the guard cannot watch whole (the user makes more cgroups than the guard watches for one tree): said once, the agent counts as unguarded, the guard's locker within agent-grace + 2 s; root's doctor names why",
          .enabled(if: GuardTests.cgroupMount != nil, "no cgroup v2 hierarchy this test may write"))
    func unwatchableTree() async throws {
        let tree = try DelegatedTree("many")
        defer { tree.remove() }
        try await GuardSession.with { g in
            try await asUser(g, "mkdir '\(tree.apps)' '\(tree.unit)'")
            let agent = try await g.startVerifiedAgent(cgroup: tree.unit)
            // More cgroups than one tree may cost root's inotify watches (1024 directories).
            let startedAt = ContinuousClock.now
            try await asUser(g, "cd '\(tree.apps)' && i=0 && while [ $i -lt 1030 ]; do mkdir c$i; i=$((i+1)); done")
            let madeAt = ContinuousClock.now
            let madeIn = madeAt - startedAt
            // The limit is passed before the last mkdir: counted from the last.
            _ = try await g.expectGuardLocker(since: madeAt, notBeforeGrace: false,
                                            figure: "b6. 1030 cgroups made by the user in \(madeIn.milliseconds) ms")
            let said = "cannot watch its control group: more than 1024 cgroups"
            #expect(g.guardLogCount(of: "error: the guard " + said) == 1, "not said once, as an error\n\(g.logs)")
            #expect(g.guardLog.contains("is NOT guarded: the guard " + said), "the loss does not say why\n\(g.logs)")
            let doctor = try await g.rootDoctor()
            #expect(doctor.exit == .exited(1) && doctor.stdout.contains(said), "root's doctor: \(doctor.exit)\n\(doctor.stdout)")
            #expect(isAlive(agent.pid), "the agent ended")
        }
    }
}
