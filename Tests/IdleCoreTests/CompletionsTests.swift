import Foundation
import Testing

@testable import IdleCore

// The completion scripts are generated from `Invocation.commands`; these tests check
// that every command and flag of the table reaches every shell, and that the shells
// themselves accept the scripts and complete what a user would expect.

/// Every flag that takes a value, with the command it belongs to.
private let valueFlags = Invocation.commands.flatMap { command in
    command.options.filter { $0.valueName != nil }.map { (command: command.name, option: $0) }
}

@Test(arguments: CompletionShell.allCases)
func completionScriptNamesEveryCommandAndFlag(_ shell: CompletionShell) {
    let script = Completions.script(for: shell)
    for command in Invocation.commands {
        #expect(script.contains(command.name), "\(shell): command \(command.name) missing")
        for option in command.options {
            // fish writes `-l lock-after`, the others the whole flag.
            let word = shell == .fish ? "-l \(option.flag.dropFirst(2))" : option.flag
            #expect(script.contains(word), "\(shell): \(command.name) \(option.flag) missing")
        }
    }
    for format in IdleFormat.allCases {
        #expect(script.contains(format.rawValue))
    }
}

@Test func durationValuesCompleteToNothingAndCommandsToCommands() {
    let bash = Completions.script(for: .bash)
    let fish = Completions.script(for: .fish)
    let zsh = Completions.script(for: .zsh)
    #expect(!valueFlags.isEmpty)
    for (command, option) in valueFlags {
        switch option.valueName {
        case "DURATION":
            #expect(bash.contains("\(command):\(option.flag)) return 0 ;;"))
            #expect(zsh.contains("\(option.flag)=[") && zsh.contains(":duration: '"))
        case "CMD":
            #expect(bash.contains("\(command):\(option.flag)) _xidlelock_reply -c"))
            #expect(fish.contains("-l \(option.flag.dropFirst(2)) -x -a '(__fish_complete_command)'"))
        default:
            break
        }
    }
}

@Test func summariesDropAsidesAndKeepTheFirstSentence() {
    #expect(Completions.summary("ms (default, like xprintidle), s, human or json.") == "ms, s, human or json")
    #expect(Completions.summary("Idle time before the locker runs (default: 10m).") == "Idle time before the locker runs")
    #expect(Completions.summary("Run it. Then more.") == "Run it")
}

@Test func completionsCommandParses() throws {
    #expect(try Invocation.parse(["completions", "bash"]) == .completions(.bash))
    #expect(try Invocation.parse(["completions", "fish"]) == .completions(.fish))
    if case .help(let text) = try Invocation.parse(["completions", "--help"]) {
        #expect(text.contains("xidlelock completions bash|zsh|fish"))
    } else {
        Issue.record("completions --help is not help")
    }
    #expect(throws: UsageError.self) { try Invocation.parse(["completions"]) }
    #expect(throws: UsageError("completions: 'tcsh' is not one of bash, zsh, fish")) {
        try Invocation.parse(["completions", "tcsh"])
    }
    #expect(throws: UsageError.self) { try Invocation.parse(["completions", "bash", "zsh"]) }
}

// MARK: The shells themselves

private func completionsRun(_ program: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: program)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

