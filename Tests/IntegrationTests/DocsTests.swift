import Foundation
import IdleCore
import Testing

// Keeps `xidlelock --help`, `xidlelock help COMMAND`, man/xidlelock.1, README.md and
// the guides in docs/ in step, by running the built binary and reading its help as a
// user would:
//   - every flag and command the binary prints is in the man page's OPTIONS or
//     COMMANDS section (with its value name), and every flag or command listed
//     there is one the binary knows;
//   - docs/flags.md is exactly what the help prints, rendered as a list (it was
//     README.md's "## Flags" section until the README became a front page). When it
//     drifts the test shows the new file; `XIDLELOCK_UPDATE_DOCS=1 swift test
//     --filter DocsTests` writes it;
//   - a line of README.md or docs/*.md that starts with `xidlelock ...` names a
//     command or option the binary has, and every docs/ page README.md links to
//     exists.
// The binary: $XIDLELOCK_BIN, or .build/debug/xidlelock (swift test builds it).
// Names start with `docs` to stay clear of the other integration tests' helpers.

private let docsPackageRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

private func docsBinary() -> String {
    if let path = ProcessInfo.processInfo.environment["XIDLELOCK_BIN"], !path.isEmpty { return path }
    return docsPackageRoot.appendingPathComponent(".build/debug/xidlelock").path
}

private func docsRun(_ arguments: [String]) throws -> String {
    let binary = docsBinary()
    guard FileManager.default.isExecutableFile(atPath: binary) else {
        throw DocsError("no xidlelock binary at \(binary): run `swift build` or set XIDLELOCK_BIN")
    }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: binary)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw DocsError("xidlelock \(arguments.joined(separator: " ")) exited with \(process.terminationStatus)")
    }
    return String(decoding: data, as: UTF8.self)
}

private struct DocsError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

// MARK: The help, as printed

/// One option line of a help text: `--lock-after DURATION` and its help.
private struct DocsOption: Equatable {
    var spec: String
    var help: String
    var flag: String { String(spec.prefix { $0 != " " }) }
}

/// One command's help: `help <name>` (the main help for `run`).
private struct DocsCommand {
    var name: String
    var usage: [String]
    var abstract: String
    var options: [DocsOption]
}

/// The lines of a help section, from the line after `heading` to the next blank line
/// or heading.
private func docsSection(_ heading: String, of text: String) -> [String] {
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    guard let start = lines.firstIndex(of: heading) else { return [] }
    var out: [String] = []
    for line in lines[(start + 1)...] {
        if line.trimmingCharacters(in: .whitespaces).isEmpty || line.hasSuffix(":") && !line.hasPrefix(" ") { break }
        out.append(line)
    }
    return out
}

private func docsOptions(_ text: String) -> [DocsOption] {
    var options: [DocsOption] = []
    for line in docsSection("OPTIONS:", of: text) {
        if line.hasPrefix("  -") {
            // The flag column ends at two spaces; a long flag has its help on the next line.
            let body = line.dropFirst(2)
            let parts = body.split(separator: "  ", maxSplits: 1)
            options.append(DocsOption(spec: String(parts[0]),
                                      help: parts.count > 1 ? parts[1].trimmingCharacters(in: .whitespaces) : ""))
        } else if let last = options.indices.last {
            let more = line.trimmingCharacters(in: .whitespaces)
            options[last].help += options[last].help.isEmpty ? more : " " + more
        }
    }
    return options
}

