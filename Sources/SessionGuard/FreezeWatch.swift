import Glibc
import IdleCore
import Platform

/// A verified agent followed for a freeze of its control group. systemd delegates a
/// cgroup tree to the user (`user@UID.service`): the user may move their processes
/// between any of its cgroups and write `1` to `cgroup.freeze` of any of them. A frozen
/// agent stops without a signal, so ptrace sees nothing.
///
/// So the guard watches the whole tree the user could put the agent in, not only the
/// agent's cgroup: the topmost ancestor of the agent's cgroup whose directory the user
/// owns (found from ownership, not from names), every cgroup below it, and each one's
/// `cgroup.events`, whose `populated` changes as a process moves in or out and whose
/// `frozen` changes with a freeze there or above. On any change in the tree the guard
/// reads again where the agent is (/proc/PID/cgroup) and whether that cgroup is frozen.
/// No polling, and the agent is not woken.
///
/// A tree the guard cannot watch whole (inotify's limits) is said once, loudly, and
/// the agent counts as unguarded: a freeze there could not be seen (fail closed).
final class FreezeWatch {
    let pid: pid_t
    /// The user the agent runs as (SO_PEERCRED, verified): whose cgroups count.
    let uid: uid_t
    /// The agent's cgroup, relative to the cgroup2 mount ("/user.slice/…/xidlelock.service").
    private(set) var cgroup: String
    /// The top of the tree watched for it.
    private(set) var top: String
    /// What holds the agent: a freeze, a tree the guard cannot watch; nil when nothing does.
    private(set) var hold: AgentLoss?
    private unowned let trees: CgroupTrees
    private let onChange: (_ hold: AgentLoss?) -> Void
    private(set) var isFinished = false

    /// The cgroup2 hierarchy: /sys/fs/cgroup (unified), or /sys/fs/cgroup/unified
    /// (systemd's hybrid layout); nil on a cgroup v1-only system (no freeze to see).
    static let mount: String? = {
        for candidate in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        where access(candidate + "/cgroup.controllers", F_OK) == 0 { return candidate }
        return nil
    }()

    /// nil when the agent has no cgroup to watch (no cgroup2, the root cgroup, which
    /// cannot be frozen). Else watching, with `hold` as it is now (not told to `onChange`).
    init?(pid: pid_t, uid: uid_t, trees: CgroupTrees, onChange: @escaping (_ hold: AgentLoss?) -> Void) {
        guard let mount = FreezeWatch.mount, let cgroup = FreezeWatch.cgroup(of: pid), cgroup != "/" else { return nil }
        self.pid = pid
        self.uid = uid
        self.cgroup = cgroup
        self.top = FreezeWatch.topmostOwned(above: cgroup, by: uid, mount: mount)
        self.trees = trees
        self.onChange = onChange
        // Watched first, read after: a change from now on is an event.
        trees.subscribe(self)
        hold = currentHold()
    }

    /// The process's cgroup2 path ("0::PATH" in /proc/PID/cgroup).
    static func cgroup(of pid: pid_t) -> String? {
        guard let bytes = FileIO.readSmallFile("/proc/\(pid)/cgroup") else { return nil }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix("0::") }.map { String($0.dropFirst(3)) }
    }

    /// The topmost cgroup from the root down to `cgroup` whose directory `uid` owns:
    /// every cgroup below it is the user's to move the agent to, or to freeze. The
    /// agent's own cgroup when the user owns none (a freeze there is still seen).
    static func topmostOwned(above cgroup: String, by uid: uid_t, mount: String) -> String {
        var path = ""
        for component in cgroup.split(separator: "/") {
            path += "/" + component
            var info = stat()
            if lstat(mount + path, &info) == 0, info.st_uid == uid { return path }
        }
        return cgroup
    }

    /// Something changed in the tree (or the tree cannot be watched): where the agent is
    /// and whether it is held, told when that changes.
    func recheck() {
        guard !isFinished else { return }
        if let now = FreezeWatch.cgroup(of: pid) {
            cgroup = now
            if !CgroupTrees.contains(top, now), let mount = FreezeWatch.mount {
                // Outside the tree (root moved it): the tree of where it is now.
                trees.unsubscribe(self)
                top = FreezeWatch.topmostOwned(above: now, by: uid, mount: mount)
                trees.subscribe(self)
            }
        }
        let now = currentHold()
        guard now != hold else { return }
        hold = now
        onChange(now)
    }

    private func currentHold() -> AgentLoss? {
        if let problem = trees.problem(of: top) { return .unwatchable(reason: problem) }
        return readFrozen() ? .frozen(cgroup: cgroup) : nil
    }

    /// The agent ended, or its registration did: nothing more to watch.
    func finish() {
        guard !isFinished else { return }
        isFinished = true
        trees.unsubscribe(self)
    }

    /// `frozen 1` in cgroup.events: this cgroup or one above it is frozen.
    private func readFrozen() -> Bool {
        guard let bytes = FileIO.readSmallFile((FreezeWatch.mount ?? "") + cgroup + "/cgroup.events") else { return false }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").contains("frozen 1")
    }
}

