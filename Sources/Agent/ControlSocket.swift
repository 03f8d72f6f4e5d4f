import CLinux
import Glibc
import IdleCore

/// Where the control socket of this user's agent on this display lives.
enum SocketPath {
    /// The socket path and, for the default location, the private directory holding it.
    static func resolve(_ given: String?) throws(AgentError) -> (path: String, directory: String?) {
        if let given { return (given, nil) }
        guard let display = environment("DISPLAY"), !display.isEmpty else {
            throw .unavailable("DISPLAY is not set: cannot tell which agent to talk to (give --socket PATH)")
        }
        // ":0" → "0", "host:1.0" → "host_1.0": one agent per user and display.
        var name = display.hasPrefix(":") ? String(display.dropFirst()) : display
        name = String(name.map { $0 == "/" || $0 == ":" ? "_" : $0 })
        let directory: String
        if let runtime = environment("XDG_RUNTIME_DIR"), runtime.hasPrefix("/") {
            directory = "\(runtime)/xidlelock"
        } else {
            // Without a runtime directory: a directory of our own in /tmp, checked below
            // to be ours and private before anything is put in it.
            directory = "/tmp/xidlelock-\(getuid())"
        }
        return ("\(directory)/\(name).sock", directory)
    }

    /// Creates the directory with mode 0700, or checks that the existing one is a real
    /// directory owned by this user that nobody else can enter.
    static func ensurePrivate(_ directory: String) throws(AgentError) {
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw .failed("cannot create the socket directory \(directory): \(String(cString: strerror(errno)))")
        }
        var info = stat()
        guard lstat(directory, &info) == 0 else {
            throw .failed("cannot inspect the socket directory \(directory): \(String(cString: strerror(errno)))")
        }
        let isDirectory = info.st_mode & S_IFMT == S_IFDIR
        guard isDirectory, info.st_uid == getuid(), info.st_mode & 0o077 == 0 else {
            throw .failed("refusing the socket directory \(directory): it must be a directory owned by you with mode 0700 (it has mode \(String(info.st_mode & 0o7777, radix: 8)), owner \(info.st_uid))")
        }
    }

    static func environment(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }
}

/// Reads lines from a byte stream, refusing lines longer than a bound.
struct LineBuffer {
    private var bytes: [UInt8] = []
    let limit: Int

    init(limit: Int) { self.limit = limit }

    /// True when more than `limit` bytes wait without a newline.
    var overflowed: Bool { bytes.count > limit }

    mutating func append(_ chunk: UnsafeRawBufferPointer) { bytes.append(contentsOf: chunk) }

    mutating func nextLine() -> String? {
        guard let newline = bytes.firstIndex(of: 0x0A) else { return nil }
        var line = bytes[..<newline]
        if line.last == 0x0D { line = line.dropLast() }
        let text = String(decoding: line, as: UTF8.self)
        bytes.removeSubrange(...newline)
        return text
    }
}

/// Writes all of a buffer to a blocking fd (the client side).
func writeAll(_ fd: Int32, _ text: String) -> Bool {
    var text = text
    return text.withUTF8 { bytes in
        var rest = UnsafeRawBufferPointer(bytes)
        while !rest.isEmpty {
            let n = write(fd, rest.baseAddress, rest.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            rest = UnsafeRawBufferPointer(rebasing: rest[n...])
        }
        return true
    }
}