private func docsHelp() throws -> (main: String, commands: [DocsCommand], otherUsage: [String]) {
    let main = try docsRun(["--help"])
    let lines = main.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    // USAGE: the first line after "USAGE: ", then the synopsis lines right under it.
    // Only those: wrapped help lines further down are indented too.
    var usage: [String] = []
    if let start = lines.firstIndex(where: { $0.hasPrefix("USAGE: ") }) {
        usage.append(String(lines[start].dropFirst("USAGE: ".count)))
        for line in lines[(start + 1)...] {
            guard line.hasPrefix("       xidlelock ") else { break }
            usage.append(line.trimmingCharacters(in: .whitespaces))
        }
    }
    // A command's line starts two spaces in; its wrapped abstract continues deeper.
    let names = docsSection("COMMANDS:", of: main)
        .filter { $0.hasPrefix("  ") && !$0.hasPrefix("   ") }
        .compactMap { $0.split(separator: " ").first.map(String.init) }
    var commands = [DocsCommand(name: "run", usage: [usage.first ?? ""], abstract: "", options: docsOptions(main))]
    for name in names {
        let text = try docsRun(["help", name])
        let helpLines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let synopsis = helpLines.first.map { String($0.dropFirst("USAGE: ".count)) } ?? ""
        let abstract = helpLines.dropFirst(2).prefix { !$0.isEmpty }.joined(separator: " ")
        commands.append(DocsCommand(name: name, usage: [synopsis], abstract: abstract, options: docsOptions(text)))
    }
    let documented = Set(commands.flatMap(\.usage))
    return (main, commands, usage.filter { !documented.contains($0) })
}

/// Every `--flag` the binary knows: its options, and --help/--version from USAGE.
private func docsKnownFlags(_ help: (main: String, commands: [DocsCommand], otherUsage: [String])) -> Set<String> {
    var flags = Set(help.commands.flatMap(\.options).map(\.flag))
    for line in help.otherUsage {
        for match in line.matches(of: /--[a-z][a-z-]*/) { flags.insert(String(match.output)) }
    }
    return flags
}

/// A usage form is a synopsis: `xidlelock` followed by a command of the table, an
/// option, or a bracketed part; never a fragment of a wrapped help line.
@Test func docsUsageFormsAreSynopses() throws {
    let help = try docsHelp()
    let names = Set(Invocation.commands.map(\.name) + ["help", "COMMAND"])
    for form in help.commands.flatMap(\.usage) + help.otherUsage {
        let words = form.split(separator: " ")
        #expect(words.first == "xidlelock", "not a synopsis: '\(form)'")
        guard words.count > 1 else { continue }
        let second = words[1].trimmingCharacters(in: CharacterSet(charactersIn: "[],"))
        #expect(names.contains(second) || second.hasPrefix("-") || words[1].hasPrefix("["),
                "'\(form)' reads as a usage form but names no command or option")
    }
    let pages = try docsMarkdownPages()
    #expect(pages.count > 1, "found no guides in docs/")
    for (name, text) in pages {
        for line in text.split(separator: "\n") where line.hasPrefix("`xidlelock ") {
            let form = line.dropFirst().prefix { $0 != "`" }
            let second = form.split(separator: " ").dropFirst().first.map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "[],")) } ?? ""
            #expect(names.contains(second) || second.hasPrefix("-") || second.isEmpty,
                    "\(name) lists '\(form)' as a command")
        }
    }
}

/// README.md and every docs/*.md, by their path from the package root.
private func docsMarkdownPages() throws -> [(name: String, text: String)] {
    let docs = docsPackageRoot.appendingPathComponent("docs")
    let names = try FileManager.default.contentsOfDirectory(atPath: docs.path)
        .filter { $0.hasSuffix(".md") }.sorted().map { "docs/\($0)" }
    return try (["README.md"] + names).map { name in
        (name, try String(contentsOf: docsPackageRoot.appendingPathComponent(name), encoding: .utf8))
    }
}

