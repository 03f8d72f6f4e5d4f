import CLinux
import Platform

/// Readable right after every resume from suspend (a cancel-on-set realtime
/// timerfd, see xil_resume_watch_create): the agent notices a suspend gap at the
/// resume itself, with no periodic wake-up.
final class ResumeWatch: EventSource {
    private let fd: Int32
    private let onResume: () -> Void

    /// Nil where the kernel cannot watch: gaps are then noticed at the next wake-up.
    init?(onResume: @escaping () -> Void) {
        fd = xil_resume_watch_create()
        guard fd >= 0 else { return nil }
        self.onResume = onResume
    }

    var pollInterest: (fd: Int32, events: PollEvents)? { (fd, .readable) }

    func dispatch(_ events: PollEvents) {
        // 1: a resume (or a wall-clock change, which is harmless to check).
        if xil_resume_watch_check(fd) == 1 { onResume() }
    }
}
