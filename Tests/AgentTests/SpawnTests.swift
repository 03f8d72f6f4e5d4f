@testable import Agent
import Glibc
import IdleCore
import Testing

/// Waits (up to 10 s) for a child to end and returns its raw wait status.
func waitForChild(_ pid: pid_t) -> Int32? {
    var status: Int32 = 0
    for _ in 0..<1000 {
        let r = waitpid(pid, &status, WNOHANG)
        if r == pid { return status }
        if r < 0 { return nil }
        usleep(10_000)
    }
    return nil
}

/// A scratch directory for one test.
func scratchDirectory() -> String {
    var template = Array("/tmp/xidlelock-agenttests-XXXXXX".utf8CString)
    return template.withUnsafeMutableBufferPointer { buffer in
        _ = mkdtemp(buffer.baseAddress!)
        return String(cString: buffer.baseAddress!)
    }
}

func readFile(_ path: String) -> String? {
    FileIO.readSmallFile(path, limit: 65536).map { String(decoding: $0, as: UTF8.self) }
}

@Suite("Spawn as a value: one C function between fork and exec", .serialized)
struct SpawnTests {
    @Test("an exec failure comes back as an error naming the program, and no process is left")
    func execFailure() {
        let request = SpawnRequest(program: .argv(["/nonexistent/locker", "-n"]))
        #expect(throws: SystemError("exec /nonexistent/locker", ENOENT)) { try request.spawn() }
    }

    @Test("a passed descriptor reaches this child alone, at its number; no other descriptor above 2")
    func passedDescriptor() throws {
        let dir = scratchDirectory()
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        defer { close(fds[0]); close(fds[1]) }
        var request = SpawnRequest(program: .shell("ls /proc/self/fd > \(dir)/fds; echo hello >&7"))
        request.passedDescriptors = [(from: fds[1], to: 7)]
        let pid = try request.spawn()
        #expect(waitForChild(pid) == 0)
        var buffer = [UInt8](repeating: 0, count: 16)
        let n = read(fds[0], &buffer, 16)
        #expect(String(decoding: buffer[..<max(n, 0)], as: UTF8.self) == "hello\n")
        // ls itself opens one descriptor for the directory it lists (3).
        let open = (readFile("\(dir)/fds") ?? "").split(separator: "\n").compactMap { Int($0) }.sorted()
        #expect(open == [0, 1, 2, 3, 7], "\(open)")
        var plain = SpawnRequest(program: .shell("ls /proc/self/fd > \(dir)/fds2"))
        plain.passedDescriptors = []
        #expect(waitForChild(try plain.spawn()) == 0)
        let none = (readFile("\(dir)/fds2") ?? "").split(separator: "\n").compactMap { Int($0) }.sorted()
        #expect(none == [0, 1, 2, 3], "another child never sees the passed descriptor: \(none)")
    }