/// The README is a front page: what it points to must be there.
@Test func docsReadmeLinksToGuidesThatExist() throws {
    let readme = try String(contentsOf: docsPackageRoot.appendingPathComponent("README.md"), encoding: .utf8)
    let links = Set(readme.matches(of: /\]\((docs\/[a-z-]+\.md)(#[a-z0-9-]*)?\)/).map { String($0.output.1) })
    #expect(links.contains("docs/flags.md"), "README.md does not link to docs/flags.md")
    for link in links.sorted() {
        #expect(FileManager.default.fileExists(atPath: docsPackageRoot.appendingPathComponent(link).path),
                "README.md links to \(link), which does not exist")
    }
}

@Test func docsHelpListsEveryCommandAndFlagOfTheTable() throws {
    let help = try docsHelp()
    #expect(help.commands.map(\.name) == Invocation.commands.map(\.name))
    for command in Invocation.commands {
        let printed = help.commands.first { $0.name == command.name }
        let specs = command.options.map { doc in doc.valueName.map { "\(doc.flag) \($0)" } ?? doc.flag }
        #expect(printed?.options.map(\.spec) == specs, "help \(command.name)")
    }
}

// MARK: The man page

/// A roff line as the reader sees it: macros' arguments joined, escapes resolved.
private func docsRoffText(_ line: String) -> String {
    var text = line
    if line.hasPrefix(".") {
        let macro = String(line.dropFirst().prefix { $0 != " " })
        var arguments: [String] = []
        var current = ""
        var quoted = false
        var started = false
        for c in line.dropFirst(macro.count + 1) {
            if c == "\"" {
                quoted.toggle()
                started = true
            } else if c == " " && !quoted {
                if started { arguments.append(current) }
                current = ""
                started = false
            } else {
                current.append(c)
                started = true
            }
        }
        if started { arguments.append(current) }
        // .B and .I join their words with spaces; .BR, .BI, .IR … alternate fonts without.
        text = arguments.joined(separator: macro.count == 2 ? "" : " ")
    }
    for (escape, plain) in [("\\-", "-"), ("\\fB", ""), ("\\fI", ""), ("\\fR", ""), ("\\fP", ""),
                            ("\\(aq", "'"), ("\\e", "\\"), ("\\&", "")] {
        text = text.replacingOccurrences(of: escape, with: plain)
    }
    return text
}

/// The tag lines (after `.TP` or `.TQ`) of a man page section, as plain text.
private func docsManTags(_ page: String, section: String) -> [String] {
    let lines = page.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    var tags: [String] = []
    var inSection = false
    for (i, line) in lines.enumerated() {
        if line.hasPrefix(".SH ") {
            inSection = line.dropFirst(4).trimmingCharacters(in: CharacterSet(charactersIn: "\" ")) == section
        } else if inSection, line == ".TP" || line == ".TQ", i + 1 < lines.count {
            tags.append(docsRoffText(lines[i + 1]))
        }
    }
    return tags
}

/// The words of a man page section, as plain text.
private func docsManSectionWords(_ page: String, section: String) -> Set<String> {
    var words = Set<String>()
    var inSection = false
    for line in page.split(separator: "\n").map(String.init) {
        if line.hasPrefix(".SH ") {
            inSection = line.dropFirst(4).trimmingCharacters(in: CharacterSet(charactersIn: "\" ")) == section
        } else if inSection {
            for word in docsRoffText(line).split(whereSeparator: { " []|".contains($0) }) { words.insert(String(word)) }
        }
    }
    return words
}

private func docsManPage() throws -> String {
    try String(contentsOf: docsPackageRoot.appendingPathComponent("man/xidlelock.1"), encoding: .utf8)
}

@Test func docsManPageDocumentsEveryFlagAndCommandTheBinaryKnows() throws {
    let help = try docsHelp()
    let page = try docsManPage()
    let tags = docsManTags(page, section: "OPTIONS") + docsManTags(page, section: "COMMANDS")
    for command in help.commands {
        for option in command.options {
            #expect(tags.contains { $0.contains(option.spec) },
                    "man/xidlelock.1 has no OPTIONS or COMMANDS entry for '\(option.spec)' (xidlelock help \(command.name))")
        }
    }
    let commandTags = Set(docsManTags(page, section: "COMMANDS").compactMap { $0.split(separator: " ").first.map(String.init) })
    for command in help.commands {
        #expect(commandTags.contains(command.name), "man/xidlelock.1 COMMANDS has no entry for '\(command.name)'")
        #expect(docsManSectionWords(page, section: "SYNOPSIS").contains(command.name),
                "man/xidlelock.1 SYNOPSIS lacks '\(command.name)'")
    }
    for flag in docsKnownFlags(help) {
        #expect(tags.contains { $0.contains(flag) }, "man/xidlelock.1 does not document \(flag)")
    }
}