/// The guard's one inotify instance for every agent's cgroup tree: root's inotify
/// instances are few (`fs.inotify.max_user_instances`, 128, shared by every root
/// daemon), so not one per agent. Watches are kept by watch descriptor; a directory in
/// two trees (two sessions of one user share `user@UID.service`) is watched once, for
/// as long as one tree holds it.
///
/// Each directory is watched for new subdirectories (IN_CREATE, then watched too, with
/// what was made below them meanwhile) and removed ones (IN_DELETE: kernfs sends no
/// IN_IGNORED for a removed cgroup, so the watch is removed by hand), and its
/// `cgroup.events` for changes (IN_MODIFY).
final class CgroupTrees: EventSource {
    /// The most directories watched for one tree: a user who makes more cgroups than
    /// that cannot spend root's inotify watches (`max_user_watches`, shared by every root
    /// daemon and every other user's tree); the user's agents count as unguarded then.
    static let directoriesPerTree = 1024

    private var fd: Int32 = -1
    /// Why there is no inotify instance, if so (said once per outage).
    private var instanceProblem: String?

    private struct Watched {
        var directoryWatch: Int32
        var eventsWatch: Int32
        /// The trees (their tops) that hold this directory.
        var trees: Set<String>
    }

    private final class Tree {
        let top: String
        var directories: Set<String> = []
        var watchers: [FreezeWatch] = []
        /// Why the tree is not watched whole, if so: its agents are not guarded.
        var problem: String?
        init(top: String) { self.top = top }
    }

    /// By path relative to the mount.
    private var watched: [String: Watched] = [:]
    /// Watch descriptor → the directory it is for, and whether it is its cgroup.events.
    private var byDescriptor: [Int32: (path: String, events: Bool)] = [:]
    private var trees: [String: Tree] = [:]

    deinit { if fd >= 0 { close(fd) } }

    var pollInterest: (fd: Int32, events: PollEvents)? { fd < 0 ? nil : (fd, .readable) }

    static func contains(_ top: String, _ path: String) -> Bool { path == top || path.hasPrefix(top + "/") }

    /// Why the tree at `top` is not watched whole, or nil.
    func problem(of top: String) -> String? { instanceProblem ?? trees[top]?.problem }

    func subscribe(_ watch: FreezeWatch) {
        var retry: [Tree] = []
        if fd < 0 {
            // Made on first use, and tried again at each registration while it fails.
            fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
            if fd < 0 {
                let reason = "cannot watch its control group: inotify_init1: \(String(cString: strerror(errno)))"
                if instanceProblem == nil { Log.write(.error, "the guard \(reason): every agent counts as unguarded (fs.inotify.max_user_instances?)") }
                instanceProblem = reason
            } else if instanceProblem != nil {
                instanceProblem = nil
                Log.write(.info, "the guard watches control groups again")
                retry = trees.values.filter { $0.problem != nil }
            }
        }
        if let known = trees[watch.top] {
            // A tree that could not be watched whole is tried again with each agent that comes.
            if known.problem != nil && !retry.contains(where: { $0 === known }) { retry.append(known) }
        } else {
            let tree = Tree(top: watch.top)
            trees[watch.top] = tree
            scan(watch.top, into: tree)
        }
        for tree in retry {
            tree.problem = nil
            scan(tree.top, into: tree)
        }
        trees[watch.top]?.watchers.append(watch)
        // Their agents, watched whole again (or not).
        for tree in retry {
            for other in tree.watchers where other !== watch { other.recheck() }
        }
    }

    func unsubscribe(_ watch: FreezeWatch) {
        guard let tree = trees[watch.top] else { return }
        tree.watchers.removeAll { $0 === watch }
        guard tree.watchers.isEmpty else { return }
        for path in tree.directories { release(path, from: tree.top) }
        trees[watch.top] = nil
    }

