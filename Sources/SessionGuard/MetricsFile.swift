import Glibc
import IdleCore
import Platform

/// The guard's metrics file for node_exporter's textfile collector
/// (`GuardSettings.metricsDirectory`/xidlelock.prom). Before every wait of the loop it
/// takes the guard's metrics and writes them only when they changed since the last
/// write: never on a timer, so an idle guard stays asleep. Written to a temporary
/// file then renamed over the old one, so the collector never reads half a file.
/// Where the directory does not exist nothing is written, and that is said once.
final class MetricsFile: EventSource {
    let directory: String
    private let metrics: () -> GuardMetrics
    /// What the file holds (or what the last try would have written: a failed write is
    /// tried again at the next change, not at every turn of the loop).
    private var last: GuardMetrics?
    private var said = SaidOnce()

    var path: String { directory + "/" + GuardMetrics.fileName }
    /// Not `*.prom`: the collector never reads it.
    private var temporaryPath: String { directory + "/." + GuardMetrics.fileName + ".tmp" }

    init(directory: String, metrics: @escaping () -> GuardMetrics) {
        self.directory = directory
        self.metrics = metrics
    }

    /// After every prepare that may dispatch (the bus's): the file says the turn's last state.
    var preparesLast: Bool { true }

    func prepareToWait() {
        let now = metrics()
        guard now != last else { return }
        last = now
        write(now.text)
    }

    /// No descriptor, no deadline: never dispatched.
    func dispatch(_ events: PollEvents) {}

    /// The text in place, through a temporary file in the same directory and a rename.
    @discardableResult
    func write(_ text: String) -> Bool {
        var info = stat()
        guard stat(directory, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
            said.say("missing", .info, "metrics: \(directory) is not a directory: no metrics file is written (node_exporter's textfile collector reads it: install prometheus-node-exporter, or set metrics-directory in the policy)")
            return false
        }
        // O_EXCL and O_NOFOLLOW: a file or link left at the temporary name is removed,
        // never written through.
        unlink(temporaryPath)
        let fd = open(temporaryPath, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return failed("cannot create \(temporaryPath)") }
        do {
            try FileIO.writeAll(fd, text)
        } catch {
            close(fd)
            unlink(temporaryPath)
            return failed("cannot write \(temporaryPath)")
        }
        close(fd)
        guard rename(temporaryPath, path) == 0 else {
            unlink(temporaryPath)
            return failed("cannot rename \(temporaryPath) to \(path)")
        }
        return true
    }

    /// The guard stops: a file that says sessions are guarded would outlive the guard
    /// that vouched for them.
    func remove() {
        unlink(path)
    }

    private func failed(_ what: String) -> Bool {
        let reason = String(cString: strerror(errno))
        said.say(what, .warning, "metrics: \(what): \(reason); tried again at the next change")
        return false
    }
}
