import IdleCore

/// Problems said once: a bus or a session that stays away stays away, and its line is
/// worth one entry in the log, not one per retry. Each kind of problem has a key.
package struct SaidOnce {
    private var said: Set<String> = []
    package init() {}

    /// Logs `message` at `level` unless `key` was said already.
    package mutating func say(_ key: String, _ level: LogLevel, _ message: String) {
        if said.insert(key).inserted { Log.write(level, message) }
    }

    /// Counts `key` as said without a line (what it would say was said another way).
    package mutating func markSaid(_ key: String) {
        said.insert(key)
    }
}
