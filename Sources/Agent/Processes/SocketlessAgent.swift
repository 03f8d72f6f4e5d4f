import Glibc
import IdleCore
import Platform

/// For `doctor`, where no agent answers because none can make its control socket:
/// an agent of this user for this display that runs without one. Found in /proc by
/// its name, its arguments (the agent's, not a client command's) and its DISPLAY.
/// Only this user's processes are looked at: another user cannot plant one here.
enum SocketlessAgent {
    static func find(display: String) -> pid_t? {
        guard let wanted = DisplayName(display) else { return nil }
        for name in FileIO.entries(of: "/proc") {
            guard let pid = pid_t(name), pid != getpid() else { continue }
            var info = stat()
            guard stat("/proc/\(pid)", &info) == 0, info.st_uid == getuid(), processName(pid) == "xidlelock",
                  let cmdline = FileIO.readSmallFile("/proc/\(pid)/cmdline", limit: 4096),
                  let environ = FileIO.readSmallFile("/proc/\(pid)/environ", limit: 256 * 1024)
            else { continue }
            let arguments = cmdline.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            guard isAgent(arguments.dropFirst().first) else { continue }
            let variables = environ.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            guard let own = variables.first(where: { $0.hasPrefix("DISPLAY=") }).flatMap({ DisplayName(String($0.dropFirst(8))) }),
                  own == wanted
            else { continue }
            return pid
        }
        return nil
    }

    /// Whether a command line's first argument starts the agent (no argument, `run`,
    /// or an option), not a client command, `doctor`, `idle`, help or the version.
    static func isAgent(_ first: String?) -> Bool {
        guard let first else { return true }
        if ["--help", "-h", "--version", "-V"].contains(first) { return false }
        return first == "run" || first.hasPrefix("-")
    }
}
