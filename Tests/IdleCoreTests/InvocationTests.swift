import IdleCore
import Testing

/// How a flag's value is written: `--flag value` or `--flag=value`.
enum Spelling: String, CaseIterable, Sendable {
    case separate, joined

    func args(_ flag: String, _ value: String) -> [String] {
        self == .separate ? [flag, value] : ["\(flag)=\(value)"]
    }
}

/// The agent options of a command line that must parse.
func agentOptions(_ args: [String], sourceLocation: SourceLocation = #_sourceLocation) -> AgentOptions? {
    do {
        guard case .agent(let options) = try Invocation.parse(args) else {
            Issue.record("\(args) is not an agent invocation", sourceLocation: sourceLocation)
            return nil
        }
        return options
    } catch {
        Issue.record("\(args) was refused: \(error.message)", sourceLocation: sourceLocation)
        return nil
    }
}

/// The usage error of a command line that must be refused.
func usageError(_ args: [String]) -> UsageError? {
    do {
        _ = try Invocation.parse(args)
        return nil
    } catch {
        return error
    }
}

@Suite("The agent's flags")
struct AgentFlagTests {
    @Test("with no arguments the agent runs with its defaults: lock after 10 minutes")
    func defaults() throws {
        let options = try #require(agentOptions([]))
        #expect(options.lockAfter == .minutes(10))
        #expect(options.locker == nil)
        #expect(options.notifyBefore == nil)
        #expect(options.notifier == nil)
        #expect(options.onUnlock == nil)
        #expect(options.onUnlockInterval == .zero)
        #expect(!options.ignoreScreensaverReset)
        #expect(!options.suspendResetsIdle)
        #expect(options.verbosity == .normal)
        let config = options.config(locker: "slock")
        #expect(config.stages == [Stage(name: "lock", role: .lock, idleTime: .minutes(10), command: "slock")])
        #expect(config.screensaverResetCountsAsActivity)
        #expect(config.suspendCountsAsIdle)
        #expect(config.onUnlock == nil)
    }

    @Test("--lock-after sets the idle time before the locker runs", arguments: Spelling.allCases)
    func lockAfter(spelling: Spelling) throws {
        let options = try #require(agentOptions(spelling.args("--lock-after", "1h30m")))
        #expect(options.lockAfter == .minutes(90))
        let bare = try #require(agentOptions(spelling.args("--lock-after", "45")))
        #expect(bare.lockAfter == .seconds(45))
    }

    @Test("--locker sets the locker command, spaces and all", arguments: Spelling.allCases)
    func locker(spelling: Spelling) throws {
        let options = try #require(agentOptions(spelling.args("--locker", "i3lock -n -c 000000")))
        #expect(options.locker == "i3lock -n -c 000000")
        #expect(options.config(locker: options.locker ?? "").lockStage?.command == "i3lock -n -c 000000")
    }

    @Test("a locker command may itself contain '='", arguments: Spelling.allCases)
    func lockerWithEquals(spelling: Spelling) throws {
        let options = try #require(agentOptions(spelling.args("--locker", "env A=1 slock")))
        #expect(options.locker == "env A=1 slock")
    }

