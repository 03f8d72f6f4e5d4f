// What `xidlelock status` reports: the machine's state in the user's words.

extension IdleMachine {
    /// The state in the user's words: locking, locked, locker-not-covering,
    /// locker-failing, disabled, inhibited, notified or active.
    public var stateName: String {
        if lockerActive { return supervisor.stateName }
        if isDisabled { return "disabled" }
        if !inhibitors.isEmpty { return "inhibited" }
        if hasNotified { return "notified" }
        return "active"
    }

    /// The reply to `status`. Times are relative (ms ago, ms from now): the agent's
    /// clocks mean nothing to a client. Keys are stable; new keys may be added.
    public func statusFields(at now: Instant, lockerPid: Int32?) -> [(String, JSONValue)] {
        func ms(_ m: Millis) -> JSONValue { .number(Double(m.value)) }
        func optional(_ m: Millis?) -> JSONValue { m.map(ms) ?? .null }
        let due: Millis? = nextStageDue.map { Swift.max($0 - now.boottime, .zero) }
        return [
            ("state", .string(stateName)),
            ("idle_ms", ms(idle(at: now))),
            ("next_stage", nextStageDue == nil ? .null : nextStageName.map(JSONValue.string) ?? .null),
            ("next_stage_in_ms", optional(due)),
            ("locker_pid", lockerPid.map { .number(Double($0)) } ?? .null),
            ("locker", lockerFields(at: now, pid: lockerPid)),
            // Since the lock began, across the locker's retries (ScreenSaver's GetActiveTime).
            ("locked_ms", optional(supervisor.lockedSince.map { now.boottime - $0 })),
            ("last_locker_failure", supervisor.lastFailure.map { failure in
                .object([
                    ("kind", .string(failure.kind)),
                    ("reason", .string(failure.description)),
                    ("ago_ms", optional(supervisor.lastFailureAt.map { now.boottime - $0 })),
                ])
            } ?? .null),
            // The first few in full, and how many of each source: a client with many
            // holds must not make status too long to answer.
            ("inhibitors", .array(inhibitors.prefix(IdleMachine.inhibitorsListed).map { inhibitor in
                .object([
                    ("id", .number(Double(inhibitor.id))),
                    ("source", .string(inhibitor.source.rawValue)),
                    ("who", .string(inhibitor.who)),
                    ("why", .string(inhibitor.why)),
                    ("remaining_ms", optional(inhibitor.until.map { $0 - now.boottime })),
                    ("since_ms", optional(holds.began[inhibitor.id].map { now.boottime - $0 })),
                ])
            })),
            ("inhibitor_count", .number(Double(inhibitors.count))),
            ("inhibitors_by_source", .object(InhibitorSource.allCases.compactMap { source in
                let n = inhibitors.count { $0.source == source }
                return n == 0 ? nil : (source.rawValue, .number(Double(n)))
            })),
            ("waiting_for_sources", .array(InhibitorSource.allCases.filter { awaitingSources && startupWait.awaiting.contains($0) }
                .map { .string($0.rawValue) })),
            ("max_inhibit_used_up", .bool(config.maxInhibit != nil && holds.budgetSpent)),
            ("refused_holds", .array(refusedHolds.prefix(IdleMachine.inhibitorsListed).map { refused in
                .object([
                    ("source", .string(refused.source.rawValue)), ("who", .string(refused.claim.who)),
                    ("why", .string(refused.claim.why)), ("reason", .string(refused.reason)),
                ])
            })),
            ("logind_hints", .object([("locked", .bool(lockedHint)), ("idle", .bool(idleHint))])),
            ("session_active", .bool(!sessionInactive)),
            ("card", cardFields),
            ("disabled", .bool(isDisabled)),
            ("disabled_remaining_ms", optional((disabledUntil ?? nil).map { $0 - now.boottime })),
            ("last_suspend_gap", lastSuspendGap.map { gap in
                .object([("length_ms", ms(gap.length)), ("ago_ms", ms(now.boottime - gap.noticedAt))])
            } ?? .null),
            ("settings", .array(config.settings.map(\.json))),
            ("config_files", .array(config.configFiles.map(JSONValue.string))),
            // Files and lines skipped: each "PATH[:LINE]: what is wrong; … skipped".
            ("config_errors", .array(config.configProblems.map { .string($0.description) })),
            ("policy", config.policy.map { policy in
                .object([
                    ("file", .string(policy.path)),
                    ("changes", .array(policy.changes.map(JSONValue.string))),
                    ("errors", .array(policy.errors.map(JSONValue.string))),
                    // What the file sets, as written: `doctor --policy` holds a profile against it.
                    ("settings", .array(policy.settings.map(\.json))),
                ])
            } ?? .null),
            ("session", config.session?.json ?? .null),
            // Each stage: its time in force, whether it is held and by what (a disable,
            // the start's wait, the sources of the holds it obeys), and when it is due.
            ("stages", .array(config.stages.indices.map { i in
                let stage = config.stages[i]
                let held = heldBy(i)
                return .object([
                    ("name", .string(stage.name)), ("role", .string(stage.role.rawValue)),
                    ("idle_ms", ms(stage.idleTime(onBattery: onBattery))),
                    ("on_ac_ms", ms(stage.idleTime)), ("on_battery_ms", ms(stage.idleTime(onBattery: true))),
                    ("ignores", .array(InhibitorSource.allCases.filter(stage.ignoresHolds.contains).map { .string($0.rawValue) })),
                    ("fired", .bool(fired[i])), ("held", .bool(!held.isEmpty)),
                    ("held_by", .array(held.map(JSONValue.string))),
                    ("due_in_ms", fired[i] || !held.isEmpty ? .null : ms(Swift.max(dueTime(i) - now.boottime, .zero))),
                ])
            })),
            ("power_source", .string(onBattery ? "battery" : "ac")),
            ("screen_off", screenOffAfter.map { after in
                .object([
                    ("after_ms", ms(after)), ("off", .bool(screenIsOff)),
                    ("due_in_ms", optional(screenOffDue.map { Swift.max($0 - now.boottime, .zero) })),
                ])
            } ?? .null),
        ]
    }
}

