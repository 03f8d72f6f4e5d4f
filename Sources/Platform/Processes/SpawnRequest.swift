import CLinux
import Glibc
import IdleCore

/// Everything about starting one child, as a value: what to run, what it gets,
/// and how it is stopped. Run by one C function between fork and exec
/// (`xil_spawn`), which resets signals and reports exec failures.
package struct SpawnRequest {
    package enum Program: Equatable {
        /// `/bin/sh -c COMMAND`, as every anchor tool runs hooks.
        case shell(String)
        /// A program searched in PATH, with its arguments (argv[0] first).
        case argv([String])
    }

    /// How the agent may stop the child.
    package enum StopPolicy: Equatable {
        /// Never: the locker. Killing it would unlock the screen.
        case never
        /// SIGTERM to its process group, then SIGKILL after the grace if it is still there.
        case terminate(grace: Millis)
    }

    package var program: Program
    /// Added to the agent's environment, replacing variables of the same name.
    package var environment: [EnvironmentVariable]
    /// Descriptors for this child alone, at the given numbers (the logind sleep
    /// delay for a locker that knows the protocol). Every other descriptor is closed.
    package var passedDescriptors: [(from: Int32, to: Int32)] = []
    /// A session of its own: the terminal's Ctrl-C and the agent's exit never reach it.
    package var newSession: Bool
    /// stdin from /dev/null and stdout onto the agent's stderr (the log); off for
    /// a foreground command (`inhibit -- CMD`), which keeps the caller's.
    package var detachedStreams: Bool
    package var stop: StopPolicy
    /// The whole environment to start from; nil: the agent's own. The guard gives a
    /// clean one (never the user's): the locker then sees nothing the user set.
    package var baseEnvironment: [String]?
    /// The guard (root) runs the session's locker as the session's user.
    package var runAs: User?

    package struct User {
        package var uid: uid_t
        package var gid: gid_t
        package var groups: [gid_t]
        package var home: String
        package init(uid: uid_t, gid: gid_t, groups: [gid_t], home: String) {
            (self.uid, self.gid, self.groups, self.home) = (uid, gid, groups, home)
        }
    }

    package init(program: Program, environment: [EnvironmentVariable] = [], newSession: Bool = true,
                 detachedStreams: Bool = true, stop: StopPolicy = .terminate(grace: .seconds(5))) {
        self.program = program
        self.environment = environment
        self.newSession = newSession
        self.detachedStreams = detachedStreams
        self.stop = stop
    }

    /// The argv the child runs.
    package var arguments: [String] {
        switch program {
        case .shell(let command): ["sh", "-c", command]
        case .argv(let argv): argv
        }
    }

    /// The whole environment of the child: the agent's own, without its XIDLELOCK_
    /// variables (say it was started from a hook: they would describe another
    /// event), with `environment` added.
    package static func childEnvironment(base: [String], adding additions: [EnvironmentVariable]) -> [String] {
        let added = Set(additions.map(\.name))
        let kept = base.filter { entry in
            let name = entry.prefix { $0 != "=" }
            return !name.hasPrefix("XIDLELOCK_") && !added.contains(String(name))
        }
        return kept + additions.map { "\($0.name)=\($0.value)" }
    }

    /// The agent's environment now.
    package static func currentEnvironment() -> [String] {
        var entries: [String] = []
        var entry = environ
        while let pointer = entry.pointee {
            entries.append(String(cString: pointer))
            entry += 1
        }
        return entries
    }

    /// Starts the child; returns its pid.
    package func spawn() throws(SystemError) -> pid_t {
        let env = SpawnRequest.childEnvironment(base: baseEnvironment ?? SpawnRequest.currentEnvironment(), adding: environment)
        var pid: pid_t = 0
        // A shell command runs /bin/sh itself; a program is searched in PATH.
        let (path, searchPath): (String, Int32) = switch program {
        case .shell: ("/bin/sh", 0)
        case .argv(let argv): (argv.first ?? "", 1)
        }
        let passed = passedDescriptors.map { xil_passed_fd(from: $0.from, to: $0.to) }
        let err = withCStrings(arguments) { argv in
            withCStrings(env) { envp in
                passed.withUnsafeBufferPointer { fds in
                    (runAs?.groups ?? []).withUnsafeBufferPointer { groups in
                        var request = xil_spawn_request()
                        request.search_path = searchPath
                        request.argv = argv
                        request.envp = envp
                        request.new_session = newSession ? 1 : 0
                        request.stdin_null = detachedStreams ? 1 : 0
                        request.stdout_to_stderr = detachedStreams ? 1 : 0
                        request.fds = fds.baseAddress
                        request.n_fds = Int32(fds.count)
                        if let user = runAs {
                            request.set_user = 1
                            request.uid = user.uid
                            request.gid = user.gid
                            request.groups = groups.baseAddress
                            request.n_groups = Int32(groups.count)
                        }
                        return path.withCString { cPath in
                            (runAs?.home ?? "/").withCString { home in
                                request.path = cPath
                                request.directory = home
                                return xil_spawn(&request, &pid)
                            }
                        }
                    }
                }
            }
        }
        guard err == 0 else { throw SystemError("exec \(path)", err) }
        return pid
    }
}

/// Calls `body` with a NULL-terminated array of NUL-terminated copies of `strings`.
package func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let copies: [UnsafePointer<CChar>?] = strings.map { UnsafePointer(strdup($0)) } + [nil]
    defer { for copy in copies { free(UnsafeMutablePointer(mutating: copy)) } }
    return copies.withUnsafeBufferPointer { body($0.baseAddress!) }
}