    @Test("--notify-before and --notifier warn before the lock", arguments: Spelling.allCases)
    func notify(spelling: Spelling) throws {
        let options = try #require(agentOptions(
            spelling.args("--notify-before", "30s") + spelling.args("--notifier", "notify-send 'locking soon'")))
        #expect(options.notifyBefore == .seconds(30))
        #expect(options.notifier == "notify-send 'locking soon'")
    }

    @Test("--on-unlock sets the hook run when the locker exits", arguments: Spelling.allCases)
    func onUnlock(spelling: Spelling) throws {
        let options = try #require(agentOptions(spelling.args("--on-unlock", "mbsync -a")))
        #expect(options.onUnlock == "mbsync -a")
        #expect(options.config(locker: "slock").onUnlock == "mbsync -a")
    }

    @Test("--on-unlock-interval limits how often the hook runs, zero allowed", arguments: Spelling.allCases)
    func onUnlockInterval(spelling: Spelling) throws {
        let options = try #require(agentOptions(spelling.args("--on-unlock-interval", "15m")))
        #expect(options.onUnlockInterval == .minutes(15))
        #expect(options.config(locker: "slock").onUnlockInterval == .minutes(15))
        let zero = try #require(agentOptions(spelling.args("--on-unlock-interval", "0")))
        #expect(zero.onUnlockInterval == .zero)
    }

    @Test("--ignore-screensaver-reset makes only real input count")
    func ignoreScreensaverReset() throws {
        let options = try #require(agentOptions(["--ignore-screensaver-reset"]))
        #expect(options.ignoreScreensaverReset)
        #expect(!options.config(locker: "slock").screensaverResetCountsAsActivity)
    }

    @Test("--suspend-resets-idle makes a suspend restart the idle time")
    func suspendResetsIdle() throws {
        let options = try #require(agentOptions(["--suspend-resets-idle"]))
        #expect(options.suspendResetsIdle)
        #expect(!options.config(locker: "slock").suspendCountsAsIdle)
    }

    @Test("--verbose logs everything and --quiet only warnings and errors")
    func verbosity() throws {
        let verbose = try #require(agentOptions(["--verbose"]))
        let quiet = try #require(agentOptions(["--quiet"]))
        #expect(verbose.verbosity == .verbose)
        #expect(quiet.verbosity == .quiet)
        #expect(verbose.verbosity.threshold == .debug)
        #expect(Verbosity.normal.threshold == .info)
        #expect(quiet.verbosity.threshold == .warning)
    }

    @Test("'run' in front of the flags means the same agent")
    func runSubcommand() throws {
        let flags = ["--lock-after=5m", "--locker", "slock", "--notify-before", "1m", "--notifier=notify-send hi",
                     "--on-unlock", "true", "--on-unlock-interval", "1h", "--ignore-screensaver-reset",
                     "--suspend-resets-idle", "--quiet"]
        let direct = try #require(agentOptions(flags))
        let viaRun = try #require(agentOptions(["run"] + flags))
        #expect(viaRun == direct)
        #expect(viaRun.lockAfter == .minutes(5))
        #expect(viaRun.onUnlockInterval == .hours(1))
        #expect(viaRun.verbosity == .quiet)
        #expect(try #require(agentOptions(["run"])) == AgentOptions())
    }

    @Test("the notify stage comes notify-before ahead of the lock; stages are in idle-time order")
    func configStages() throws {
        let options = try #require(agentOptions(["--lock-after", "15m", "--notify-before", "90s", "--notifier", "warn"]))
        let config = options.config(locker: "xsecurelock")
        #expect(config.stages == [
            Stage(name: "notify", role: .notify, idleTime: .seconds(810), command: "warn"),
            Stage(name: "lock", role: .lock, idleTime: .minutes(15), command: "xsecurelock"),
        ])
        #expect(config.lockStage?.command == "xsecurelock")
    }

    @Test("help documents exactly the agent's flags")
    func helpListsEveryFlag() throws {
        let run = try #require(Invocation.commands.first { $0.name == "run" })
        #expect(run.options.map(\.flag) == [
            "--lock-after", "--lock-after-on-battery", "--screen-off-after-lock", "--screen-off-after-lock-on-battery",
            "--locker", "--notify-before", "--notifier", "--on-unlock",
            "--on-unlock-interval", "--ignore-screensaver-reset", "--ignore-xtest", "--suspend-resets-idle",
            "--stage", "--resume", "--socket", "--secure", "--no-lock-before-sleep", "--lock-on-switch", "--lock-at-start",
            "--lock-on-card-removal", "--card-atr", "--before-sleep",
            "--after-resume", "--transfer-sleep-lock", "--logind-inhibitors", "--no-logind",
            "--no-screensaver-service", "--no-power-management-service", "--session-manager-service",
            "--not-when-fullscreen", "--not-when-audio", "--not-when-playing", "--corners", "--corner-delay",
            "--corner-size", "--config", "--no-config", "--verbose", "--quiet",
        ])
        for option in run.options {
            #expect(Invocation.mainHelp.contains(option.flag), "\(option.flag) missing from help")
            #expect(!option.help.isEmpty)
        }
    }
}

