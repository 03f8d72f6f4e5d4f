import IdleCore
import Testing

/// Issue #20, item 5: a locker command whose exit status is not the locker's own.
@Suite("Locker commands whose end is not the locker's")
struct LockerCommandTests {
    typealias Kind = LockerEndHazard.Kind

    @Test("the table: what follows the locker, read as the shell splits the command", arguments: [
        // One command, or the locker last: its end is the command's.
        ("i3lock -n", Kind?.none),
        ("exec i3lock -n", nil),
        ("i3lock -n;", nil),
        ("i3lock -n >/dev/null 2>&1", nil),
        ("i3lock -n >&2", nil),
        ("i3lock -n >| /tmp/i3lock.log", nil),
        ("xset dpms force off; i3lock -n", nil),
        ("xset dpms force off && exec i3lock -n", nil),
        ("exec i3lock -n; xset s on", nil),                // exec: nothing after it runs
        ("xset s off | i3lock -n", nil),                   // a pipeline's status is its last command's
        // Operators inside quotes, escapes, substitutions and comments are no operators.
        ("i3lock -n -i 'a;b.png'", nil),
        ("i3lock -n -i \"a && b | c.png\"", nil),
        ("i3lock -n -i a\\;b.png", nil),
        ("i3lock -n -c $(printf 'ff;00' | tr -d ';')", nil),
        ("i3lock -n -i ${IMAGE:-a|b}", nil),
        ("i3lock -n -c `printf 'ff;00'`", nil),
        ("i3lock -n # then; nothing | else", nil),
        ("i3lock -n -c \"$(echo \"ff)00\")\"; ", nil),
        // Something runs after the locker.
        ("i3lock -n; xset dpms force on", .trailing),
        ("i3lock -n\nxset dpms force on", .trailing),
        ("xset s off; i3lock -n; xset s on", .trailing),
        ("(i3lock -n; xset s on)", .trailing),
        ("{ i3lock -n; xset s on; }", .trailing),
        ("DISPLAY=:0 /usr/bin/i3lock -n; true", .trailing),
        ("xsecurelock; notify-send back", .trailing),
        ("i3lock -n -i 'a;b.png'; true", .trailing),
        ("i3lock -n || true", .orElse),
        ("slock && xset s reset", .andThen),
        ("i3lock -n | tee -a lock.log", .pipeline),
        ("i3lock -n 2>&1 | logger -t lock", .pipeline),
        ("i3lock -n |& logger", .pipeline),
        // In the background: the command returns at once.
        ("i3lock -n &", .background),
        ("i3lock -n & wait", .background),
        ("i3lock -n &>/dev/null", .background),            // dash (Debian's sh) reads `&` then `>`
        ("screen-guard &", .background),
        // No command named like a locker: only the last one's end is seen.
        ("prepare-screen; screen-guard", .unknownLocker),
        ("prepare-screen; exec screen-guard", nil),
    ])
    func table(command: String, kind: Kind?) {
        #expect(ShellCommand.lockerEndHazard(command)?.kind == kind, "\(command): \(String(describing: ShellCommand.lockerEndHazard(command)))")
    }

    @Test("the warning names what follows and the form that works: exec, and the rest in --on-unlock")
    func wording() throws {
        let hazard = try #require(ShellCommand.lockerEndHazard("xset s off; i3lock -n; xset dpms force on"))
        #expect(hazard.locker == "i3lock -n")
        #expect(hazard.after == "xset dpms force on")
        #expect(hazard.suggested == "xset s off; exec i3lock -n")
        #expect(hazard.summary == "goes on after the locker")
        #expect(hazard.detail.contains("a kill of the locker would read as an unlock"))
        #expect(hazard.fix == "give `xset s off; exec i3lock -n` as the locker (exec: the agent then sees the locker's own end), and put `xset dpms force on` in --on-unlock (it runs after each unlock)")
        let chain = try #require(ShellCommand.lockerEndHazard("i3lock -n && a || b; c"))
        #expect(chain.after == "a || b; c")
        let background = try #require(ShellCommand.lockerEndHazard("i3lock -n &"))
        #expect(background.fix.contains("drop the `&`") && background.fix.contains("`exec i3lock -n`"))
    }

    @Test("doctor: a finding with the fix, as a warning (the lock still happens)")
    func doctor() {
        var facts = DoctorFacts()
        facts.display = ":0"
        facts.lockerCommand = "i3lock -n; xset dpms force on"
        facts.lockerProgram = "i3lock"
        facts.lockerPath = "/usr/bin/i3lock"
        let report = Doctor.diagnose(facts)
        let finding = report.findings.first { $0.level == .warning && $0.check == "locker" }
        #expect(finding?.detail.hasPrefix("`i3lock -n; xset dpms force on` goes on after the locker: `xset dpms force on` runs once") == true,
                "\(report.text)")
        #expect(finding?.fix?.contains("--on-unlock") == true)
        facts.lockerCommand = "exec i3lock -n"
        #expect(!Doctor.diagnose(facts).findings.contains { $0.level == .warning && $0.check == "locker" })
    }
}
