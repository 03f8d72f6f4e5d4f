import Glibc
import IdleCore
import Platform

/// `xidlelock guard`: execs root's daemon, `xidlelock-guard`, its own small executable
/// (no X, audio or card code), telling it this executable is the installed agent.
public enum GuardDaemon {
    /// Where the daemon is, beside this executable: the same directory (a build tree),
    /// or `../libexec` (an installed `bin/xidlelock`).
    static func path(beside executable: String) -> String? {
        let directory = executable.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        let candidates = [directory + "/xidlelock-guard", directory + "/../libexec/xidlelock-guard"]
        return candidates.first { access($0, X_OK) == 0 }
    }

    public static func exec(_ options: GuardOptions) throws(AgentError) -> Never {
        guard let executable = FileIO.linkTarget("/proc/self/exe") else {
            throw .failed("cannot read this executable's path (/proc/self/exe) to find xidlelock-guard beside it")
        }
        let agent = FileIO.withoutDeleted(executable)
        guard let daemon = path(beside: agent) else {
            throw .failed("xidlelock-guard is not installed beside \(agent) (looked in its directory and ../libexec)")
        }
        let argv = [daemon] + options.daemonArguments(agent: agent)
        var cArgs = argv.map { strdup($0) } + [nil]
        execv(daemon, &cArgs)
        throw .failed("cannot run \(daemon): \(String(cString: strerror(errno)))")
    }
}
