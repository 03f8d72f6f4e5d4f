import Glibc

/// Reads lines from a byte stream, refusing lines longer than a bound.
package struct LineBuffer {
    private var bytes: [UInt8] = []
    package let limit: Int

    package init(limit: Int) { self.limit = limit }

    /// True when more than `limit` bytes wait without a newline.
    package var overflowed: Bool { bytes.count > limit }
    /// True when part of a line waits for its end.
    package var holdsPartialLine: Bool { !bytes.isEmpty }

    package mutating func append(_ chunk: UnsafeRawBufferPointer) { bytes.append(contentsOf: chunk) }

    package mutating func nextLine() -> String? {
        guard let newline = bytes.firstIndex(of: 0x0A) else { return nil }
        var line = bytes[..<newline]
        if line.last == 0x0D { line = line.dropLast() }
        let text = String(decoding: line, as: UTF8.self)
        bytes.removeSubrange(...newline)
        return text
    }
}

/// What one read of a non-blocking descriptor into a `LineBuffer` found.
package enum StreamRead: Equatable {
    case data
    case wouldBlock
    /// The other end closed, or the read failed: no more lines will come.
    case ended
}

extension LineBuffer {
    /// One read of what `fd` holds now, through `Syscall` (EINTR retried, EAGAIN a value).
    package mutating func read(from fd: Int32, chunk size: Int = 4096) -> StreamRead {
        var chunk = [UInt8](repeating: 0, count: size)
        let result = try? chunk.withUnsafeMutableBytes { buffer throws(SystemError) in
            try Syscall.nonBlocking("read") { Glibc.read(fd, buffer.baseAddress, buffer.count) }
        }
        switch result {
        case .done(let n)? where n > 0:
            chunk.withUnsafeBytes { append(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
            return .data
        case .wouldBlock?: return .wouldBlock
        default: return .ended
        }
    }
}