@Test func docsManPageDocumentsNothingTheBinaryDoesNotKnow() throws {
    let help = try docsHelp()
    let known = docsKnownFlags(help)
    let page = try docsManPage()
    for tag in docsManTags(page, section: "OPTIONS") + docsManTags(page, section: "COMMANDS") {
        for match in tag.matches(of: /--[a-z][a-z-]*/) {
            #expect(known.contains(String(match.output)),
                    "man/xidlelock.1 documents \(match.output), which xidlelock --help does not know")
        }
    }
    let names = Set(help.commands.map(\.name) + ["help"])
    for tag in docsManTags(page, section: "COMMANDS") {
        if tag.hasPrefix("-") { continue }  // an option of a command, nested under it
        let name = String(tag.prefix { $0 != " " && $0 != "[" })
        #expect(names.contains(name), "man/xidlelock.1 documents a command '\(name)' that xidlelock does not have")
    }
}

/// The environment variables the code reads or gives its children, by name.
private func docsVariablesInSources() throws -> Set<String> {
    let sources = docsPackageRoot.appendingPathComponent("Sources")
    guard let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil) else { return [] }
    var names = Set<String>()
    for case let file as URL in files where ["swift", "c"].contains(file.pathExtension) {
        let text = try String(contentsOf: file, encoding: .utf8)
        for match in text.matches(of: /(?:getenv|environment|EnvironmentVariable)\("([A-Z][A-Z0-9_]*)"/) {
            names.insert(String(match.output.1))
        }
    }
    return names
}

@Test func docsManPageEnvironmentListsWhatTheCodeReadsAndSets() throws {
    let variables = try docsVariablesInSources()
    #expect(variables.contains("DISPLAY") && variables.contains("XIDLELOCK_EVENT"), "the source scan found \(variables)")
    // A tag may name several: "DBUS_SESSION_BUS_ADDRESS, DBUS_SYSTEM_BUS_ADDRESS".
    let entries = Set(docsManTags(try docsManPage(), section: "ENVIRONMENT")
        .flatMap { $0.split(whereSeparator: { $0 == "," || $0 == " " }).map(String.init) })
    for name in variables.sorted() {
        #expect(entries.contains(name), "man/xidlelock.1 ENVIRONMENT has no entry for \(name), which the code reads or sets")
    }
    for name in entries where name.hasPrefix("XIDLELOCK_") {
        #expect(variables.contains(name), "man/xidlelock.1 ENVIRONMENT documents \(name), which the code never sets")
    }
}

/// Help fits an 80-column terminal.
@Test func docsHelpFitsEightyColumns() throws {
    for arguments in [["--help"]] + Invocation.commands.map({ ["help", $0.name] }) {
        for line in try docsRun(arguments).split(separator: "\n") where line.count > 80 {
            Issue.record("xidlelock \(arguments.joined(separator: " ")): \(line.count) columns: \(line)")
        }
    }
}

@Test func docsManPageNamesTheBinarysVersion() throws {
    let version = try docsRun(["--version"]).trimmingCharacters(in: .whitespacesAndNewlines)
    let th = try docsManPage().split(separator: "\n").first { $0.hasPrefix(".TH ") }
    #expect(th?.contains("\"\(version)\"") == true, "man/xidlelock.1 .TH does not name \(version): \(th ?? "")")
}

// MARK: docs/flags.md

/// docs/flags.md, rendered from the help.
private func docsFlagsPage(_ help: (main: String, commands: [DocsCommand], otherUsage: [String])) -> String {
    func list(_ options: [DocsOption]) -> String {
        options.map { "- `\($0.spec)`: \($0.help)" }.joined(separator: "\n")
    }
    var text = """
        # Flags and commands

        What `xidlelock --help` and `xidlelock help COMMAND` print, as a list. Kept in
        step with them by `Tests/IntegrationTests/DocsTests.swift`, which prints this
        page when it drifts. Each is described in full in the man page, xidlelock(1).

        """
    for command in help.commands {
        if command.name == "run" {
            text += "\nThe agent, `\(command.usage[0])`:\n\n\(list(command.options))\n"
            continue
        }
        text += "\n`\(command.usage[0])`: \(command.abstract)\n"
        if !command.options.isEmpty { text += "\n\(list(command.options))\n" }
    }
    for line in help.otherUsage {
        let forms = line.split(separator: " | ").map { $0.hasPrefix("xidlelock ") ? String($0) : "xidlelock \($0)" }
        text += "\n" + forms.map { "`\($0)`" }.joined(separator: ", ") + ".\n"
    }
    return text
}