private func completionsWriteScript(_ shell: CompletionShell) throws -> String {
    let path = FileManager.default.temporaryDirectory
        .appendingPathComponent("xidlelock-completions-\(UUID().uuidString).\(shell.rawValue)").path
    try Completions.script(for: shell).write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

private func completionsHave(_ program: String) -> Bool {
    FileManager.default.isExecutableFile(atPath: program)
}

@Test(arguments: [
    (CompletionShell.bash, "/bin/bash"), (.zsh, "/usr/bin/zsh"), (.fish, "/usr/bin/fish"),
])
func shellAcceptsItsScript(_ shell: CompletionShell, _ program: String) throws {
    guard completionsHave(program) else {
        print("skipped: \(program) is not installed (sh .ci/install-packages package)")
        return
    }
    let path = try completionsWriteScript(shell)
    defer { try? FileManager.default.removeItem(atPath: path) }
    let result = try completionsRun(program, ["-n", path])
    #expect(result.status == 0, "\(program) -n: \(result.output)")
}

@Test func shellcheckAcceptsTheBashScript() throws {
    guard completionsHave("/usr/bin/shellcheck") else { return }
    let path = try completionsWriteScript(.bash)
    defer { try? FileManager.default.removeItem(atPath: path) }
    let result = try completionsRun("/usr/bin/shellcheck", ["-s", "bash", path])
    #expect(result.status == 0, "\(result.output)")
}

/// What bash offers for a command line whose last word is being completed.
private func completionsBash(_ script: String, _ words: [String]) throws -> [String] {
    let quoted = words.map { "'\($0)'" }.joined(separator: " ")
    let program = """
        . '\(script)'
        COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1)
        _xidlelock
        printf '%s\\n' "${COMPREPLY[@]}"
        """
    let result = try completionsRun("/bin/bash", ["--norc", "-c", program])
    #expect(result.status == 0, "\(result.output)")
    return result.output.split(separator: "\n").map(String.init)
}

@Test func bashCompletesCommandsFlagsAndValues() throws {
    let path = try completionsWriteScript(.bash)
    defer { try? FileManager.default.removeItem(atPath: path) }
    let first = try completionsBash(path, ["xidlelock", ""])
    for name in Invocation.commands.map(\.name) + ["help", "--lock-after", "--version"] {
        #expect(first.contains(name), "first word: \(name) not offered")
    }
    #expect(try completionsBash(path, ["xidlelock", "idle", "--format", ""]) == ["ms", "s", "human", "json"])
    // `--format=j`: bash splits at '='.
    #expect(try completionsBash(path, ["xidlelock", "idle", "--format", "=", "j"]) == ["json"])
    #expect(try completionsBash(path, ["xidlelock", "--lock-after", ""]) == [])
    #expect(try completionsBash(path, ["xidlelock", "--locker", "bas"]).contains("bash"))
    #expect(try completionsBash(path, ["xidlelock", "completions", ""]).starts(with: ["bash", "zsh", "fish"]))
    #expect(try completionsBash(path, ["xidlelock", "completions", "zsh", ""]) == [])
    #expect(try completionsBash(path, ["xidlelock", "run", "--noti"]) == ["--notify-before", "--notifier"])
    #expect(try completionsBash(path, ["xidlelock", "run", "--no-"]) == ["--no-lock-before-sleep", "--no-logind", "--no-screensaver-service", "--no-power-management-service", "--no-config"])
    #expect(try completionsBash(path, ["xidlelock", "help", ""]) == Invocation.commands.map(\.name))
}

@Test func fishCompletesCommandsFlagsAndValues() throws {
    guard completionsHave("/usr/bin/fish") else { return }
    let path = try completionsWriteScript(.fish)
    defer { try? FileManager.default.removeItem(atPath: path) }
    func complete(_ line: String) throws -> [String] {
        let result = try completionsRun("/usr/bin/fish", ["--no-config", "-c", "source '\(path)'; complete -C '\(line)'"])
        #expect(result.status == 0, "\(result.output)")
        return result.output.split(separator: "\n").map { String($0.prefix { $0 != "\t" }) }
    }
    #expect(try Set(complete("xidlelock ")) == Set(Invocation.commands.map(\.name) + ["help"]))
    #expect(try Set(complete("xidlelock idle --format ")) == Set(IdleFormat.allCases.map(\.rawValue)))
    #expect(try complete("xidlelock --lock-after ") == [])
    #expect(try complete("xidlelock completions ").sorted() == ["bash", "fish", "zsh"])
    #expect(try complete("xidlelock --on-unlock-").contains("--on-unlock-interval"))
    #expect(try complete("xidlelock -").contains("--version"))
}
