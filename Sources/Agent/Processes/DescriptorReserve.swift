import Glibc
import Platform

/// Descriptors held back for starting the locker. A client that opens connections
/// until the agent runs out (EMFILE) must not keep the screen from locking:
/// starting a child takes two descriptors (the pipe that reports a failed exec;
/// the child then needs one for /dev/null), and recording the locker one (its
/// /proc stat). They are released just before and taken back right after.
final class DescriptorReserve {
    private var held: [Int32] = []
    let count: Int

    init(count: Int = 2) {
        self.count = count
        refill()
    }

    deinit { for fd in held { close(fd) } }

    /// Runs `body` with the reserved descriptors free for it.
    func whileReleased<R>(_ body: () -> R) -> R {
        for fd in held { close(fd) }
        held.removeAll()
        defer { refill() }
        return body()
    }

    private func refill() {
        while held.count < count {
            let fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return }
            held.append(fd)
        }
    }
}