@Test func docsFlagsPageMatchesTheHelp() throws {
    let help = try docsHelp()
    let url = docsPackageRoot.appendingPathComponent("docs/flags.md")
    let expected = docsFlagsPage(help)
    guard let current = try? String(contentsOf: url, encoding: .utf8) else {
        if ProcessInfo.processInfo.environment["XIDLELOCK_UPDATE_DOCS"] == "1" {
            try expected.write(to: url, atomically: true, encoding: .utf8)
            return
        }
        Issue.record("there is no docs/flags.md; it should read:\n\(expected)")
        return
    }
    if current != expected, ProcessInfo.processInfo.environment["XIDLELOCK_UPDATE_DOCS"] == "1" {
        try expected.write(to: url, atomically: true, encoding: .utf8)
        return
    }
    #expect(current == expected, """
        docs/flags.md is not what xidlelock --help prints \
        (XIDLELOCK_UPDATE_DOCS=1 swift test --filter DocsTests writes it). It should read:
        \(expected)
        """)
    // And both ways by name, for a clearer message than the diff above.
    let known = docsKnownFlags(help)
    let listed = Set(current.matches(of: /--[a-z][a-z-]*/).map { String($0.output) })
    for flag in listed.subtracting(known) {
        Issue.record("docs/flags.md lists \(flag), which xidlelock does not know")
    }
    for flag in known.subtracting(listed) {
        Issue.record("docs/flags.md lacks \(flag)")
    }
}

/// The lists of source words in the man page (`ignore=`, the policy's `inhibit-from`)
/// and the admin guide name every source the binary knows, and no other.
@Test func docsListEverySourceOfHolds() throws {
    let man = try String(contentsOf: docsPackageRoot.appendingPathComponent("man/xidlelock.1"), encoding: .utf8)
    let admin = try String(contentsOf: docsPackageRoot.appendingPathComponent("docs/admin.md"), encoding: .utf8)
    let words = InhibitorSource.allCases.map(\.rawValue)
    func manList(after start: String, until end: String) -> [String] {
        guard let from = man.range(of: start), let to = man.range(of: end, range: from.upperBound..<man.endIndex) else { return [] }
        return man[from.upperBound..<to.lowerBound].split(separator: "\n").compactMap { line in
            guard line.hasPrefix(".B ") || line.hasPrefix(".BR ") || line.hasPrefix(".RB ") else { return nil }
            let word = line.split(separator: " ").dropFirst().first { $0 != "(" }.map(String.init) ?? ""
            return word.replacingOccurrences(of: "\\-", with: "-")
        }.filter { $0 != "all" && $0 != "none" }
    }
    #expect(Set(manList(after: "lists the holds it fires through, by source", until: "of them.")) == Set(words))
    #expect(Set(manList(after: "Which sources may hold the lock off: a comma-separated list of", until: "The inhibitors of the others")) == Set(words))
    let adminLine = admin.split(separator: "\n").first { $0.hasPrefix("| `inhibit-from LIST` | which sources") } ?? ""
    for word in words { #expect(adminLine.contains("`\(word)`"), "docs/admin.md's inhibit-from row lacks \(word)") }
}

// MARK: Events, the audit trail, status keys: lists derived from the code

/// The words of a man page section as plain text, without the punctuation around them.
private func docsManWords(_ page: String, section: String) -> Set<String> {
    Set(docsManSectionWords(page, section: section).map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "(),;.:'\"")) })
}

/// One announcement of each kind, and of each device of a kind that names one. The
/// switch has no default: a new kind does not compile until it has a number here, and
/// the test fails until an announcement of that number is in the list.
private let docsAnnouncements: [Announcement] = {
    let inhibitor = Inhibitor(id: 1, who: "w", why: "y", until: nil, source: .dbus)
    return [
        .stageFired(name: "lock", idle: .ms(1)), .locking(idle: .ms(1), requested: false, attempt: 1),
        .locked(idle: .ms(1), requested: false), .lockerNotCovering(runningFor: .ms(1), letGo: false),
        .lockerNotCovering(runningFor: .ms(1), letGo: true),
    ] + GrabbedDevice.allCases.map { .grabHeldByOther($0, beforeStart: true) } + [
        .lockerFailed(kind: "exited", reason: "r", retryIn: .ms(1)), .unlocked(lockedFor: .ms(1)),
        .activityResumed(idleBefore: .ms(1)), .suspendGap(length: .ms(1)), .inhibited(inhibitor), .uninhibited(inhibitor),
        .disabled(remaining: .ms(1), by: "b"), .enabled(by: "b"), .sleeping(covered: true), .resumed,
        .screenOff(lockedFor: .ms(1)), .powerSource(onBattery: true),
        .cardInserted(reader: "r", atr: "3B", counts: true), .cardRemoved(reader: "r", atr: "3B", locks: true),
        .cardRemoved(reader: "r", atr: "3B", locks: false), .cardWatch(error: "e"),
    ]
}()

private func docsKind(_ a: Announcement) -> Int {
    switch a {
    case .stageFired: 0
    case .locking: 1
    case .locked: 2
    case .lockerNotCovering: 3
    case .grabHeldByOther: 4
    case .lockerFailed: 5
    case .unlocked: 6
    case .activityResumed: 7
    case .suspendGap: 8
    case .inhibited: 9
    case .uninhibited: 10
    case .disabled: 11
    case .enabled: 12
    case .sleeping: 13
    case .resumed: 14
    case .screenOff: 15
    case .powerSource: 16
    case .cardInserted: 17
    case .cardRemoved: 18
    case .cardWatch: 19
    }
}

/// The `event` names of `xidlelock events --json`, from the code's own JSON.
private func docsEventNames() -> [String] {
    var names: [String] = []
    for a in docsAnnouncements {
        guard case .object(let members) = a.json, case .string(let name)? = members.first(where: { $0.0 == "event" })?.1 else { continue }
        if !names.contains(name) { names.append(name) }
    }
    return names
}

@Test func docsListEveryEvent() throws {
    #expect(Set(docsAnnouncements.map(docsKind)) == Set(0...19), "docsAnnouncements lacks a kind of announcement")
    let names = docsEventNames()
    #expect(names.contains("power-source") && names.contains("keyboard-held-by-other"), "\(names)")
    let man = docsManWords(try docsManPage(), section: "CONTROL SOCKET")
    let usage = try String(contentsOf: docsPackageRoot.appendingPathComponent("docs/usage.md"), encoding: .utf8)
    for name in names {
        #expect(man.contains(name), "man/xidlelock.1 CONTROL SOCKET does not list the event \(name)")
        #expect(usage.contains("`\(name)`"), "docs/usage.md does not list the event \(name)")
    }
}

/// Every entry the agent's audit trail writes: the kinds of `AuditRecord.messageIDs`
/// (the guard's, guard-*, are THE GUARD's), with the fields the code gives each.
@Test func docsListEveryAuditEntryAndField() throws {
    var records = docsAnnouncements.compactMap(AuditRecord.of)
    records += AuditRecord.policy(PolicyReport(path: "/etc/xidlelock/policy", changes: ["c"], errors: ["e"]))
    records.append(AuditRecord.config(ConfigProblem(path: "/c", line: 1, message: "m")))
    records.append(AuditRecord.runtimeFiles(path: "/p", problem: "p", consequence: "c"))
    let kinds = AuditRecord.messageIDs.keys.filter { !$0.hasPrefix("guard-") }
    #expect(Set(records.map(\.event)) == Set(kinds), "the records made here are not every kind of the agent's entries")
    let page = try docsManPage()
    let man = docsManWords(page, section: "AUDIT TRAIL")
    let admin = try String(contentsOf: docsPackageRoot.appendingPathComponent("docs/admin.md"), encoding: .utf8)
    let table = admin.split(separator: "\n").filter { $0.hasPrefix("| `") }
    for kind in kinds.sorted() {
        let id = AuditRecord.messageIDs[kind] ?? ""
        #expect(man.contains(kind), "man/xidlelock.1 AUDIT TRAIL does not list \(kind)")
        #expect(table.contains { $0.contains("`\(kind)`") && $0.contains("`\(id)`") },
                "docs/admin.md's audit table has no row for \(kind) with its MESSAGE_ID \(id)")
    }
    for field in Set(records.flatMap { $0.fields.map(\.name) }).sorted() {
        #expect(man.contains(field), "man/xidlelock.1 AUDIT TRAIL does not name the field \(field)")
        #expect(table.contains { $0.contains("`\(field)`") }, "docs/admin.md's audit table does not name the field \(field)")
    }
    let comment = try String(contentsOf: docsPackageRoot.appendingPathComponent("Sources/IdleCore/Audit.swift"), encoding: .utf8)
        .split(separator: "\n").filter { $0.trimmingCharacters(in: .whitespaces).hasPrefix("//") }.joined(separator: " ")
    for kind in AuditRecord.messageIDs.keys.sorted() {
        #expect(comment.contains(kind), "the comment on XIDLELOCK_EVENT in Sources/IdleCore/Audit.swift does not list \(kind)")
    }
}

/// The exit statuses of the man page's EXIT STATUS section are those --help names.
@Test func docsHelpNamesEveryExitStatus() throws {
    let statuses = docsManTags(try docsManPage(), section: "EXIT STATUS").filter { Int($0) != nil }
    #expect(statuses.count >= 5, "\(statuses)")
    let help = try docsRun(["--help"]).replacingOccurrences(of: "\n", with: " ")
    guard let range = help.range(of: "Exit status:") else {
        Issue.record("--help has no 'Exit status:'")
        return
    }
    let named = Set(help[range.upperBound...].matches(of: /(?:^|[ ,])([0-9]+) [a-z]/).map { String($0.output.1) })
    #expect(named == Set(statuses), "--help names exit statuses \(named.sorted()), the man page \(statuses)")
}

/// The keys of a running agent's status, at every depth (each object, and the first
/// object of each list), with the screen-off setting on so that `screen_off` and
/// `monitor` are objects: each is in the man page's CONTROL SOCKET section, which
/// README.md names as the reference for every status field.
@Test func docsManPageListsEveryStatusKey() async throws {
    let status = try await Sandbox.with { s in
        _ = try await s.startControlledAgent(["--lock-after", "1h", "--locker", Script.locker, "--screen-off-after-lock", "1h"])
        return try await s.status()
    }
    var keys = Set<String>()
    func collect(_ value: Any) {
        if let object = value as? [String: Any] {
            for (key, inner) in object {
                keys.insert(key)
                collect(inner)
            }
        } else if let list = value as? [Any], let first = list.first {
            collect(first)
        }
    }
    collect(status)
    // The reply's envelope, not the status: `{"v":1,"ok":true,…}`.
    keys.subtract(["v", "ok"])
    #expect(keys.isSuperset(of: ["state", "desktop", "audit", "monitor", "guard", "stages"]), "\(keys.sorted())")
    let man = docsManWords(try docsManPage(), section: "CONTROL SOCKET")
    for key in keys.sorted() {
        #expect(man.contains(key), "man/xidlelock.1 CONTROL SOCKET does not list the status key \(key)")
    }
}

/// Every setting a policy file may hold (the code's own table) has its entry in the man
/// page's POLICY section and a row in docs/admin.md's policy table; and no entry there
/// names a setting the code does not know.
@Test func docsListEveryPolicySetting() throws {
    let names = Policy.settingNames
    #expect(names.contains("metrics-directory") && names.contains("secure"), "\(names)")
    let tags = docsManTags(try docsManPage(), section: "POLICY").compactMap { $0.split(separator: " ").first.map(String.init) }
    let admin = try String(contentsOf: docsPackageRoot.appendingPathComponent("docs/admin.md"), encoding: .utf8)
    let policy = admin.components(separatedBy: "## The policy").dropFirst().first?.components(separatedBy: "\n## ").first ?? ""
    let rows = policy.split(separator: "\n").filter { $0.hasPrefix("| `") }
    for name in names {
        #expect(tags.contains(name), "man/xidlelock.1 POLICY has no entry for the policy setting \(name)")
        #expect(rows.contains { $0.hasPrefix("| `\(name)") || $0.contains(", `\(name)") || $0.contains("`\(name) ") || $0.contains("`\(name)`") },
                "docs/admin.md's policy table has no row for \(name)")
    }
    for tag in Set(tags) where tag.first?.isLetter == true {
        #expect(names.contains(tag), "man/xidlelock.1 POLICY documents '\(tag)', which is no policy setting")
    }
}
