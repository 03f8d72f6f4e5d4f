/// How client commands show replies and events to people.
public enum HumanText {
    public static func status(_ reply: JSONValue) -> String {
        func duration(_ key: String, in value: JSONValue = reply) -> String? {
            value[key]?.integer.map { Millis($0).description }
        }
        var lines = ["state: \(reply["state"]?.string ?? "?")", "idle: \(duration("idle_ms") ?? "?")"]
        if let next = reply["next_stage"]?.string, let due = duration("next_stage_in_ms") {
            lines.append("next: \(next) in \(due)")
        } else {
            lines.append("next: none")
        }
        lines.append("locker: " + HumanText.locker(reply))
        if case .array(let inhibitors) = reply["inhibitors"], !inhibitors.isEmpty {
            for i in inhibitors {
                let span = duration("remaining_ms", in: i).map { "\($0) left" }
                    ?? i["source"]?.string.flatMap(InhibitorSource.init(rawValue:))?.row.lasts ?? "while it runs"
                // Since when: a hold left behind (a saver turned off by a program that has
                // ended) is told from a film by how long it has held.
                let held = i["remaining_ms"]?.integer == nil ? i["since_ms"]?.integer.flatMap { $0 < 1000 ? nil : "; held \(Millis($0))" } ?? "" : ""
                // Escaped here too: a terminal must never get a client's control characters.
                let why = i["why"]?.string.flatMap { $0.isEmpty ? nil : ": \(ClientText.sanitized($0))" } ?? ""
                let source = i["source"]?.string.map { " [\($0)]" } ?? ""
                lines.append("inhibited by \(who(i["who"]))\(source) (\(span)\(held))\(why)")
            }
        }
        if reply["disabled"]?.bool == true {
            lines.append("disabled" + (duration("disabled_remaining_ms").map { " for \($0) more" } ?? " until enabled"))
        }
        if let cards = HumanText.cards(reply["card"]) { lines.append("smart cards: " + cards) }
        if let gap = reply["last_suspend_gap"], gap != .null {
            lines.append("last suspend: slept \(duration("length_ms", in: gap) ?? "?"), \(duration("ago_ms", in: gap) ?? "?") ago")
        }
        if case .array(let files) = reply["config_files"], !files.isEmpty {
            lines.append("config: " + files.compactMap { $0.string.map { ClientText.sanitized($0) } }.joined(separator: ", "))
        }
        if case .array(let errors) = reply["config_errors"], !errors.isEmpty {
            lines.append("config errors (skipped):")
            for error in errors { lines.append("  " + ClientText.sanitized(error.string ?? "?", maxBytes: 400)) }
        }
        if let policy = reply["policy"], policy != .null {
            lines.append("policy: \(ClientText.sanitized(policy["file"]?.string ?? "?")) is in force")
            for key in ["errors", "changes"] {
                if case .array(let items)? = policy[key] {
                    for item in items { lines.append("  " + ClientText.sanitized(item.string ?? "?", maxBytes: 400)) }
                }
            }
        }
        if let session = reply["session"], session != .null {
            let from = session["from"]?.string == "logind" ? "logind" : "the environment"
            lines.append("session: \(ClientText.sanitized(session["id"]?.string ?? "?")) on \(ClientText.sanitized(session["display"]?.string ?? "?")) (from \(from))")
            // Under a policy the session must be logind's; out of one the environment may stand.
            let label = reply["policy"].map { $0 == .null } ?? true ? "note: " : "error: "
            for problem in session["problems"]?.array ?? [] { lines.append("  " + label + ClientText.sanitized(problem.string ?? "?", maxBytes: 400)) }
        }
        return lines.joined(separator: "\n")
    }

    /// `--lock-on-card-removal`: why pcscd cannot be watched, or each reader and its
    /// card, and the removal locks; nil when it is off.
    static func cards(_ card: JSONValue?) -> String? {
        guard let card, card["lock_on_removal"]?.bool == true else { return nil }
        if let error = card["error"]?.string {
            return "NOT watched: \(ClientText.sanitized(error)); a card taken out does NOT lock the screen until pcscd answers"
        }
        let readers = (card["readers"]?.array ?? []).map { r in
            let name = ClientText.sanitized(r["name"]?.string ?? "?")
            guard r["card"]?.string == "present" else { return "\(name): no card" }
            return "\(name): card \(r["atr"]?.string ?? "?")" + (r["counts"]?.bool == true ? " (its removal locks)" : " (not listed by card-atr)")
        }
        let locks = card["removal_locks"]?.integer ?? 0
        return (readers.isEmpty ? "watching pcscd; no reader" : readers.joined(separator: "; "))
            + "; \(locks) removal lock\(locks == 1 ? "" : "s") so far"
    }

