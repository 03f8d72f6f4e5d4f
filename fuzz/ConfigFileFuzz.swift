// Fuzz target: config files and the admin's policy (`Invocation.parse` with
// files). The input is split at the first NUL: the user's config file, then the
// policy. No file ever stops the agent (only flags may: there are none here); a
// policy it could not read makes the agent secure, and a max-lock-after it could
// read bounds the lock time.

func fuzzConfigFile(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = fuzzString(data, size)
    let parts = input.split(separator: "\0", maxSplits: 1, omittingEmptySubsequences: false)
    let config = String(parts[0])
    let policy = parts.count > 1 ? String(parts[1]) : nil
    let files: [String: String] = ["/home/u/.config/xidlelock/config": config]
        .merging(policy.map { ["/etc/xidlelock/policy": $0] } ?? [:]) { a, _ in a }
    let sources = ConfigSources(read: { files[$0].map(FileContents.text) ?? .missing },
                                variable: { $0 == "HOME" ? "/home/u" : nil })
    let options: AgentOptions
    do {
        guard case .agent(let parsed) = try Invocation.parse([], sources: sources) else {
            finding("no arguments made something other than the agent", input)
        }
        options = parsed
    } catch {
        finding("a config file stopped the agent: \(error.message)", input)
    }
    if let report = options.policy {
        if !report.errors.isEmpty && !options.secure { finding("a policy error did not make the agent secure", input) }
        // The policy as read line by line: whatever max-lock-after it holds, the lock time is within it.
        var read = Policy()
        for (_, line) in ConfigText.lines(Array((policy ?? "").utf8)) {
            guard let line, let setting = try? ConfigText.setting(Substring(line), table: Policy.specs),
                  let spec = Policy.specs.first(where: { $0.flag == setting.0 }) else { continue }
            try? spec.apply(&read, setting.1)
        }
        if let max = read.maxLockAfter, options.lockAfter > max {
            finding("lock-after \(options.lockAfter) above the policy's \(max)", input)
        }
        if read.secure && !options.secure { finding("the policy's secure was not enforced", input) }
    } else if policy != nil {
        finding("a policy file was there but no report", input)
    }
    _ = options.config(locker: "i3lock -n")
    return 0
}
