import CLinux
import Glibc
import IdleCore

/// The agent's child processes, by role. Every child runs `/bin/sh -c` in its own
/// session, so it survives the agent and can be stopped as a whole process group.
struct Children {
    private(set) var running: [pid_t: ProcessRole] = [:]
    /// Where the running locker is recorded for an agent started after this one.
    var lockerRecord: LockerRecord?
    /// A locker started by an earlier agent, watched through a pidfd.
    var adoptedLocker: (pid: pid_t, pidfd: Int32)?

    var lockerPid: pid_t? { running.first { $0.value == .locker }?.key ?? adoptedLocker?.pid }

    /// Starts a command; returns how it ended if it could not be started.
    mutating func run(_ role: ProcessRole, command: String, environment: [EnvironmentVariable]) -> ProcessEnd? {
        if role == .locker, let pid = lockerPid {
            // The state machine never asks for this; refuse anyway, a second locker
            // on top of the first is how screens end up unlockable or unlocked.
            Log.write(.error, "refusing to start a second locker while pid \(pid) runs")
            return nil
        }
        var pid: pid_t = 0
        let settings = environment.map { "\($0.name)=\($0.value)" }
        let err = withCStrings(settings) { env in
            xil_spawn_shell(command, env.baseAddress, Int32(env.count), &pid)
        }
        guard err == 0 else {
            return .failedToStart(String(cString: strerror(err)))
        }
        running[pid] = role
        if role == .locker { lockerRecord?.save(pid) }
        Log.debug("started \(role) as pid \(pid): \(command)")
        return nil
    }

    /// Collects every child that has ended.
    mutating func reap() -> [(ProcessRole, ProcessEnd)] {
        var ended: [(ProcessRole, ProcessEnd)] = []
        var status: Int32 = 0
        var signal: Int32 = 0
        while true {
            let pid = xil_reap_one(&status, &signal)
            guard pid > 0 else { break }
            guard let role = running.removeValue(forKey: pid) else { continue }
            if role == .locker { lockerRecord?.remove() }
            let end: ProcessEnd = signal != 0 ? .killed(signal: signal) : .exited(status)
            Log.debug("\(role) (pid \(pid)) \(end)")
            ended.append((role, end))
        }
        return ended
    }

    /// The adopted locker has ended: its exit status cannot be known.
    mutating func adoptedLockerEnded() -> ProcessEnd? {
        guard let adopted = adoptedLocker else { return nil }
        close(adopted.pidfd)
        adoptedLocker = nil
        lockerRecord?.remove()
        Log.write(.info, "the earlier agent's locker (pid \(adopted.pid)) has ended; its exit status cannot be known")
        return .exited(0)
    }

    /// Ends the process group of every child in this role. Never the locker:
    /// killing it would unlock the screen.
    func terminate(_ role: ProcessRole) {
        guard role != .locker else { return }
        for (pid, r) in running where r == role {
            Log.debug("ending \(role) (pid \(pid))")
            _ = kill(-pid, SIGTERM)
        }
    }
}

/// Calls `body` with NUL-terminated copies of `strings`, freed afterwards.
func withCStrings<R>(_ strings: [String], _ body: (UnsafeBufferPointer<UnsafePointer<CChar>?>) -> R) -> R {
    let copies = strings.map { UnsafePointer(strdup($0)) }
    defer { for copy in copies { free(UnsafeMutablePointer(mutating: copy)) } }
    return copies.withUnsafeBufferPointer(body)
}
