import CLinux
import Glibc
import Platform

/// `xidlelock inhibit -- CMD ARGS`: runs CMD in the foreground, forwards the
/// signals a terminal or a service manager sends, and exits as CMD did.
enum InhibitingCommand {
    static func run(_ argv: [String]) throws(AgentError) -> Int32 {
        let forwarded: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH]
        let signals = (forwarded + [SIGCHLD, 0]).withUnsafeBufferPointer { xil_signalfd_for($0.baseAddress) }
        guard signals >= 0 else { throw .failed("cannot watch signals: \(String(cString: strerror(errno)))") }
        // In the caller's session and process group, with its standard streams: a
        // foreground command, unlike the agent's hooks.
        let request = SpawnRequest(program: .argv(argv), newSession: false, detachedStreams: false)
        let pid: pid_t
        do {
            pid = try request.spawn()
        } catch {
            throw .failed("inhibit: cannot run '\(argv[0])': \(String(cString: strerror(error.code)))")
        }
        while true {
            var pfd = pollfd(fd: signals, events: Int16(POLLIN), revents: 0)
            if poll(&pfd, 1, -1) < 0 && errno != EINTR { break }
            while case let signal = xil_signalfd_read(signals), signal > 0 {
                if signal != SIGCHLD {
                    _ = kill(pid, signal)
                    continue
                }
                var status: Int32 = 0
                var killedBy: Int32 = 0
                while true {
                    let ended = xil_reap_one(&status, &killedBy)
                    if ended == pid { return killedBy != 0 ? 128 + killedBy : status }
                    if ended <= 0 { break }
                }
            }
        }
        throw .failed("inhibit: lost track of '\(argv[0])'")
    }
}
