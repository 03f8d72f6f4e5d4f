// Config files: `/etc/xidlelock/config` (the system's), `$XDG_CONFIG_HOME/xidlelock/config`
// (the user's), one long option a line without its dashes, read by the same option
// table as the flags. Flags win over the user's file, the user's file over the
// system's. IdleCore does no I/O: the caller hands in a reader.

/// Where a setting came from, for status, `doctor` and error messages.
public enum SettingOrigin: Equatable, Sendable, CustomStringConvertible {
    case flag
    case file(path: String, line: Int)
    case policy(path: String)

    public var description: String {
        switch self {
        case .flag: "flag"
        case .file(let path, let line): "\(path):\(line)"
        case .policy(let path): "policy \(path)"
        }
    }
}

/// What reading one file gave.
public enum FileContents: Equatable, Sendable {
    /// Its bytes, decoded line by line (a line that is not UTF-8 is an error of its own).
    case bytes([UInt8])
    case text(String)
    case missing
    /// It exists in some form but cannot be read (permissions, a directory, a FIFO, a
    /// dangling symlink, too large): the reason, in words ("it is a directory").
    case unreadable(String)
}

/// A config file, or a line of one, that the agent could not use: reported at start
/// (log, audit trail), in status and by `doctor`, and skipped. Only the command line's
/// own flags stop the agent (exit 64): a file can change after the flags were written
/// into an autostart entry or a unit, and nobody sees an autostarted agent's exit.
public struct ConfigProblem: Equatable, Sendable, CustomStringConvertible {
    public var path: String
    /// The line, when one line is skipped; nil when the whole file is.
    public var line: Int?
    /// What is wrong, in words.
    public var message: String

    public init(path: String, line: Int? = nil, message: String) {
        self.path = path
        self.line = line
        self.message = message
    }

    public var description: String {
        line.map { "\(path):\($0): \(message); line skipped" } ?? "\(path): \(message); file skipped"
    }
}

/// The files and variables the settings come from, read by the caller.
public struct ConfigSources: Sendable {
    public var read: @Sendable (String) -> FileContents
    public var variable: @Sendable (String) -> String?
    /// `/etc/xidlelock`, where the system's config and the admin's policy live.
    public var systemDirectory: String

    public init(systemDirectory: String = "/etc/xidlelock",
                read: @escaping @Sendable (String) -> FileContents,
                variable: @escaping @Sendable (String) -> String?) {
        self.systemDirectory = systemDirectory
        self.read = read
        self.variable = variable
    }

    /// No files at all (the flags alone, as tests and `--no-config` see them).
    public static let none = ConfigSources(read: { _ in .missing }, variable: { _ in nil })

    public var systemConfig: String { systemDirectory + "/config" }
    public var policy: String { systemDirectory + "/policy" }

    /// `$XDG_CONFIG_HOME/xidlelock/config`, else `~/.config/xidlelock/config`; nil without either.
    public var userConfig: String? {
        if let xdg = variable("XDG_CONFIG_HOME"), xdg.hasPrefix("/") { return xdg + "/xidlelock/config" }
        if let home = variable("HOME"), home.hasPrefix("/") { return home + "/.config/xidlelock/config" }
        return nil
    }
}

/// One setting as read: a flag with its value, and where it was written.
struct Setting {
    var flag: String
    var value: String
    var origin: SettingOrigin
}

enum ConfigText {
    /// The settings of one file, each checked on its own against the file's earlier
    /// lines; a line that cannot be used is a problem and skipped. Blank lines and
    /// lines starting with `#` are skipped; a value is the rest of its line, verbatim
    /// (a locker's `'#000000'` stays whole).
    static func settings(_ lines: [(Int, String?)], path: String, table: [OptionSpec<AgentOptions>],
                         refused: Set<String> = []) -> (settings: [Setting], problems: [ConfigProblem]) {
        var settings: [Setting] = []
        var problems: [ConfigProblem] = []
        // The file's settings applied in order, so that a value (or a --resume without
        // its --stage) is checked where it is written.
        var scratch = AgentOptions()
        for (k, line) in lines {
            guard let line else {
                problems.append(ConfigProblem(path: path, line: k, message: "not UTF-8 text"))
                continue
            }
            do throws(UsageError) {
                guard let (flag, value) = try setting(line[...], table: table, refused: refused) else { continue }
                try table.first { $0.flag == flag }?.apply(&scratch, value)
                settings.append(Setting(flag: flag, value: value, origin: .file(path: path, line: k)))
            } catch {
                problems.append(ConfigProblem(path: path, line: k, message: error.message))
            }
        }
        return (settings, problems)
    }

    /// Each line with its number, from 1, or nil where it is not UTF-8. Lines end at
    /// LF or CRLF. (On bytes: Swift's "\r\n" is one Character, so a split on "\n"
    /// would find no line end at all in a CRLF file.)
    static func lines(_ contents: [UInt8]) -> [(Int, String?)] {
        var lines: [(Int, String?)] = []
        for (k, line) in contents.split(separator: 0x0A, omittingEmptySubsequences: false).enumerated() {
            let bytes = line.last == 0x0D ? line.dropLast() : line
            lines.append((k + 1, String(validating: bytes, as: UTF8.self)))
        }
        return lines
    }

    /// The lines of what a reader gave, or nil for a file that is missing or unreadable.
    static func lines(_ contents: FileContents) -> [(Int, String?)]? {
        switch contents {
        case .bytes(let bytes): lines(bytes)
        case .text(let text): lines(Array(text.utf8))
        case .missing, .unreadable: nil
        }
    }