@Suite("Commands: help, version, idle")
struct CommandTests {
    @Test("--help, -h, help and 'help run' print the main help", arguments: [
        ["--help"], ["-h"], ["help"], ["help", "run"], ["run", "--help"], ["run", "-h"],
        ["--lock-after", "5m", "--help"],
    ])
    func mainHelp(args: [String]) throws {
        let result = try Invocation.parse(args)
        #expect(result == .help(Invocation.mainHelp))
        #expect(Invocation.mainHelp.contains("USAGE: xidlelock"))
        #expect(Invocation.mainHelp.contains("\n  idle "), "the idle command is listed")
        #expect(Invocation.mainHelp.contains(Invocation.versionNumber))
    }

    @Test("'help idle', 'idle --help' and 'idle -h' describe the idle command only", arguments: [
        ["help", "idle"], ["idle", "--help"], ["idle", "-h"], ["idle", "--format", "json", "--help"],
    ])
    func idleHelp(args: [String]) throws {
        guard case .help(let text) = try Invocation.parse(args) else {
            Issue.record("\(args) did not ask for help")
            return
        }
        #expect(text.contains("xidlelock idle [--format FORMAT]"))
        #expect(text.contains("--format"))
        #expect(!text.contains("--lock-after"))
    }

    @Test("--version and -V print the version", arguments: [["--version"], ["-V"]])
    func version(args: [String]) throws {
        #expect(try Invocation.parse(args) == .version)
    }

    @Test("idle prints milliseconds by default")
    func idleDefault() throws {
        #expect(try Invocation.parse(["idle"]) == .idle(.ms))
    }

    @Test("idle --format chooses ms, s, human or json", arguments: IdleFormat.allCases, Spelling.allCases)
    func idleFormat(format: IdleFormat, spelling: Spelling) throws {
        #expect(try Invocation.parse(["idle"] + spelling.args("--format", format.rawValue)) == .idle(format))
    }

    @Test("each format renders the idle time as documented", arguments: [
        (IdleFormat.ms, 1_234, "1234"),
        (.ms, 0, "0"),
        (.s, 1_999, "1"),
        (.s, 999, "0"),
        (.s, 3_600_000, "3600"),
        (.human, 3_723_999, "1h 2m 3s"),
        (.human, 999, "0s"),
        (.human, 0, "0s"),
        (.human, 59_999, "59s"),
        (.human, 86_400_000, "1d"),
        (.human, 90_061_500, "1d 1h 1m 1s"),
        (.human, 3_600_000 + 5_000, "1h 5s"),
        (.json, 1_234, "{\"idle_ms\":1234}"),
        (.json, 0, "{\"idle_ms\":0}"),
    ] as [(IdleFormat, Int64, String)])
    func render(format: IdleFormat, milliseconds: Int64, text: String) {
        #expect(format.render(Millis(milliseconds)) == text)
    }

    @Test("the printed line is the rendered text and a newline, in every format, at the edges of Int64 too",
          arguments: IdleFormat.allCases)
    func line(format: IdleFormat) {
        for milliseconds: Int64 in [0, 7, 999, 1_000, 59_999, 3_723_999, 4_294_967_295, .max, -1, -1_500, .min] {
            let line = format.withLine(Millis(milliseconds)) { String(decoding: $0, as: UTF8.self) }
            #expect(line == format.render(Millis(milliseconds)) + "\n", "\(format) \(milliseconds)")
        }
    }
}

