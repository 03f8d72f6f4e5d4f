import Glibc
import IdleCore

/// A verified agent's control group, watched for a freeze. systemd delegates the
/// user's cgroups to the user, who may write `1` to `cgroup.freeze` of the agent's
/// unit, or of any cgroup above it: the agent then stops without a signal, so ptrace
/// sees nothing. The kernel keeps `frozen` in every frozen cgroup's `cgroup.events`
/// (also below a frozen ancestor) and tells inotify when it changes: no polling, and
/// the agent is not woken.
///
/// The user may also move the agent into another cgroup of theirs first. Also
/// watched: the agent's cgroup directory for new children and each child's
/// `cgroup.events`, whose `populated` changes as the agent moves in (and the agent's
/// own cgroup's as it moves out, when nothing else runs there). Every event reads
/// where the agent is again and watches that afresh. Not seen: a move sideways while the
/// agent's locker still runs in its old cgroup.
final class FreezeWatch: EventSource {
    let pid: pid_t
    /// The agent's cgroup, relative to the cgroup2 mount ("/user.slice/…/xidlelock.service").
    private(set) var cgroup: String
    private(set) var frozen = false
    private var fd: Int32 = -1
    private let onChange: (_ frozen: Bool, _ cgroup: String) -> Void
    private(set) var isFinished = false

    /// The cgroup2 hierarchy: /sys/fs/cgroup (unified), or /sys/fs/cgroup/unified
    /// (systemd's hybrid layout); nil on a cgroup v1-only system (no freeze to see).
    static let mount: String? = {
        for candidate in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        where access(candidate + "/cgroup.controllers", F_OK) == 0 { return candidate }
        return nil
    }()

    /// nil when the agent's cgroup cannot be watched (no cgroup2, the root cgroup).
    init?(pid: pid_t, onChange: @escaping (_ frozen: Bool, _ cgroup: String) -> Void) {
        guard FreezeWatch.mount != nil, let cgroup = FreezeWatch.cgroup(of: pid), cgroup != "/" else { return nil }
        self.pid = pid
        self.cgroup = cgroup
        self.onChange = onChange
        rewatch()
        guard fd >= 0 else { return nil }
        frozen = readFrozen()
    }

    deinit { if fd >= 0 { close(fd) } }

    /// The process's cgroup2 path ("0::PATH" in /proc/PID/cgroup).
    static func cgroup(of pid: pid_t) -> String? {
        guard let bytes = FileIO.readSmallFile("/proc/\(pid)/cgroup") else { return nil }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix("0::") }.map { String($0.dropFirst(3)) }
    }

    var pollInterest: (fd: Int32, events: PollEvents)? { isFinished || fd < 0 ? nil : (fd, .readable) }

    func dispatch(_ events: PollEvents) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while read(fd, &buffer, buffer.count) > 0 {}
        // Where the agent is now, and that cgroup's new children: watched afresh.
        if let now = FreezeWatch.cgroup(of: pid) { cgroup = now }
        rewatch()
        let now = readFrozen()
        guard now != frozen else { return }
        frozen = now
        onChange(now, cgroup)
    }

    /// The agent ended: its pidfd says so; nothing more to watch.
    func finish() {
        isFinished = true
        if fd >= 0 { close(fd) }
        fd = -1
    }

    private var directory: String { (FreezeWatch.mount ?? "") + cgroup }

    private func rewatch() {
        if fd >= 0 { close(fd) }
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else {
            Log.write(.error, "cannot watch the control group of agent pid \(pid) for a freeze: \(String(cString: strerror(errno)))")
            return
        }
        if inotify_add_watch(fd, directory + "/cgroup.events", UInt32(IN_MODIFY)) < 0 {
            Log.write(.error, "cannot watch \(directory)/cgroup.events for a freeze of agent pid \(pid): \(String(cString: strerror(errno)))")
        }
        _ = inotify_add_watch(fd, directory, UInt32(IN_CREATE | IN_ONLYDIR))
        for child in FileIO.entries(of: directory, directoriesOnly: true) {
            _ = inotify_add_watch(fd, directory + "/" + child + "/cgroup.events", UInt32(IN_MODIFY))
        }
    }

    /// `frozen 1` in cgroup.events: this cgroup or one above it is frozen.
    private func readFrozen() -> Bool {
        guard let bytes = FileIO.readSmallFile(directory + "/cgroup.events") else { return false }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").contains("frozen 1")
    }
}
