/// A small JSON reader and writer for the control protocol: the agent and the
/// query commands stay free of Foundation (start-up time, memory).
public enum JSONValue: Equatable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    public static func == (a: JSONValue, b: JSONValue) -> Bool {
        switch (a, b) {
        case (.null, .null): true
        case (.bool(let x), .bool(let y)): x == y
        case (.number(let x), .number(let y)): x == y
        case (.string(let x), .string(let y)): x == y
        case (.array(let x), .array(let y)): x == y
        case (.object(let x), .object(let y)): x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: false
        }
    }

    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members.first { $0.0 == key }?.1 }
        return nil
    }

    public subscript(index: Int) -> JSONValue? {
        if case .array(let items) = self, items.indices.contains(index) { return items[index] }
        return nil
    }

    public var array: [JSONValue]? { if case .array(let items) = self { items } else { nil } }
    public var string: String? { if case .string(let s) = self { s } else { nil } }
    public var bool: Bool? { if case .bool(let b) = self { b } else { nil } }
    public var number: Double? { if case .number(let n) = self { n } else { nil } }
    /// A whole number that fits in Int64, or nil.
    public var integer: Int64? {
        // Converting first keeps libm (rounded()) out of the pure core.
        guard let n = number, abs(n) < 9.0e15, Double(Int64(n)) == n else { return nil }
        return Int64(n)
    }

    /// Parses one JSON text. Nesting deeper than 32 levels is refused, so a hostile
    /// line cannot exhaust the stack.
    public init(parsing text: String) throws(JSONError) {
        var reader = JSONReader(bytes: Array(text.utf8))
        self = try reader.value(depth: 0)
        reader.skipSpace()
        guard reader.i == reader.bytes.count else { throw JSONError("unexpected text after the JSON value") }
    }

    /// Compact JSON text.
    public var text: String {
        var out = ""
        write(to: &out)
        return out
    }

    func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(let n):
            if abs(n) < 9.0e15, Double(Int64(n)) == n { out += String(Int64(n)) } else { out += String(n) }
        case .string(let s): JSONValue.quote(s, into: &out)
        case .array(let items):
            out += "["
            for (k, item) in items.enumerated() {
                if k > 0 { out += "," }
                item.write(to: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (k, (key, value)) in members.enumerated() {
                if k > 0 { out += "," }
                JSONValue.quote(key, into: &out)
                out += ":"
                value.write(to: &out)
            }
            out += "}"
        }
    }

    static func quote(_ s: String, into out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }
}

public struct JSONError: Error, Equatable, Sendable {
    public var message: String
    init(_ message: String) { self.message = message }
}

struct JSONReader {
    let bytes: [UInt8]
    var i = 0

    mutating func skipSpace() {
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 { i += 1 }
    }

    mutating func value(depth: Int) throws(JSONError) -> JSONValue {
        guard depth < 32 else { throw JSONError("nested too deeply") }
        skipSpace()
        guard i < bytes.count else { throw JSONError("unexpected end of input") }
        switch bytes[i] {
        case UInt8(ascii: "{"):
            i += 1
            var members: [(String, JSONValue)] = []
            skipSpace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
            while true {
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw JSONError("expected a string key") }
                let key = try string()
                skipSpace()
                try expect(":")
                members.append((key, try value(depth: depth + 1)))
                skipSpace()
                if try endOrComma("}") { return .object(members) }
            }
        case UInt8(ascii: "["):
            i += 1
            var items: [JSONValue] = []
            skipSpace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
            while true {
                items.append(try value(depth: depth + 1))
                skipSpace()
                if try endOrComma("]") { return .array(items) }
            }
        case UInt8(ascii: "\""):
            return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        default:
            return .number(try number())
        }
    }

    mutating func expect(_ c: Unicode.Scalar) throws(JSONError) {
        guard i < bytes.count, bytes[i] == UInt8(ascii: c) else { throw JSONError("expected '\(c)'") }
        i += 1
    }

    mutating func endOrComma(_ close: Unicode.Scalar) throws(JSONError) -> Bool {
        guard i < bytes.count else { throw JSONError("unexpected end of input") }
        if bytes[i] == UInt8(ascii: close) { i += 1; return true }
        guard bytes[i] == UInt8(ascii: ",") else { throw JSONError("expected ',' or '\(close)'") }
        i += 1
        return false
    }

    mutating func literal(_ word: String) throws(JSONError) {
        let w = Array(word.utf8)
        guard i + w.count <= bytes.count, Array(bytes[i..<i + w.count]) == w else { throw JSONError("invalid literal") }
        i += w.count
    }

    mutating func number() throws(JSONError) -> Double {
        let start = i
        while i < bytes.count, "+-0123456789.eE".utf8.contains(bytes[i]) { i += 1 }
        guard i > start, let n = Double(String(decoding: bytes[start..<i], as: UTF8.self)), n.isFinite else {
            throw JSONError("invalid value")
        }
        return n
    }

    mutating func string() throws(JSONError) -> String {
        i += 1  // opening quote
        var scalars = String.UnicodeScalarView()
        var run = i
        /// Four hex digits at `k` (and only hex digits: no sign), or nil.
        func hex4(_ k: Int) -> UInt32? {
            guard k + 4 <= bytes.count else { return nil }
            var value: UInt32 = 0
            for b in bytes[k..<k + 4] {
                guard let digit = UInt32(String(UnicodeScalar(b)), radix: 16) else { return nil }
                value = value * 16 + digit
            }
            return value
        }
        func flush(_ r: inout Int, _ end: Int, _ s: inout String.UnicodeScalarView) {
            if end > r { s.append(contentsOf: String(decoding: bytes[r..<end], as: UTF8.self).unicodeScalars) }
        }
        while i < bytes.count {
            let c = bytes[i]
            if c == UInt8(ascii: "\"") {
                flush(&run, i, &scalars)
                i += 1
                return String(scalars)
            }
            if c < 0x20 { throw JSONError("control character in a string") }
            if c == UInt8(ascii: "\\") {
                flush(&run, i, &scalars)
                i += 1
                guard i < bytes.count else { break }
                let e = bytes[i]
                i += 1
                switch e {
                case UInt8(ascii: "\""): scalars.append("\"")
                case UInt8(ascii: "\\"): scalars.append("\\")
                case UInt8(ascii: "/"): scalars.append("/")
                case UInt8(ascii: "b"): scalars.append("\u{8}")
                case UInt8(ascii: "f"): scalars.append("\u{c}")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "u"):
                    guard let code = hex4(i) else { throw JSONError("invalid \\u escape") }
                    i += 4
                    // A surrogate pair is one character (Python's json.dumps writes 🎬 as
                    // \ud83c\udfac); a lone surrogate is replaced.
                    if (0xD800...0xDBFF).contains(code), i + 6 <= bytes.count,
                       bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u"),
                       let low = hex4(i + 2), (0xDC00...0xDFFF).contains(low) {
                        i += 6
                        scalars.append(Unicode.Scalar(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)) ?? "\u{FFFD}")
                    } else {
                        scalars.append(Unicode.Scalar(code) ?? "\u{FFFD}")
                    }
                default: throw JSONError("invalid escape")
                }
                run = i
                continue
            }
            i += 1
        }
        throw JSONError("unterminated string")
    }
}
