import CLinux
import Glibc
import IdleCore
import Platform

/// Where the control socket of this user's agent on this display lives.
enum SocketPath {
    /// The socket path and, for the default location, the private directory holding it.
    static func resolve(_ given: String?) throws(AgentError) -> (path: String, directory: String?) {
        if let given { return (given, nil) }
        guard let display = environment("DISPLAY"), !display.isEmpty else {
            throw .unavailable("DISPLAY is not set: cannot tell which agent to talk to (give --socket PATH)")
        }
        // One agent per user and display, whatever its spelling: ":0", ":0.0", "unix:0"
        // all name display 0 (socket "0.sock"); "host:1.0" is "host_1".
        guard let parsed = DisplayName(display) else {
            throw .unavailable("DISPLAY '\(display)' is not an X display name (e.g. :0)")
        }
        let directory = defaultDirectory
        return ("\(directory)/\(parsed.socketName).sock", directory)
    }

    /// Where this user's agents keep their sockets.
    static var defaultDirectory: String {
        if let runtime = environment("XDG_RUNTIME_DIR"), runtime.hasPrefix("/") { return "\(runtime)/xidlelock" }
        // Without a runtime directory: a directory of our own in /tmp, checked (by
        // `ensurePrivate`) to be ours and private before anything is put in it.
        return "/tmp/xidlelock-\(getuid())"
    }

    /// The socket of this user's agent on `display` (another session's), where agents
    /// use the default place; nil for a name that is no display.
    static func ofDisplay(_ display: String) -> String? {
        DisplayName(display).map { "\(defaultDirectory)/\($0.socketName).sock" }
    }

    /// Creates the directory with mode 0700, or checks that the existing one is a real
    /// directory owned by this user that nobody else can enter.
    static func ensurePrivate(_ directory: String) throws(AgentError) {
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw .failed("cannot create the socket directory \(directory): \(String(cString: strerror(errno)))")
        }
        if let problem = problem(with: directory) { throw .failed(problem) }
    }

    /// Why `directory` cannot hold the socket, without changing anything (for
    /// `doctor`); nil when it can, or when it is missing and could be made.
    static func problem(with directory: String) -> String? {
        var info = stat()
        guard lstat(directory, &info) == 0 else {
            let code = errno
            guard code == ENOENT else {
                return "cannot inspect the socket directory \(directory): \(String(cString: strerror(code)))"
            }
            // Missing: an agent makes it, if it can write where it goes.
            let parent = directory.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
            guard access(parent.isEmpty ? "/" : parent, W_OK | X_OK) == 0 else {
                return "cannot create the socket directory \(directory): \(String(cString: strerror(errno)))"
            }
            return nil
        }
        let isDirectory = info.st_mode & S_IFMT == S_IFDIR
        if info.st_uid != getuid() {
            // Someone made it first (in /tmp anyone can): never use another user's directory.
            let owner = getpwuid(info.st_uid).map { String(cString: $0.pointee.pw_name) } ?? "uid \(info.st_uid)"
            return "refusing the socket directory \(directory): it belongs to \(owner), not to you (remove it, or set XDG_RUNTIME_DIR, or give --socket PATH)"
        }
        guard isDirectory, info.st_mode & 0o077 == 0 else {
            return "refusing the socket directory \(directory): it must be a directory owned by you with mode 0700 (it has mode \(String(info.st_mode & 0o7777, radix: 8)), owner \(info.st_uid))"
        }
        return nil
    }

    static func environment(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }
}