    /// Who holds, escaped; never an empty field.
    static func who(_ value: JSONValue?) -> String {
        guard let text = value?.string else { return "?" }
        return text.isEmpty ? "an unnamed client" : ClientText.sanitized(text)
    }

    /// The locker's line: running and whether it covers the screen, or failing and the next try.
    static func locker(_ reply: JSONValue) -> String {
        guard let locker = reply["locker"], locker != .null else {
            return reply["locker_pid"]?.integer.map { "running, pid \($0)" } ?? "not running"
        }
        let heldByOther = GrabbedDevice.allCases.filter { locker["\($0.rawValue)_held_by_other"]?.bool == true }
        let held = GrabbedDevice.phrase(heldByOther)
        if locker["state"]?.string == "failing" {
            let reason = reply["last_locker_failure"]?["reason"]?.string.map { ClientText.sanitized($0, maxBytes: 400) } ?? "?"
            let next = locker["next_try_in_ms"]?.integer.map { Millis($0).description } ?? "?"
            let cause = heldByOther.isEmpty ? "" : "; another client holds \(held), so the locker cannot grab it"
            return "FAILING: the screen may NOT be locked; last failure: the locker \(reason)\(cause); next try in \(next)"
        }
        let pid = locker["pid"]?.integer.map { "pid \($0)" } ?? "pid ?"
        if !heldByOther.isEmpty {
            return "running, \(pid), NOT covering the screen: another client holds \(held), the screen may NOT be locked"
        }
        switch locker["covers_screen"] {
        case .bool(true)?: return "running, \(pid), holds the screen"
        case .bool(false)? where locker["let_go"]?.bool == true:
            return "running, \(pid), NOT covering the screen (it let go of the keyboard), the screen may NOT be locked"
        case .bool(false)?: return "running, \(pid), NOT covering the screen (it never grabbed the keyboard)"
        default: return "running, \(pid), starting"
        }
    }

    public static func event(_ event: JSONValue) -> String {
        func d(_ key: String) -> String { event[key]?.integer.map { Millis($0).description } ?? "?" }
        switch event["event"]?.string ?? "" {
        case "stage": return "stage \(event["stage"]?.string ?? "?") (idle \(d("idle_ms")))"
        case "locking": return "locking (attempt \(event["attempt"]?.integer ?? 1), idle \(d("idle_ms")))"
        case "locked": return event["requested"]?.bool == true ? "locked on request" : "locked (idle \(d("idle_ms")))"
        case "locker-not-covering":
            return "the locker does NOT cover the screen" + (event["let_go"]?.bool == true ? ": it let go of the keyboard" : "") + " (running \(d("running_ms")))"
        case "keyboard-held-by-other", "pointer-held-by-other":
            let device = event["event"]?.string?.split(separator: "-").first.map(String.init) ?? "?"
            return "another client holds the \(device)" + (event["held_before_start"]?.bool == true ? " since before the locker started" : "")
                + ": the screen may NOT be covered"
        case "sleeping": return event["covered"]?.bool == true ? "sleeping (locked)" : "sleeping (the screen may NOT be locked)"
        case "resumed": return "resumed"
        case "card-inserted":
            return "card \(event["atr"]?.string ?? "?") in \(ClientText.sanitized(event["reader"]?.string ?? "?"))" + (event["counts"]?.bool == true ? "" : " (not counted)")
        case "card-removed":
            return "card taken out of \(ClientText.sanitized(event["reader"]?.string ?? "?"))" + (event["locks"]?.bool == true ? ": locking" : " (not counted)")
        case "card-watch": return event["error"]?.string.map { "smart cards not watched: \(ClientText.sanitized($0))" } ?? "smart cards watched again"
        case "locker-failed": return "locker failed: \(event["reason"]?.string ?? "?"); retry in \(d("retry_in_ms"))"
        case "unlocked": return "unlocked (locked \(d("locked_ms")))"
        case "activity": return "activity resumed (idle \(d("idle_ms")))"
        case "suspend-gap": return "suspend gap of \(d("length_ms"))"
        case "inhibited": return "inhibited by \(who(event["who"]))" + ((event["why"]?.string).map { $0.isEmpty ? "" : ": \(ClientText.sanitized($0))" } ?? "")
        case "uninhibited": return "inhibitor of \(who(event["who"])) ended"
        case "disabled": return "disabled" + (event["remaining_ms"]?.integer.map { " for \(Millis($0))" } ?? "")
        case "enabled": return "enabled"
        default: return event.text
        }
    }
}
