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
