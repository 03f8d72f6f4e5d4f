import Foundation
import IdleCore
import Testing

/// A machine's files in memory: path → text.
func sources(_ files: [String: String], home: String = "/home/ann", xdg: String? = nil) -> ConfigSources {
    ConfigSources(read: { files[$0].map(FileContents.text) ?? .missing },
                  variable: { name in name == "HOME" ? home : name == "XDG_CONFIG_HOME" ? xdg : nil })
}

func agentOptions(_ flags: [String], _ files: [String: String], xdg: String? = nil) throws(UsageError) -> AgentOptions? {
    guard case .agent(let options) = try Invocation.parse(flags, sources: sources(files, xdg: xdg)) else { return nil }
    return options
}

func usageError(_ flags: [String], _ files: [String: String]) -> String? {
    do {
        _ = try Invocation.parse(flags, sources: sources(files))
        return nil
    } catch {
        return error.message
    }
}

let userConfig = "/home/ann/.config/xidlelock/config"
let systemConfig = "/etc/xidlelock/config"
let policyFile = "/etc/xidlelock/policy"

@Suite("Config files: the system's, the user's, the flags")
struct ConfigFileTests {
    @Test("one long option a line without its dashes, # comments, values kept whole")
    func grammar() throws {
        let options = try #require(try agentOptions([], [userConfig: """
            # my settings
            lock-after 5m
              locker i3lock -n -c '#000000'   \t
            stage dim=4m:brightnessctl -s set 10%
            resume brightnessctl -r

            not-when-fullscreen
            """]))
        #expect(options.lockAfter == .minutes(5))
        #expect(options.locker == "i3lock -n -c '#000000'")
        #expect(options.stages.map(\.name) == ["dim"])
        #expect(options.stages.first?.resumeCommand == "brightnessctl -r")
        #expect(options.follows(.fullscreen))
        #expect(options.configFiles == [userConfig])
        #expect(options.origins["--lock-after"] == .file(path: userConfig, line: 2))
    }

    @Test("flags win over the user's file, the user's file over the system's; a list or a choice is replaced whole")
    func layers() throws {
        let files = [
            systemConfig: "lock-after 20m\nlocker slock\nstage dim=1m:dim\nquiet\n",
            userConfig: "lock-after 10m\nstage off=30m:off\nverbose\n",
        ]
        let fromFiles = try #require(try agentOptions([], files))
        #expect(fromFiles.lockAfter == .minutes(10))
        #expect(fromFiles.locker == "slock")
        #expect(fromFiles.stages.map(\.name) == ["off"], "the user's stages replace the system's")
        #expect(fromFiles.verbosity == .verbose, "verbose and quiet in two layers are one choice, not a conflict")
        #expect(fromFiles.configFiles == [systemConfig, userConfig])
        let flagged = try #require(try agentOptions(["--lock-after", "3m", "--quiet"], files))
        #expect(flagged.lockAfter == .minutes(3))
        #expect(flagged.verbosity == .quiet)
        #expect(flagged.origins["--lock-after"] == .flag)
        #expect(flagged.origins["--locker"] == .file(path: systemConfig, line: 2))
    }

    @Test("XDG_CONFIG_HOME moves the user's file; --config replaces it; --no-config reads none")
    func whichFiles() throws {
        let files = ["/cfg/xidlelock/config": "lock-after 7m", "/tmp/mine": "lock-after 8m",
                     systemConfig: "lock-after 9m", userConfig: "lock-after 6m"]
        #expect(try agentOptions([], files, xdg: "/cfg")?.lockAfter == .minutes(7))
        #expect(try agentOptions(["--config", "/tmp/mine"], files)?.lockAfter == .minutes(8))
        #expect(try agentOptions(["--config", "/tmp/mine"], files)?.configFiles == [systemConfig, "/tmp/mine"])
        let none = try #require(try agentOptions(["--no-config"], files))
        #expect(none.lockAfter == .minutes(10))
        #expect(none.configFiles.isEmpty)
    }

    @Test("a line that cannot be used is a problem naming the file and the line, and is skipped; the file's other lines hold", arguments: [
        ("lock-after 5x", "\(userConfig):1: --lock-after: '5x' is not a duration"),
        ("\n\nlok-after 5m", "\(userConfig):3: unknown setting 'lok-after'"),
        ("--lock-after 5m", "\(userConfig):1: write 'lock-after', without the dashes"),
        ("secure yes", "\(userConfig):1: 'secure' takes no value"),
        ("locker", "\(userConfig):1: 'locker' needs a value (CMD)"),
        ("config /etc/other", "\(userConfig):1: unknown setting 'config'"),
        ("resume brightnessctl -r", "\(userConfig):1: --resume must follow the --stage it belongs to"),
    ])
    func lineProblems(_ text: String, _ message: String) throws {
        let options = try #require(try agentOptions([], [userConfig: text + "\nlocker slock\n"]))
        #expect(options.configProblems.map(\.description).count == 1)
        #expect(options.configProblems.first?.description.hasPrefix(message) == true, "\(options.configProblems)")
        #expect(options.configProblems.first?.description.hasSuffix("; line skipped") == true)
        #expect(options.locker == "slock", "the file's good lines are read")
        #expect(options.configFiles == [userConfig])
    }

    @Test("lines end at LF or CRLF: a CRLF file reads as its lines, with no problem")
    func crlf() throws {
        let options = try #require(try agentOptions([], [userConfig: "lock-after 5m\r\nlocker i3lock -n\r\n\r\n# done\r\n"]))
        #expect(options.configProblems == [])
        #expect(options.lockAfter == .minutes(5))
        #expect(options.locker == "i3lock -n")
    }

    @Test("a line that is not UTF-8 is skipped, the others are read")
    func notUTF8() throws {
        let bytes = Array("lock-after 5m\n".utf8) + [0x6C, 0xFF, 0xFE, 0x0A] + Array("locker slock\n".utf8)
        let files = ConfigSources(read: { $0 == userConfig ? .bytes(bytes) : .missing },
                                  variable: { $0 == "HOME" ? "/home/ann" : nil })
        guard case .agent(let options) = try Invocation.parse([], sources: files) else { throw UsageError("not the agent") }
        #expect(options.configProblems.map(\.description) == ["\(userConfig):2: not UTF-8 text; line skipped"])
        #expect(options.lockAfter == .minutes(5))
        #expect(options.locker == "slock")
    }

    @Test("a file that cannot be read is a problem and skipped; --config's own file too")
    func unreadableFiles() throws {
        let files = ConfigSources(read: { path in
            switch path {
            case userConfig: .unreadable("it is a FIFO, not a regular file")
            case systemConfig: .text("lock-after 7m\n")
            default: .missing
            }
        }, variable: { $0 == "HOME" ? "/home/ann" : nil })
        guard case .agent(let options) = try Invocation.parse([], sources: files) else { throw UsageError("not the agent") }
        #expect(options.configProblems.map(\.description) == ["\(userConfig): cannot be read (it is a FIFO, not a regular file); file skipped"])
        #expect(options.lockAfter == .minutes(7), "the system's file is still read")
        #expect(options.configFiles == [systemConfig])
        let given = try #require(try agentOptions(["--config", "/nope"], [:]))
        #expect(given.configProblems.map(\.description) == ["/nope: cannot be read (it does not exist); file skipped"])
    }

    @Test("settings that conflict across files and flags: the user's file is kept before the system's, the flags always; the skipped file is a problem")
    func conflicts() throws {
        let userWarns = try #require(try agentOptions(["--lock-after", "1m"], [
            systemConfig: "locker slock\n", userConfig: "notify-before 2m\nnotifier warn\n",
        ]))
        #expect(userWarns.lockAfter == .minutes(1))
        #expect(userWarns.notifyBefore == nil)
        #expect(userWarns.locker == "slock", "the system's file still holds")
        #expect(userWarns.configFiles == [systemConfig])
        #expect(userWarns.configProblems.first?.description.hasPrefix("\(userConfig): --notify-before (2m) must be shorter than --lock-after (1m)") == true,
                "\(userWarns.configProblems)")
        #expect(userWarns.configProblems.first?.description.hasSuffix("; file skipped") == true)
        // One file's warning is another's notifier: together they are valid.
        let together = try #require(try agentOptions(["--notify-before", "1m"], [userConfig: "notifier warn\n"]))
        #expect(together.notifier == "warn")
        #expect(together.configProblems == [])
    }

    @Test("the flags' own errors still stop the agent (exit 64): the user is looking")
    func flagErrors() {
        #expect(usageError(["--config", "/x", "--no-config"], ["/x": ""]) == "--config and --no-config cannot be used together")
        #expect(usageError(["--notify-before", "1m"], [userConfig: "lock-after 2m\n"]) == "--notify-before needs --notifier CMD")
        #expect(usageError(["--lock-after", "5x"], [:])?.hasPrefix("--lock-after: '5x' is not a duration") == true)
    }
}

@Suite("The admin's policy")
struct PolicyTests {
    @Test("a longer lock time is clamped, with the change in words; a shorter one stays")
    func clamp() throws {
        let files = [policyFile: "max-lock-after 10m\n", userConfig: "lock-after 30m\nnotify-before 10m\nnotifier warn\n"]
        let clamped = try #require(try agentOptions([], files))
        #expect(clamped.lockAfter == .minutes(10))
        #expect(clamped.notifyBefore == .minutes(5), "the warning must still come before the lock")
        #expect(clamped.policy?.changes.first == "lock-after 30m is above the policy's max-lock-after: locking at 10m")
        #expect(clamped.origins["--lock-after"] == .policy(path: policyFile))
        let flagged = try #require(try agentOptions(["--lock-after", "1h"], [policyFile: "max-lock-after 10m"]))
        #expect(flagged.lockAfter == .minutes(10), "a flag does not beat the policy")
        let shorter = try #require(try agentOptions(["--lock-after", "2m"], [policyFile: "max-lock-after 10m"]))
        #expect(shorter.lockAfter == .minutes(2))
        #expect(shorter.policy?.changes.isEmpty == true)
    }

    @Test("secure, a pinned locker, inhibit-from and max-inhibit are enforced over flags and files")
    func enforced() throws {
        let policy = "secure\nlocker xsecurelock\ninhibit-from dbus, audio\nmax-inhibit 1h\n"
        let options = try #require(try agentOptions(["--locker", "true", "--not-when-fullscreen", "--not-when-audio", "--corners", "-0+0"],
                                                    [policyFile: policy]))
        #expect(options.secure)
        #expect(options.locker == "xsecurelock")
        #expect(options.allowedInhibitors == [.dbus, .audio])
        #expect(!options.follows(.fullscreen), "fullscreen is not in inhibit-from")
        #expect(options.follows(.audio))
        #expect(options.corners?.description == "00+0")
        #expect(options.maxInhibit == .hours(1))
        let config = options.config(locker: "xsecurelock")
        #expect(config.refusal(for: .audio) == "the agent runs with --secure")
        var unsecured = options
        unsecured.secure = false
        #expect(unsecured.config(locker: "x").refusal(for: .socket) == "the policy's inhibit-from allows dbus, audio")
        #expect(unsecured.config(locker: "x").refusal(for: .dbus) == nil)
    }

    @Test("ignore-xtest is enforced over flags and files: XTEST input does not count, and status says so")
    func ignoreXtest() throws {
        let options = try #require(try agentOptions([], [policyFile: "ignore-xtest\n"]))
        #expect(options.ignoreXtest)
        #expect(!options.secure, "only this of secure")
        #expect(options.origins["--ignore-xtest"] == .policy(path: policyFile))
        #expect(options.policy?.changes == ["ignore-xtest: input faked through XTEST (xdotool, jigglers, remote sessions) is not activity"])
        let config = options.config(locker: "x")
        #expect(!config.xtestInputCounts)
        #expect(!config.screensaverResetCountsAsActivity, "the counter resets XTEST input makes do not count either")
        #expect(config.settings.contains(ReportedSetting(name: "ignore-xtest", value: "yes", from: "policy \(policyFile)")))
        let flagged = try #require(try agentOptions(["--ignore-xtest"], [:]))
        #expect(flagged.config(locker: "x").settings.contains(ReportedSetting(name: "ignore-xtest", value: "yes", from: "flag")))
        #expect(try #require(try agentOptions([], [:])).config(locker: "x").xtestInputCounts, "by default XTEST input counts")
        let filed = try #require(try agentOptions([], [userConfig: "ignore-xtest\n"]))
        #expect(filed.ignoreXtest, "a config file takes it as it takes the other flags")
    }

    @Test("a policy line it cannot read never stops the agent: it is an error in the report and the agent becomes secure")
    func brokenPolicyFailsClosed() throws {
        let options = try #require(try agentOptions([], [policyFile: "max-lock-after 5m\nmax-lock-after ten minutes\nallow-everything\n"]))
        #expect(options.secure)
        #expect(options.policy?.errors.count == 2)
        #expect(options.policy?.errors.first?.hasPrefix("\(policyFile):2: max-lock-after: 'ten minutes' is not a duration") == true)
        #expect(options.lockAfter == .minutes(5), "the lines it could read still hold")
    }

    @Test("a policy with CRLF line ends: every line holds (not only the first)")
    func crlfPolicy() throws {
        let options = try #require(try agentOptions(["--lock-after", "8s"], [policyFile: "secure\r\nmax-lock-after 3s\r\n"]))
        #expect(options.policy?.errors == [])
        #expect(options.secure)
        #expect(options.lockAfter == .seconds(3))
    }

    @Test("a policy that exists but cannot be read, or a line of it that is not UTF-8: an error, and the agent is secure")
    func unreadablePolicy() throws {
        let dangling = ConfigSources(read: { $0 == policyFile ? .unreadable("it is a symbolic link to a missing file") : .missing },
                                     variable: { _ in nil })
        guard case .agent(let options) = try Invocation.parse([], sources: dangling) else { throw UsageError("not the agent") }
        #expect(options.secure)
        #expect(options.policy?.errors == ["\(policyFile): cannot be read (it is a symbolic link to a missing file); enforcing secure"])
        let badBytes = ConfigSources(read: { $0 == policyFile ? .bytes(Array("max-lock-after 5m\n".utf8) + [0xC3, 0x28, 0x0A]) : .missing },
                                     variable: { _ in nil })
        guard case .agent(let bad) = try Invocation.parse([], sources: badBytes) else { throw UsageError("not the agent") }
        #expect(bad.secure)
        #expect(bad.lockAfter == .minutes(5), "the lines it could read still hold")
        #expect(bad.policy?.errors == ["\(policyFile):2: not UTF-8 text; enforcing secure"])
    }

    @Test("the inhibitor of a source the policy does not allow is refused by the machine, whatever the edge did")
    func machineRefuses() throws {
        let options = try #require(try agentOptions(["--lock-after", "10s"], [policyFile: "inhibit-from dbus"]))
        var s = Story(options.config(locker: "lock-screen"))
        let refused = s.send(.hold("pid 9 (mpv)", why: "film"))
        #expect(refused.answer == .refused("the policy's inhibit-from allows dbus"))
        #expect(refused.logs(.warning) == ["not honoured: a hold of pid 9 (mpv) (socket) for film: the policy's inhibit-from allows dbus"])
        let id = s.send(.hold("firefox", why: "video", source: .dbus)).grantedID
        #expect(s.machine.inhibitors.map(\.id) == [id])
    }

    @Test("max-inhibit ends an endless inhibitor and a disable at its time; the lock then comes at once")
    func maxInhibit() throws {
        let options = try #require(try agentOptions(["--lock-after", "10m"], [policyFile: "max-inhibit 1h"]))
        var s = Story(options.config(locker: "lock-screen"))
        s.send(.hold("pid 9 (mpv)", why: "film"))
        s.expectLock(1, exactlyAt: Story.at(.hours(1)))
        var d = Story(options.config(locker: "lock-screen"))
        d.send(.disable(for: nil))
        d.expectLock(1, exactlyAt: Story.at(.hours(1)))
    }

    @Test("no user setting weakens the policy: no-logind, no-lock-before-sleep, suspend-resets-idle and logind-inhibitors all are refused under its secure, and said in its changes")
    func weakeningsRefusedUnderSecure() throws {
        let user = "no-logind\nno-lock-before-sleep\nsuspend-resets-idle\nlogind-inhibitors all\n"
        let options = try #require(try agentOptions([], [policyFile: "secure", userConfig: user]))
        #expect(options.logind && options.lockBeforeSleep && !options.suspendResetsIdle && options.logindInhibitors == "own")
        let config = options.config(locker: "x")
        #expect(config.lockBeforeSleep && config.suspendCountsAsIdle)
        #expect(options.policy?.changes.filter { $0.hasSuffix("refused: the policy makes the agent secure") }.count == 4)

        // Without the policy the user's own choices stand.
        let free = try #require(try agentOptions([], [userConfig: user]))
        #expect(!free.logind && !free.lockBeforeSleep && free.suspendResetsIdle && free.logindInhibitors == "all")
        #expect(free.weakeningsRefused.isEmpty)
    }

    @Test("a policy without secure: its lock-on-switch keeps logind; only the user's own logind inhibitors count")
    func weakeningsRefusedByPolicyKeys() throws {
        let options = try #require(try agentOptions([], [policyFile: "lock-on-switch", userConfig: "no-logind\nlogind-inhibitors all\nno-lock-before-sleep\n"]))
        #expect(options.logind && options.logindInhibitors == "own")
        #expect(!options.lockBeforeSleep, "not a thing this policy rests on")
        #expect(options.policy?.changes.contains("--no-logind refused: the policy's lock-on-switch follows logind") == true)
    }

    @Test("status shows the files read and the policy with its changes")
    func status() throws {
        let options = try #require(try agentOptions([], [policyFile: "max-lock-after 1m", userConfig: "lock-after 5m"]))
        let machine = IdleMachine(config: options.config(locker: "x"), now: Story.origin)
        let fields = JSONValue.object(machine.statusFields(at: Story.origin, lockerPid: nil))
        #expect(fields["config_files"] == .array([.string(userConfig)]))
        #expect(fields["config_errors"] == .array([]))
        #expect(fields["policy"]?["file"] == .string(policyFile))
        let text = HumanText.status(fields)
        #expect(text.contains("config: \(userConfig)"))
        #expect(text.contains("policy: \(policyFile) is in force\n  lock-after 5m is above the policy's max-lock-after: locking at 1m"))
    }
}

@Suite("Config problems in status, doctor and the audit trail")
struct ConfigProblemReportTests {
    @Test("status lists each problem; doctor makes each a warning (the screen still locks); the audit trail an entry with the file and line")
    func reported() throws {
        let options = try #require(try agentOptions([], [userConfig: "lock-after 5m\nfrobnicate\n"]))
        let machine = IdleMachine(config: options.config(locker: "x"), now: Story.origin)
        let fields = JSONValue.object(machine.statusFields(at: Story.origin, lockerPid: nil))
        let problem = "\(userConfig):2: unknown setting 'frobnicate' (the long options of 'xidlelock --help', without their dashes); line skipped"
        #expect(fields["config_errors"] == .array([.string(problem)]))
        #expect(HumanText.status(fields).contains("config errors (skipped):\n  \(problem)"))
        var facts = DoctorFacts()
        facts.status = fields
        let report = Doctor.diagnose(facts)
        #expect(report.findings.contains { $0.check == "config" && $0.level == .warning && $0.detail == problem })
        let entry = AuditRecord.config(options.configProblems[0])
        #expect(entry.event == "config")
        #expect(entry.journalFields.contains("XIDLELOCK_CONFIG_FILE=\(userConfig)"))
        #expect(entry.journalFields.contains("XIDLELOCK_CONFIG_LINE=2"))
    }
}

@Suite("The shipped examples")
struct ShippedExampleTests {
    static func example(_ name: String) throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return try String(contentsOf: root.appending(path: "packaging/examples/\(name)"), encoding: .utf8)
    }

    @Test("the example config and policy read without an error, and the policy changes what it says")
    func examplesParse() throws {
        let options = try #require(try agentOptions(["--lock-after", "30m"], [
            userConfig: try Self.example("config"), policyFile: try Self.example("policy"),
        ]))
        #expect(options.policy?.errors == [])
        #expect(options.lockAfter == .minutes(10))
        #expect(options.allowedInhibitors == [.dbus, .audio])
        #expect(options.follows(.fullscreen) == false, "the example policy does not allow fullscreen")
        #expect(options.stages.map(\.name) == ["dim"])
    }
}