    func dispatch(_ events: PollEvents) {
        var touched: Set<String> = []
        var overflowed = false
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { break }
            var offset = 0
            while offset + 16 <= n {
                let (wd, mask, length) = buffer.withUnsafeBytes { raw in
                    (raw.loadUnaligned(fromByteOffset: offset, as: Int32.self),
                     raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self),
                     Int(raw.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self)))
                }
                let name = String(decoding: buffer[(offset + 16)..<min(offset + 16 + length, n)].prefix { $0 != 0 }, as: UTF8.self)
                offset += 16 + length
                if mask & UInt32(IN_Q_OVERFLOW) != 0 { overflowed = true; continue }
                guard let (path, isEvents) = byDescriptor[wd], let entry = watched[path] else { continue }
                touched.formUnion(entry.trees)
                guard !isEvents, !name.isEmpty, mask & UInt32(IN_ISDIR) != 0 else { continue }
                let child = path + "/" + name
                if mask & UInt32(IN_CREATE) != 0 {
                    for top in entry.trees { if let tree = trees[top] { scan(child, into: tree) } }
                } else if mask & UInt32(IN_DELETE) != 0 {
                    removed(child)
                }
            }
        }
        if overflowed {
            // Events were lost (a new cgroup among them, maybe): every tree again.
            Log.write(.warning, "the guard's cgroup watch overflowed: reading every watched tree again")
            for tree in trees.values { scan(tree.top, into: tree) }
            touched = Set(trees.keys)
        }
        // Where each agent of a changed tree is, read after every new cgroup is watched.
        for top in touched.sorted() {
            for watch in trees[top]?.watchers ?? [] { watch.recheck() }
        }
    }

    // MARK: Watches

    /// Watches `path` and every cgroup below it for `tree`.
    private func scan(_ path: String, into tree: Tree) {
        guard let mount = FreezeWatch.mount else { return }
        var pending = [path]
        while let next = pending.popLast() {
            guard tree.problem == nil, add(next, to: tree) else { return }
            pending += FileIO.entries(of: mount + next, directoriesOnly: true).map { next + "/" + $0 }
        }
    }

    /// Watches one directory for `tree`; false when it cannot (then the tree's problem
    /// says why, and its agents hear of it).
    private func add(_ path: String, to tree: Tree) -> Bool {
        if let fault = instanceProblem { return fail(tree, fault) }
        let full = (FreezeWatch.mount ?? "") + path
        if !tree.directories.contains(path) && tree.directories.count >= CgroupTrees.directoriesPerTree {
            return fail(tree, "cannot watch its control group: more than \(CgroupTrees.directoriesPerTree) cgroups under \(tree.top)")
        }
        // Added again even when known: a cgroup removed and made again under its name
        // is a new directory (a new watch descriptor).
        let directoryWatch = inotify_add_watch(fd, full, UInt32(IN_CREATE | IN_DELETE | IN_ONLYDIR | IN_DONT_FOLLOW))
        let eventsWatch = directoryWatch < 0 ? -1 : inotify_add_watch(fd, full + "/cgroup.events", UInt32(IN_MODIFY))
        guard directoryWatch >= 0, eventsWatch >= 0 else {
            let code = errno
            // Removed meanwhile: nothing to watch there.
            if code == ENOENT || code == ENOTDIR {
                if directoryWatch >= 0, watched[path]?.directoryWatch != directoryWatch { inotify_rm_watch(fd, directoryWatch) }
                return true
            }
            return fail(tree, "cannot watch its control group: \(full): \(String(cString: strerror(code)))" + (code == ENOSPC ? " (fs.inotify.max_user_watches)" : ""))
        }
        var entry = watched[path] ?? Watched(directoryWatch: directoryWatch, eventsWatch: eventsWatch, trees: [])
        for old in [entry.directoryWatch, entry.eventsWatch] where old != directoryWatch && old != eventsWatch {
            inotify_rm_watch(fd, old)
            byDescriptor[old] = nil
        }
        entry.directoryWatch = directoryWatch
        entry.eventsWatch = eventsWatch
        entry.trees.insert(tree.top)
        watched[path] = entry
        byDescriptor[directoryWatch] = (path, false)
        byDescriptor[eventsWatch] = (path, true)
        tree.directories.insert(path)
        return true
    }

    private func fail(_ tree: Tree, _ reason: String) -> Bool {
        if tree.problem == nil {
            Log.write(.error, "the guard \(reason): the agents there count as unguarded (a freeze there could not be seen)")
        }
        tree.problem = reason
        return false
    }

    /// A cgroup was removed (it had no children left): its watches go, from every tree.
    private func removed(_ path: String) {
        guard let entry = watched[path] else { return }
        for top in entry.trees { trees[top]?.directories.remove(path) }
        forget(path, entry)
    }

    private func release(_ path: String, from top: String) {
        guard var entry = watched[path] else { return }
        entry.trees.remove(top)
        if entry.trees.isEmpty { forget(path, entry) } else { watched[path] = entry }
    }

    private func forget(_ path: String, _ entry: Watched) {
        for wd in [entry.directoryWatch, entry.eventsWatch] {
            inotify_rm_watch(fd, wd)
            byDescriptor[wd] = nil
        }
        watched[path] = nil
    }
}
