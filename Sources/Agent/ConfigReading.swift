import Glibc
import IdleCore

extension ConfigSources {
    /// The files of this machine and this process's environment. A release build reads
    /// the system's config and the policy from /etc/xidlelock only: no flag or variable
    /// moves the policy. A debug build (the tests') takes the directory from
    /// XIDLELOCK_TEST_ETC, so that tests can give a policy without touching /etc.
    public static var thisMachine: ConfigSources {
        #if DEBUG
        let directory = getenv("XIDLELOCK_TEST_ETC").map { String(cString: $0) } ?? "/etc/xidlelock"
        #else
        let directory = "/etc/xidlelock"
        #endif
        return ConfigSources(systemDirectory: directory, read: readConfigFile, variable: { name in
            getenv(name).map { String(cString: $0) }
        })
    }

    /// Config files are small: 64 KiB is far beyond any real one, and a bound keeps a
    /// mistaken path (a device, a huge log) from hanging or bloating the agent.
    static let largestFile = 64 * 1024
}

@Sendable private func readConfigFile(_ path: String) -> FileContents {
    let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
    guard fd >= 0 else {
        let code = errno
        return code == ENOENT ? .missing : .unreadable(String(cString: strerror(code)))
    }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0 else { return .unreadable(String(cString: strerror(errno))) }
    guard info.st_mode & S_IFMT == S_IFREG else { return .unreadable("not a regular file") }
    guard Int(info.st_size) <= ConfigSources.largestFile else {
        return .unreadable("larger than \(ConfigSources.largestFile / 1024) KiB")
    }
    var bytes = [UInt8](repeating: 0, count: Int(info.st_size) + 1)
    var count = 0
    while count < bytes.count {
        let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + count, $0.count - count) }
        if n < 0 && errno == EINTR { continue }
        guard n >= 0 else { return .unreadable(String(cString: strerror(errno))) }
        if n == 0 { break }
        count += n
    }
    guard count <= ConfigSources.largestFile else { return .unreadable("larger than \(ConfigSources.largestFile / 1024) KiB") }
    guard let text = String(validating: bytes[..<count], as: UTF8.self) else { return .unreadable("not UTF-8 text") }
    return .text(text)
}