@Suite("Bad command lines: one line that names the flag")
struct UsageErrorTests {
    @Test("the error names the flag at fault", arguments: [
        // Durations: zero, negative, unparsable, empty, missing.
        (["--lock-after", "0"], ["--lock-after"]),
        (["--lock-after", "0s"], ["--lock-after"]),
        (["--lock-after=0ms"], ["--lock-after"]),
        (["--lock-after", "-5m"], ["--lock-after"]),
        (["--lock-after=-5m"], ["--lock-after"]),
        (["--lock-after", "soon"], ["--lock-after"]),
        (["--lock-after", "1.5m"], ["--lock-after"]),
        (["--lock-after", "5 m"], ["--lock-after"]),
        (["--lock-after", "11y"], ["--lock-after"]),
        (["--lock-after", "3651d"], ["--lock-after"]),
        (["--lock-after="], ["--lock-after"]),
        (["--lock-after"], ["--lock-after"]),
        (["--notify-before", "0", "--notifier", "warn"], ["--notify-before"]),
        (["--notify-before", "-1m", "--notifier", "warn"], ["--notify-before"]),
        (["--notify-before", "a bit", "--notifier", "warn"], ["--notify-before"]),
        (["--notifier", "warn", "--notify-before"], ["--notify-before"]),
        (["--on-unlock-interval", "5 minutes"], ["--on-unlock-interval"]),
        (["--on-unlock-interval", "-1s"], ["--on-unlock-interval"]),
        (["--on-unlock-interval"], ["--on-unlock-interval"]),
        // Commands: empty or missing.
        (["--locker"], ["--locker"]),
        (["--locker", ""], ["--locker"]),
        (["--locker="], ["--locker"]),
        (["--notify-before", "1m", "--notifier", ""], ["--notifier"]),
        (["--notify-before", "1m", "--notifier="], ["--notifier"]),
        (["--notify-before", "1m", "--notifier"], ["--notifier"]),
        (["--on-unlock", ""], ["--on-unlock"]),
        (["--on-unlock="], ["--on-unlock"]),
        (["--on-unlock"], ["--on-unlock"]),
        // Switches take no value.
        (["--verbose=yes"], ["--verbose"]),
        (["--quiet=1"], ["--quiet"]),
        (["--ignore-screensaver-reset=true"], ["--ignore-screensaver-reset"]),
        (["--suspend-resets-idle=1"], ["--suspend-resets-idle"]),
        // Rules across flags.
        (["--verbose", "--quiet"], ["--verbose", "--quiet"]),
        (["--quiet", "--lock-after", "5m", "--verbose"], ["--verbose", "--quiet"]),
        (["--notify-before", "1m"], ["--notify-before", "--notifier"]),
        (["--notifier", "warn"], ["--notifier", "--notify-before"]),
        (["--notify-before", "10m", "--notifier", "warn"], ["--notify-before", "--lock-after"]),
        (["--lock-after", "1m", "--notify-before", "2m", "--notifier", "warn"], ["--notify-before", "--lock-after"]),
        (["run", "--lock-after", "30s", "--notify-before=30s", "--notifier=warn"], ["--notify-before", "--lock-after"]),
        // Unknown flags and commands.
        (["--bogus"], ["--bogus"]),
        (["--bogus=1"], ["--bogus"]),
        (["-x"], ["-x"]),
        (["--Lock-After", "5m"], ["--Lock-After"]),
        (["run", "--lockafter", "5m"], ["--lockafter"]),
        (["lock-now"], ["lock-now"]),
        (["--verbose", "status"], ["status"]),
        (["run", "run"], ["run"]),
        (["help", "bogus"], ["bogus"]),
        (["--version", "--verbose"], ["--version"]),
        (["run", "--version"], ["--version"]),
        // The idle command.
        (["idle", "--format", "xml"], ["--format"]),
        (["idle", "--format=MS"], ["--format"]),
        (["idle", "--format"], ["--format"]),
        (["idle", "--lock-after", "5m"], ["--lock-after"]),
        (["idle", "now"], ["now"]),
    ] as [([String], [String])])
    func namesTheFlag(args: [String], names: [String]) throws {
        let error = try #require(usageError(args), "\(args) was accepted")
        for name in names {
            #expect(error.message.contains(name), "\(args): \(error.message)")
        }
        #expect(!error.message.contains("\n"), "one line: \(error.message)")
    }

    @Test("notify-before just under lock-after is allowed")
    func notifyJustBeforeTheLock() throws {
        let options = try #require(agentOptions(["--lock-after", "10m", "--notify-before", "9m59s999ms", "--notifier", "warn"]))
        #expect(options.config(locker: "slock").stages.first?.idleTime == .ms(1))
    }
}
