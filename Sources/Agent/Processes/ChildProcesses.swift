import CLinux
import Glibc
import IdleCore
import Platform

/// The agent's children by role, each with how it may be stopped. A source of
/// its own: a hook asked to stop gets SIGKILL when its grace runs out.
final class ChildProcesses: EventSource {
    private struct Child {
        var role: ProcessRole
        var stop: SpawnRequest.StopPolicy
        /// A locker killed to be replaced: no longer the locker, and its end is no news.
        var replaced = false
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

    var lockerPid: pid_t? { childLockerPid ?? adoptedLocker }
    /// The running locker when it is this process's own child.
    var childLockerPid: pid_t? { running.first { $0.value.role == .locker && !$0.value.replaced }?.key }

    /// A locker that is already this process's child: the one an earlier image of the
    /// agent started before it executed this one in its place (`reload`). The tracing
    /// of it survives the exec (the tracer is this thread, not the image); an image
    /// that did not trace it traces it now.
    func takeInheritedLocker(_ pid: pid_t) {
        running[pid] = Child(role: .locker, stop: .never)
        lockerRecord?.save(pid)
        if xil_tracer_of(pid) != getpid() { trace(pid) }
    }

    /// The locker is traced by the agent (ptrace, seized): no other process of the user
    /// can attach a debugger to it and make it exit 0 (the kernel allows one tracer),
    /// and a stop signal sent to it is dropped (`reap`), so that it cannot be frozen
    /// behind its window. Always, policy or not: a locker runs the same traced or not.
    /// Seized after the spawn: the child may have exec'd already, which changes nothing
    /// (the agent's own child, same user). Never with PTRACE_O_EXITKILL: the locker
    /// outlives the agent. A seize that fails is said, and the lock goes on.
    private func trace(_ pid: pid_t) {
        guard xil_trace_seize(pid) != 0 else { return }
        let reason = String(cString: strerror(errno))
        let tracer = xil_tracer_of(pid)
        if tracer > 0 && tracer != getpid() {
            Log.write(.error, "the locker (pid \(pid)) is traced by pid \(tracer) (\(processName(tracer))): it can be made to exit 0 without a password")
        } else {
            Log.write(.warning, "cannot trace the locker (pid \(pid)): \(reason); it runs untraced (another process of this user may stop it or attach a debugger)")
        }
    }

    /// Under the policy, a locker that does not cover the screen: its process group is
    /// killed (SIGKILL) at once, and it is no longer the locker, so that the next one
    /// can start now; its end, when reaped, is no news.
    func killLocker() {
        guard let pid = childLockerPid else { return }
        running[pid]?.replaced = true
        lockerRecord?.clear()
        Log.debug("killing the locker (pid \(pid)) and its process group")
        // Its own session and process group (the spawn's setsid): the group holds what it started.
        _ = kill(-pid, SIGKILL)
        _ = kill(pid, SIGKILL)
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
        if role == .locker { trace(pid) }
        return nil
    }

    /// Collects every child that has ended.
    func reap() -> [(ProcessRole, ProcessEnd)] {
        var ended: [(ProcessRole, ProcessEnd)] = []
        // Only our own: every child the agent has is one it started here.
        for pid in Array(running.keys) {
            // A traced locker's stops show here too, each handled, never taken for an
            // end: looked at again until nothing more is waiting.
            var value: Int32 = 0
            var end: ProcessEnd?
            waiting: while true {
                switch xil_child_wait(pid, &value) {
                case XIL_WAIT_EXITED: end = .exited(value)
                case XIL_WAIT_KILLED: end = .killed(signal: value)
                case XIL_WAIT_STOPPED:
                    Log.write(.warning, "\(running[pid]?.role.description ?? "child") (pid \(pid)) was sent a stop signal (\(value)): dropped, it keeps running")
                    continue waiting
                case XIL_WAIT_OTHER: continue waiting
                default: break
                }
                break waiting
            }
            guard let end else { continue }
            killAt[pid] = nil
            guard let child = running.removeValue(forKey: pid) else { continue }
            Log.debug("\(child.role) (pid \(pid)) \(end)\(child.replaced ? " (replaced)" : "")")
            if child.replaced { continue }
            if child.role == .locker { lockerRecord?.clear() }
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