    /// One line's flag and value; nil for a blank line or a comment.
    static func setting<Options>(_ raw: Substring, table: [OptionSpec<Options>],
                                 refused: Set<String> = []) throws(UsageError) -> (String, String)? {
        let text = raw.trimmingCharacters(in: " \t\r")
        guard !text.isEmpty, !text.hasPrefix("#") else { return nil }
        let name = String(text.prefix { $0 != " " && $0 != "\t" })
        let value = String(text.dropFirst(name.count).drop { $0 == " " || $0 == "\t" })
        if name.hasPrefix("-") {
            throw UsageError("write '\(name.drop { $0 == "-" })', without the dashes")
        }
        guard let spec = table.first(where: { $0.flag == "--" + name }), !refused.contains(spec.flag) else {
            throw UsageError("unknown setting '\(name)' (the long options of 'xidlelock --help', without their dashes)")
        }
        if let valueName = spec.valueName, value.isEmpty {
            throw UsageError("'\(name)' needs a value (\(valueName))")
        }
        if spec.valueName == nil, !value.isEmpty {
            throw UsageError("'\(name)' takes no value")
        }
        return (spec.flag, value)
    }
}

extension AgentOptions {
    /// Settings that one higher layer replaces as a whole: `--verbose`/`--quiet` are one
    /// choice, and the stages with their resume commands one list.
    static func group(_ flag: String) -> String {
        switch flag {
        case "--verbose", "--quiet": "verbosity"
        case "--stage", "--resume": "stages"
        default: flag
        }
    }

    /// Flags that only the command line takes.
    static let commandLineOnly: Set<String> = ["--config", "--no-config"]

    /// The agent's options from the config files and the flags (already parsed once into
    /// `flagged`, which says whether and which files to read), then the admin's policy.
    /// Only the flags themselves can make this throw: a file, or a line of one, that
    /// cannot be used is a `ConfigProblem` in the options, and skipped.
    static func layered(flags: [Setting], flagged: AgentOptions, sources: ConfigSources) throws(UsageError) -> AgentOptions {
        var problems: [ConfigProblem] = []
        var files: [(path: String, settings: [Setting])] = []
        if !flagged.noConfig {
            var paths = [(path: sources.systemConfig, required: false)]
            if let given = flagged.configFile {
                // Given with --config: a file all the same, which can change after the flag
                // was written into a unit or an autostart entry; its absence is a problem.
                paths.append((given, true))
            } else if let user = sources.userConfig {
                paths.append((user, false))
            }
            for file in paths {
                let contents = sources.read(file.path)
                if let lines = ConfigText.lines(contents) {
                    let read = ConfigText.settings(lines, path: file.path, table: specs, refused: commandLineOnly)
                    files.append((file.path, read.settings))
                    problems += read.problems
                } else if case .unreadable(let reason) = contents {
                    problems.append(ConfigProblem(path: file.path, message: "cannot be read (\(reason))"))
                } else if file.required {
                    problems.append(ConfigProblem(path: file.path, message: "cannot be read (it does not exist)"))
                }
            }
        }
        // The rules across settings (--notify-before shorter than --lock-after, ...): the
        // most files that make valid options with the flags, a later (the user's) file
        // kept before an earlier one; the flags alone are the last try, and only their
        // own error stops the agent.
        var firstError: UsageError?
        for kept in keptFiles(count: files.count) {
            do throws(UsageError) {
                var options = try combined(kept.map { files[$0].settings } + [flags])
                let keptPaths = kept.map { files[$0].path }
                options.configFiles = keptPaths
                for (k, file) in files.enumerated() where !kept.contains(k) {
                    let reason = firstError.map { $0.message } ?? "?"
                    problems.append(ConfigProblem(path: file.path, message: "\(reason) (with the flags and the settings of \(files.map(\.path).joined(separator: ", ")))"))
                }
                options.configProblems = problems
                options.applyPolicy(from: sources)
                options.refuseWeakenings()
                return options
            } catch {
                if kept.isEmpty { throw error }
                firstError = firstError ?? error
            }
        }
        throw UsageError("no settings")  // not reached: the flags alone are the last try
    }

    /// Which files to try together, most first; among as many, the later ones first.
    static func keptFiles(count: Int) -> [[Int]] {
        let masks = (0..<(1 << count)).sorted { ($0.nonzeroBitCount, $0) > ($1.nonzeroBitCount, $1) }
        return masks.map { mask in (0..<count).filter { mask & (1 << $0) != 0 } }
    }

    /// The options of these layers, lowest first: each group comes from the highest
    /// layer that sets it. Throws the rules' error across settings.
    static func combined(_ layers: [[Setting]]) throws(UsageError) -> AgentOptions {
        var winner: [String: Int] = [:]
        for (k, layer) in layers.enumerated() {
            for setting in layer { winner[group(setting.flag)] = k }
        }
        var options = AgentOptions()
        var given: Set<String> = []
        for (k, layer) in layers.enumerated() {
            for setting in layer where winner[group(setting.flag)] == k {
                guard let spec = specs.first(where: { $0.flag == setting.flag }) else { continue }
                do {
                    try spec.apply(&options, setting.value)
                } catch {
                    throw setting.origin == .flag ? error : UsageError("\(setting.origin): \(error.message)")
                }
                given.insert(setting.flag)
                options.origins[group(setting.flag)] = setting.origin
            }
        }
        try options.validate(given)
        return options
    }
}
