@testable import Agent
@testable import Platform
import CLinux
import Glibc
import IdleCore
import Testing

/// Waits (up to 10 s) for a child to end, on its pidfd, and returns its raw wait status.
func waitForChild(_ pid: pid_t) -> Int32? {
    let pidfd = xil_pidfd_open(pid)
    guard pidfd >= 0 else { return nil }
    defer { close(pidfd) }
    guard waitReadable(pidfd) else { return nil }
    var status: Int32 = 0
    return waitpid(pid, &status, 0) == pid ? status : nil
}

/// Waits (up to 10 s) for a descriptor to become readable.
func waitReadable(_ fd: Int32, timeout: Int32 = 10_000) -> Bool {
    var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    var r = poll(&pfd, 1, timeout)
    while r < 0 && errno == EINTR { r = poll(&pfd, 1, timeout) }
    return r == 1
}

/// What a child wrote to a pipe (up to 64 bytes), once it was readable: "" at end
/// of file (no process holds the write end), nil if nothing came within 10 s.
func readPipe(_ fd: Int32) -> String? {
    guard waitReadable(fd) else { return nil }
    var buffer = [UInt8](repeating: 0, count: 64)
    let n = read(fd, &buffer, buffer.count)
    return n < 0 ? nil : String(decoding: buffer[..<n], as: UTF8.self)
}

/// A pipe whose ends are closed on exec: only a descriptor passed on purpose reaches a child.
func closeOnExecPipe() -> (read: Int32, write: Int32) {
    var fds: [Int32] = [-1, -1]
    _ = pipe(&fds)
    for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
    return (fds[0], fds[1])
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
        // The locker program tells its own pid, then becomes a long sleep. The shell
        // the agent starts (dash) execs it only if lockerForm says so.
        let ready = closeOnExecPipe()
        defer { close(ready.read) }
        var request = SpawnRequest(program: .shell(ShellCommand.lockerForm("sh -c 'echo $$ >&3; exec sleep 60'")), stop: .never)
        request.passedDescriptors = [(from: ready.write, to: 3)]
        let pid = try request.spawn()
        close(ready.write)
        let program = try #require(readPipe(ready.read).flatMap { pid_t($0.dropLast()) }, "the locker program started")
        #expect(program == pid, "the agent's child is the locker program itself")
        // Killed as the user or the OOM killer would: the program, not the agent's child.
        kill(program, SIGKILL)
        let status = waitForChild(pid)
        #expect(status.map { $0 & 0x7f } == SIGKILL, "wait status \(String(describing: status))")
        if program != pid { kill(pid, SIGKILL); _ = waitForChild(pid) }
    }
}

@Suite("Children: stopped by their policy, the locker never", .serialized)
struct ChildProcessesTests {
    @Test("a hook that ignores SIGTERM gets SIGKILL when its grace runs out")
    func graceThenKill() throws {
        let clock = TestClock()
        let children = ChildProcesses(now: { clock.now })
        // The hook says when its trap is set: SIGTERM before that would end it at once.
        let ready = closeOnExecPipe()
        defer { close(ready.read) }
        var hook = SpawnRequest(program: .shell("trap '' TERM; echo ready >&3; exec 3>&-; while :; do sleep 0.05; done"),
                                stop: .terminate(grace: .seconds(5)))
        hook.passedDescriptors = [(from: ready.write, to: 3)]
        #expect(children.start(.stage(0), hook) == nil)
        close(ready.write)
        var said = pollfd(fd: ready.read, events: Int16(POLLIN), revents: 0)
        #expect(poll(&said, 1, 10_000) == 1, "the hook never said its trap was set")
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
        #expect(children.deadline == nil, "no SIGKILL is planned for the locker")
        // A second locker would say so on a pipe; refused, nothing holds its write end.
        let started = closeOnExecPipe()
        defer { close(started.read) }
        var second = SpawnRequest(program: .shell("echo started >&3"), stop: .never)
        second.passedDescriptors = [(from: started.write, to: 3)]
        #expect(children.start(.locker, second) == nil)
        close(started.write)
        #expect(readPipe(started.read) == "", "no second locker was started")
        #expect(children.lockerPid == pid)
        // A SIGTERM sent by terminate would already have decided how the locker ends
        // (a fatal signal sets the exit code when it is sent): our SIGKILL must be what ends it.
        kill(pid, SIGKILL)
        let status = waitForChild(pid)
        #expect(status.map { $0 & 0x7f } == SIGKILL, "the locker was signalled before: wait status \(String(describing: status))")
    }
}
