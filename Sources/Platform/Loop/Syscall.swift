import Glibc

/// A failed system call: its name and errno, as a thrown value.
public struct SystemError: Error, Equatable, CustomStringConvertible {
    public let call: String
    public let code: Int32

    public init(_ call: String, _ code: Int32 = errno) {
        self.call = call
        self.code = code
    }

    public var description: String { "\(call): \(String(cString: strerror(code)))" }
}

/// What a non-blocking call did: done, or it would have had to wait.
package enum IOResult<Value> {
    case done(Value)
    case wouldBlock
}

/// The wrapper for system calls whose failure the agent acts on: EINTR is retried
/// in this one place, a failure becomes a `SystemError` naming the call, and EAGAIN
/// (for non-blocking descriptors) is a value, not an error. (Not every call goes
/// through it: see docs/development.md, How it works.)
package enum Syscall {
    /// Calls `body` until it does not fail with EINTR; -1 throws.
    @discardableResult
    package static func call<T: FixedWidthInteger>(_ name: String, _ body: () -> T) throws(SystemError) -> T {
        while true {
            let result = body()
            if result != -1 { return result }
            if errno == EINTR { continue }
            throw SystemError(name)
        }
    }

    /// As `call`, with EAGAIN/EWOULDBLOCK returned as `.wouldBlock`.
    package static func nonBlocking<T: FixedWidthInteger>(_ name: String, _ body: () -> T) throws(SystemError) -> IOResult<T> {
        do {
            return .done(try call(name, body))
        } catch where error.code == EAGAIN || error.code == EWOULDBLOCK {
            return .wouldBlock
        }
    }
}

/// A descriptor's bytes, written and read through `Syscall`.
package enum FileIO {
    /// Writes all of `bytes` to a blocking descriptor.
    package static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemError) {
        var rest = bytes
        while !rest.isEmpty {
            let n = try Syscall.call("write") { write(fd, rest.baseAddress, rest.count) }
            guard n > 0 else { throw SystemError("write", EIO) }
            rest = UnsafeRawBufferPointer(rebasing: rest[n...])
        }
    }

    /// Writes all of `text` to a blocking descriptor.
    package static func writeAll(_ fd: Int32, _ text: String) throws(SystemError) {
        var text = text
        let failure: SystemError? = text.withUTF8 { utf8 in
            do throws(SystemError) { try writeAll(fd, UnsafeRawBufferPointer(utf8)) } catch { return error }
            return nil
        }
        if let failure { throw failure }
    }

    /// Writes what a non-blocking descriptor takes now; returns how many bytes.
    package static func writeSome(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemError) -> IOResult<Int> {
        try Syscall.nonBlocking("write") { write(fd, bytes.baseAddress, bytes.count) }
    }

    /// The names in a directory (not "." and ".."); `directoriesOnly`: only those
    /// readdir reports as directories. Empty when it cannot be read.
    package static func entries(of directory: String, directoriesOnly: Bool = false) -> [String] {
        guard let handle = opendir(directory) else { return [] }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            if directoriesOnly && entry.pointee.d_type != UInt8(DT_DIR) { continue }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Where a symbolic link points (/proc/PID/exe), or nil.
    /// A /proc/PID/exe link's target as a path that can be run again: the kernel appends
    /// " (deleted)" once the file was replaced (an upgrade).
    package static func withoutDeleted(_ path: String) -> String {
        path.hasSuffix(" (deleted)") ? String(path.dropLast(" (deleted)".count)) : path
    }

    /// This process's executable, as a path it can be run again by.
    package static var ownExecutable: String? { linkTarget("/proc/self/exe").map(withoutDeleted) }

    /// The first of `relatives` (paths from `executable`'s directory) that access(2)
    /// allows for `mode`: what is installed beside it.
    package static func beside(_ executable: String, _ relatives: [String], mode: Int32) -> String? {
        let directory = executable.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        return relatives.map { directory + "/" + $0 }.first { access($0, mode) == 0 }
    }

    package static func linkTarget(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4097)
        let n = readlink(path, &buffer, 4096)
        guard n > 0 else { return nil }
        return String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Reads up to `limit` bytes of a small file (a /proc entry, a record), or nil.
    /// Read to the end: the kernel hands out /proc/PID/maps about a page per read(2),
    /// and a check that reads once sees only the first libraries (not an LD_PRELOAD's).
    package static func readSmallFile(_ path: String, limit: Int = 4096, flags: Int32 = 0) -> [UInt8]? {
        guard let fd = try? Syscall.call("open", { open(path, O_RDONLY | O_CLOEXEC | flags) }) else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: limit)
        var filled = 0
        while filled < limit {
            guard let n = try? Syscall.call("read", { buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + filled, limit - filled) } }) else {
                return nil
            }
            if n == 0 { break }
            filled += n
        }
        return Array(buffer[..<filled])
    }
}
