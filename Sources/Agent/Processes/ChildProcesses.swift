import Glibc
import IdleCore

/// The agent's children by role, each with how it may be stopped. A source of
/// its own: a hook asked to stop gets SIGKILL when its grace runs out.
final class ChildProcesses: EventSource {
    private struct Child {
        var role: ProcessRole
        var stop: SpawnRequest.StopPolicy
    }

    private var running: [pid_t: Child] = [:]
    /// When each process group asked to stop gets SIGKILL.
    private var killAt: [pid_t: MonotonicInstant] = [:]
    private let now: () -> MonotonicInstant
    /// Where the running locker is recorded for an agent started after this one.
    var lockerRecord: LockerRecord?
    /// A locker started by an earlier agent (not our child).
    var adoptedLocker: pid_t?
    /// Taken when the agent starts, before any client can use descriptors up.
    private let reserve = DescriptorReserve()

    init(now: @escaping () -> MonotonicInstant = { SystemClock.now().monotonic }) {
        self.now = now
    }

    var lockerPid: pid_t? { running.first { $0.value.role == .locker }?.key ?? adoptedLocker }
    /// The running locker when it is this process's own child.
    var childLockerPid: pid_t? { running.first { $0.value.role == .locker }?.key }

    /// A locker that is already this process's child: the one an earlier image of the
    /// agent started before it executed this one in its place (`reload`).
    func takeInheritedLocker(_ pid: pid_t) {
        running[pid] = Child(role: .locker, stop: .never)
        lockerRecord?.save(pid)
    }

    /// Starts a child; returns how it ended if it could not be started.
    func start(_ role: ProcessRole, _ request: SpawnRequest) -> ProcessEnd? {
        if role == .locker, let pid = lockerPid {
            // The state machine never asks for this; refuse anyway, a second locker
            // on top of the first is how screens end up unlockable or unlocked.
            Log.write(.error, "refusing to start a second locker while pid \(pid) runs")
            return nil
        }
        // Even when clients have used up every descriptor, the child starts and the
        // locker is recorded.
        let started: Result<pid_t, SystemError> = reserve.whileReleased {
            let result = Result { () throws(SystemError) in try request.spawn() }
            if role == .locker, case .success(let pid) = result { lockerRecord?.save(pid) }
            return result
        }
        let pid: pid_t
        switch started {
        case .success(let child): pid = child
        case .failure(let error): return .failedToStart(String(cString: strerror(error.code)))
        }
        running[pid] = Child(role: role, stop: request.stop)
        Log.debug("started \(role) as pid \(pid): \(request.arguments.joined(separator: " "))")
        return nil
    }

    /// Collects every child that has ended.
    func reap() -> [(ProcessRole, ProcessEnd)] {
        var ended: [(ProcessRole, ProcessEnd)] = []
        // Only our own: every child the agent has is one it started here.
        for pid in running.keys {
            var status: Int32 = 0
            var reaped = waitpid(pid, &status, WNOHANG)
            while reaped < 0 && errno == EINTR { reaped = waitpid(pid, &status, WNOHANG) }
            guard reaped == pid else { continue }
            killAt[pid] = nil
            guard let child = running.removeValue(forKey: pid) else { continue }
            if child.role == .locker { lockerRecord?.clear() }
            // The wait-status macros are not imported: exited is a zero low byte.
            let signal = status & 0x7f
            let end: ProcessEnd = signal == 0 ? .exited((status >> 8) & 0xff) : .killed(signal: signal)
            Log.debug("\(child.role) (pid \(pid)) \(end)")
            ended.append((child.role, end))
        }
        return ended
    }

    /// Asks every child in this role to stop, by its policy. Never the locker:
    /// killing it would unlock the screen.
    func terminate(_ role: ProcessRole) {
        for (pid, child) in running where child.role == role {
            guard case .terminate(let grace) = child.stop else { continue }
            Log.debug("ending \(role) (pid \(pid))")
            _ = kill(-pid, SIGTERM)
            killAt[pid] = now() + grace
        }
    }

    var deadline: MonotonicInstant? { killAt.values.min() }

    func dispatch(_ events: PollEvents) {
        let t = now()
        for (pid, at) in killAt where at <= t {
            killAt[pid] = nil
            guard let child = running[pid] else { continue }
            Log.write(.warning, "\(child.role) (pid \(pid)) did not stop on SIGTERM; killing its process group")
            _ = kill(-pid, SIGKILL)
        }
    }
}
