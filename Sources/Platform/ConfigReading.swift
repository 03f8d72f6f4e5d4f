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
    package static let largestFile = 64 * 1024
}

/// Reads a config file or the policy without ever waiting or opening a device: the
/// path must name a regular file (a FIFO would block an open or a read, and opening a
/// device can have effects of its own), opened without blocking, read up to the bound.
/// A path that exists in any form but cannot be read is `.unreadable`, with the reason.
@Sendable private func readConfigFile(_ path: String) -> FileContents {
    func failure(_ code: Int32) -> FileContents {
        if code == ENOENT {
            // A symlink to nothing exists all the same: someone put it there.
            var link = stat()
            return lstat(path, &link) == 0 ? .unreadable("it is a symbolic link to a missing file") : .missing
        }
        return .unreadable(String(cString: strerror(code)))
    }
    var info = stat()
    // Checked before the open too, so that no FIFO or device is ever opened.
    guard stat(path, &info) == 0 else { return failure(errno) }
    if let kind = FileKind.notRegular(info) { return .unreadable("it is \(kind), not a regular file") }
    let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
    guard fd >= 0 else { return failure(errno) }
    defer { close(fd) }
    guard fstat(fd, &info) == 0 else { return .unreadable(String(cString: strerror(errno))) }
    if let kind = FileKind.notRegular(info) { return .unreadable("it is \(kind), not a regular file") }
    let tooLarge = FileContents.unreadable("it is larger than \(ConfigSources.largestFile / 1024) KiB")
    guard Int(info.st_size) <= ConfigSources.largestFile else { return tooLarge }
    // One byte more than the bound: a file that grew since fstat is seen to be too large.
    var bytes = [UInt8](repeating: 0, count: ConfigSources.largestFile + 1)
    var count = 0
    while count < bytes.count {
        let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + count, $0.count - count) }
        if n < 0 && errno == EINTR { continue }
        guard n >= 0 else { return .unreadable(String(cString: strerror(errno))) }
        if n == 0 { break }
        count += n
    }
    guard count <= ConfigSources.largestFile else { return tooLarge }
    return .bytes(Array(bytes[..<count]))
}

package enum FileKind {
    /// What a file that is not a regular file is, in words; nil for a regular file.
    package static func notRegular(_ info: stat) -> String? {
        switch info.st_mode & S_IFMT {
        case S_IFREG: nil
        case S_IFDIR: "a directory"
        case S_IFIFO: "a FIFO"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFSOCK: "a socket"
        default: "an unknown kind of file"
        }
    }
}
