import Glibc
import IdleCore
import Platform

/// `xidlelock guard`: execs root's daemon, `xidlelock-guard`, its own small executable
/// (no X, audio or card code), telling it this executable is the installed agent.
public enum GuardDaemon {
    public static func exec(_ options: GuardOptions) throws(AgentError) -> Never {
        guard let agent = FileIO.ownExecutable else {
            throw .failed("cannot read this executable's path (/proc/self/exe) to find xidlelock-guard beside it")
        }
        // The same directory (a build tree), or `../libexec` (an installed `bin/xidlelock`).
        guard let daemon = FileIO.beside(agent, ["xidlelock-guard", "../libexec/xidlelock-guard"], mode: X_OK) else {
            throw .failed("xidlelock-guard is not installed beside \(agent) (looked in its directory and ../libexec)")
        }
        let argv = [daemon] + options.daemonArguments(agent: agent)
        var cArgs = argv.map { strdup($0) } + [nil]
        execv(daemon, &cArgs)
        throw .failed("cannot run \(daemon): \(String(cString: strerror(errno)))")
    }
}