    @Test("the child starts with default signal dispositions, an empty mask and a session of its own")
    func signalsAndSession() throws {
        let dir = scratchDirectory()
        signal(SIGPIPE, SIG_IGN)
        signal(SIGUSR1, SIG_IGN)
        var blocked = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGUSR2)
        sigprocmask(SIG_BLOCK, &blocked, nil)
        defer {
            sigprocmask(SIG_UNBLOCK, &blocked, nil)
            signal(SIGUSR1, SIG_DFL)
        }
        let request = SpawnRequest(program: .shell("exec grep -E '^(SigIgn|SigBlk|NSpgid|NSsid|Pid):' /proc/self/status > \(dir)/status"))
        let pid = try request.spawn()
        #expect(waitForChild(pid) == 0)
        let status = readFile("\(dir)/status") ?? ""
        func field(_ name: String) -> String? {
            status.split(separator: "\n").first { $0.hasPrefix(name + ":") }.map {
                String($0.dropFirst(name.count + 1).drop { $0 == " " || $0 == "\t" })
            }
        }
        // Bits 32 and 33 (glibc's own signals) may stay as glibc leaves them.
        let ignored = UInt64(field("SigIgn") ?? "", radix: 16).map { $0 & ~(UInt64(3) << 31) }
        #expect(ignored == 0, "ignored signals in the child: \(status)")
        #expect(UInt64(field("SigBlk") ?? "", radix: 16) == 0, "blocked signals in the child: \(status)")
        #expect(field("NSsid") == "\(pid)", "a session of its own: \(status)")
    }

    @Test("the environment: the agent's own, without its XIDLELOCK_ variables, with the event's added")
    func environment() {
        let env = SpawnRequest.childEnvironment(
            base: ["PATH=/bin", "XIDLELOCK_EVENT=stale", "HOME=/root", "XIDLELOCK_IDLE_MS=1"],
            adding: [EnvironmentVariable("XIDLELOCK_EVENT", "lock"), EnvironmentVariable("HOME", "/home/x")])
        #expect(env == ["PATH=/bin", "XIDLELOCK_EVENT=lock", "HOME=/home/x"])
    }

    @Test("a simple locker command is exec'ed, so its real end reaches the agent; others run as given",
          arguments: [
              ("i3lock -n -c 000000", true),
              ("i3lock -n -i \"$HOME/a b.png\"", true),
              ("xsecurelock 2>/dev/null", true),
              ("i3lock -i $(cat ~/.lockimage)", true),
              ("i3lock; echo done", false),
              ("i3lock && notify-send x", false),
              ("i3lock | tee log", false),
              ("(i3lock)", false),
              ("cd / && i3lock", false),
              ("FOO=1 i3lock", false),
              ("i3lock 'a;b'", true),
              ("i3lock `date`", false),
          ])
    func lockerForm(command: String, simple: Bool) {
        #expect(ShellCommand.isSimple(command) == simple)
        #expect(ShellCommand.lockerForm(command) == (simple ? "exec " + command : command))
    }

    @Test("SIGKILL to an exec'ed locker reaches the agent as the signal, not as the shell's 137")
    func execedLockerSignal() throws {
        let request = SpawnRequest(program: .shell(ShellCommand.lockerForm("sleep 60")), stop: .never)
        let pid = try request.spawn()
        usleep(50_000)
        #expect(readFile("/proc/\(pid)/comm") == "sleep\n")
        kill(pid, SIGKILL)
        let status = waitForChild(pid)
        #expect(status.map { $0 & 0x7f } == SIGKILL)
    }
}

@Suite("Children: stopped by their policy, the locker never", .serialized)
struct ChildProcessesTests {
    @Test("a hook that ignores SIGTERM gets SIGKILL when its grace runs out")
    func graceThenKill() throws {
        let clock = TestClock()
        let children = ChildProcesses(now: { clock.now })
        let hook = SpawnRequest(program: .shell("trap '' TERM; while :; do sleep 0.05; done"), stop: .terminate(grace: .seconds(5)))
        #expect(children.start(.stage(0), hook) == nil)
        usleep(100_000)
        children.terminate(.stage(0))
        #expect(children.deadline == clock.now + .seconds(5))
        clock.now += .seconds(5)
        children.dispatch([])
        var ended: [(ProcessRole, ProcessEnd)] = []
        for _ in 0..<500 where ended.isEmpty {
            ended = children.reap()
            usleep(10_000)
        }
        #expect(ended.count == 1)
        #expect(ended.first?.1 == .killed(signal: SIGKILL))
        #expect(children.deadline == nil)
    }

    @Test("terminate never touches the locker, and a second locker is refused")
    func lockerIsNeverStopped() throws {
        let children = ChildProcesses()
        let locker = SpawnRequest(program: .shell("exec sleep 60"), stop: .never)
        #expect(children.start(.locker, locker) == nil)
        let pid = try #require(children.lockerPid)
        children.terminate(.locker)
        #expect(children.start(.locker, locker) == nil)
        usleep(100_000)
        #expect(kill(pid, 0) == 0, "the locker still runs")
        #expect(children.reap().isEmpty, "no second locker was started (nothing ended)")
        kill(pid, SIGKILL)
        _ = waitForChild(pid)
    }
}
