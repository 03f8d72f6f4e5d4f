/// A command-line mistake: printed as one line naming the flag, exit status 64.
public struct UsageError: Error, Equatable, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
}

/// One option of a command: its flag, the name of its value (nil for a switch),
/// its help line, and how it changes the command's options.
public struct OptionSpec<Options>: Sendable {
    public let flag: String
    public let valueName: String?
    public let help: String
    let apply: @Sendable (inout Options, String) throws(UsageError) -> Void

    init(_ flag: String, _ valueName: String? = nil, _ help: String,
         _ apply: @escaping @Sendable (inout Options, String) throws(UsageError) -> Void) {
        self.flag = flag
        self.valueName = valueName
        self.help = help
        self.apply = apply
    }
}

/// Flags and help lines as shown to people, for help text, completions and the man-page check.
public struct OptionDoc: Equatable, Sendable {
    public let flag: String
    public let valueName: String?
    public let help: String
}

extension OptionSpec {
    var doc: OptionDoc { OptionDoc(flag: flag, valueName: valueName, help: help) }
}

/// The result of reading one command's arguments.
struct ParsedArguments {
    var positionals: [String] = []
    var helpRequested = false
    /// Each flag with its value ("" for a switch), in order.
    var assignments: [(flag: String, value: String)] = []
}

/// Reads `--flag`, `--flag value`, `--flag=value`, `-h`/`--help`, and `--` (after which
/// everything is positional). Unknown flags and missing values are usage errors that
/// name the flag.
func parseArguments<Options>(
    _ args: ArraySlice<String>, _ table: [OptionSpec<Options>], into options: inout Options,
    command: String
) throws(UsageError) -> ParsedArguments {
    var parsed = ParsedArguments()
    var i = args.startIndex
    while i < args.endIndex {
        let arg = args[i]
        i += 1
        if arg == "--" {
            parsed.positionals += args[i...]
            break
        }
        if arg == "-h" || arg == "--help" {
            parsed.helpRequested = true
            continue
        }
        guard arg.hasPrefix("-"), arg.count > 1 else {
            parsed.positionals.append(arg)
            continue
        }
        var name = arg
        var inlineValue: String?
        if let eq = arg.firstIndex(of: "=") {
            name = String(arg[..<eq])
            inlineValue = String(arg[arg.index(after: eq)...])
        }
        guard let spec = table.first(where: { $0.flag == name }) else {
            throw UsageError("unknown option '\(name)' for '\(command)' (see '\(command) --help')")
        }
        if let valueName = spec.valueName {
            let value: String
            if let inlineValue {
                value = inlineValue
            } else if i < args.endIndex {
                value = args[i]
                i += 1
            } else {
                throw UsageError("\(name) needs a value (\(valueName))")
            }
            try spec.apply(&options, value)
            parsed.assignments.append((name, value))
        } else {
            guard inlineValue == nil else { throw UsageError("\(name) takes no value") }
            try spec.apply(&options, "")
            parsed.assignments.append((name, ""))
        }
    }
    return parsed
}

/// Reads a duration for `flag`, refusing zero unless `allowZero`.
func duration(_ text: String, for flag: String, allowZero: Bool = false) throws(UsageError) -> Millis {
    guard let value = Millis(parsing: text) else {
        throw UsageError("\(flag): '\(text)' is not a duration (examples: 90, 90s, 500ms, 5m, 1h30m)")
    }
    if value == .zero && !allowZero {
        throw UsageError("\(flag): the duration must be above zero, not '\(text)'")
    }
    return value
}

/// A shell command given to `flag`: anything but empty.
func command(_ text: String, for flag: String) throws(UsageError) -> String {
    guard !text.isEmpty else { throw UsageError("\(flag): the command is empty") }
    return text
}

/// Renders the options part of a help text, flags aligned.
func helpLines(_ docs: [OptionDoc]) -> String {
    let flags = docs.map { doc in doc.valueName.map { "\(doc.flag) \($0)" } ?? doc.flag }
    let width = min((flags.map(\.count).max() ?? 0) + 2, 34)
    var text = ""
    let indent = String(repeating: " ", count: width + 2)
    for (flag, doc) in zip(flags, docs) {
        let pad = flag.count < width ? String(repeating: " ", count: width - flag.count) : "\n" + indent
        let help = wrap(doc.help, width: 80 - width - 2).joined(separator: "\n" + indent)
        text += "  \(flag)\(pad)\(help)\n"
    }
    return text
}

/// Splits text into lines of at most `width` characters at spaces.
func wrap(_ text: String, width: Int) -> [String] {
    var lines: [String] = []
    var line = ""
    for word in text.split(separator: " ") {
        if !line.isEmpty && line.count + 1 + word.count > width {
            lines.append(line)
            line = ""
        }
        line += line.isEmpty ? String(word) : " " + word
    }
    if !line.isEmpty { lines.append(line) }
    return lines
}