extension ReportedSetting {
    var json: JSONValue { .object([("name", .string(name)), ("value", .string(value)), ("from", .string(from))]) }
}

extension IdleMachine {
    /// Inhibitors listed one by one in status; the rest are counted.
    static let inhibitorsListed = 20

    /// The locker's part of status: what runs, whether it covers the screen, the next try.
    func lockerFields(at now: Instant, pid: Int32?) -> JSONValue {
        func ms(_ m: Millis) -> JSONValue { .number(Double(m.value)) }
        switch supervisor.state {
        case .unlocked:
            return .null
        case .running(let since, let attempt, let cover, let adopted):
            let covers: JSONValue = switch cover {
            case .unknown: .null
            case .covered, .lettingGo: .bool(true)
            case .notCovering, .grabHeldByOther: .bool(false)
            }
            return .object([
                ("state", .string("running")), ("pid", pid.map { .number(Double($0)) } ?? .null),
                ("covers_screen", covers), ("let_go", .bool(supervisor.letGo)), ("running_ms", ms(now.boottime - since.boottime)),
                ("attempt", .number(Double(attempt))), ("adopted", .bool(adopted)),
            ] + heldByOtherFields)
        case .retrying(let at, let attempt):
            return .object([
                ("state", .string("failing")), ("pid", .null),
                ("next_try_in_ms", ms(Swift.max(at - now.boottime, .zero))),
                ("attempt", .number(Double(attempt))),
            ] + heldByOtherFields)
        }
    }

    /// `keyboard_held_by_other`, `pointer_held_by_other`: another client holds the grab.
    var heldByOtherFields: [(String, JSONValue)] {
        GrabbedDevice.allCases.map { ("\($0.rawValue)_held_by_other", .bool(supervisor.heldByOther.contains($0))) }
    }
}
