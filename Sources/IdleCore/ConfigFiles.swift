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
    case text(String)
    case missing
    /// It exists but cannot be read (permissions, a directory): the reason.
    case unreadable(String)
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
    /// The settings of one file. Blank lines and lines starting with `#` are skipped;
    /// a value is the rest of its line, verbatim (a locker's `'#000000'` stays whole).
    static func settings<Options>(_ text: String, path: String, table: [OptionSpec<Options>],
                                  refused: Set<String> = []) throws(UsageError) -> [Setting] {
        var settings: [Setting] = []
        for (k, line) in lines(text) {
            if let (flag, value) = try setting(line, at: "\(path):\(k)", table: table, refused: refused) {
                settings.append(Setting(flag: flag, value: value, origin: .file(path: path, line: k)))
            }
        }
        return settings
    }

    /// Each line with its number, from 1.
    static func lines(_ text: String) -> [(Int, Substring)] {
        text.split(separator: "\n", omittingEmptySubsequences: false).enumerated().map { ($0.offset + 1, $0.element) }
    }

    /// One line's flag and value; nil for a blank line or a comment. `at` is `path:line`.
    static func setting<Options>(_ raw: Substring, at: String, table: [OptionSpec<Options>],
                                 refused: Set<String> = []) throws(UsageError) -> (String, String)? {
        let text = raw.trimmingCharacters(in: " \t\r")
        guard !text.isEmpty, !text.hasPrefix("#") else { return nil }
        let name = String(text.prefix { $0 != " " && $0 != "\t" })
        let value = String(text.dropFirst(name.count).drop { $0 == " " || $0 == "\t" })
        if name.hasPrefix("-") {
            throw UsageError("\(at): write '\(name.drop { $0 == "-" })', without the dashes")
        }
        guard let spec = table.first(where: { $0.flag == "--" + name }), !refused.contains(spec.flag) else {
            throw UsageError("\(at): unknown setting '\(name)' (the long options of 'xidlelock --help', without their dashes)")
        }
        if let valueName = spec.valueName, value.isEmpty {
            throw UsageError("\(at): '\(name)' needs a value (\(valueName))")
        }
        if spec.valueName == nil, !value.isEmpty {
            throw UsageError("\(at): '\(name)' takes no value")
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
    static func layered(flags: [Setting], flagged: AgentOptions, sources: ConfigSources) throws(UsageError) -> AgentOptions {
        var files: [(path: String, required: Bool)] = []
        if !flagged.noConfig {
            files.append((sources.systemConfig, false))
            if let given = flagged.configFile {
                files.append((given, true))
            } else if let user = sources.userConfig {
                files.append((user, false))
            }
        }
        var layers: [[Setting]] = []
        var read: [String] = []
        for file in files {
            switch sources.read(file.path) {
            case .text(let text):
                let path = file.path
                layers.append(try ConfigText.settings(text, path: path, table: specs, refused: commandLineOnly))
                read.append(path)
            case .missing:
                if file.required { throw UsageError("--config: '\(file.path)' does not exist") }
            case .unreadable(let reason):
                throw UsageError("\(file.path): cannot be read (\(reason))")
            }
        }
        layers.append(flags)
        // Each group comes from the highest layer that sets it.
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
        options.configFiles = read
        do {
            try options.validate(given)
        } catch {
            throw read.isEmpty ? error : UsageError("\(error.message) (settings read from \(read.joined(separator: ", ")) and the flags)")
        }
        options.applyPolicy(from: sources)
        return options
    }
}
