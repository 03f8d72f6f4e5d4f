import CLinux
import Glibc

/// Signals through a signalfd: nothing runs in an async signal handler.
package final class SignalSource: EventSource {
    private let fd: Int32
    private let onSignal: (Int32) -> Void

    /// Blocks `signals` and watches them.
    package init(_ signals: [Int32], onSignal: @escaping (Int32) -> Void) throws(SystemError) {
        fd = try Syscall.call("signalfd") { (signals + [0]).withUnsafeBufferPointer { xil_signalfd_for($0.baseAddress) } }
        self.onSignal = onSignal
    }

    package var pollInterest: (fd: Int32, events: PollEvents)? { (fd, .readable) }

    package func dispatch(_ events: PollEvents) {
        while case let signal = xil_signalfd_read(fd), signal > 0 { onSignal(signal) }
    }

    /// Whether a signal was ignored when the agent started (`nohup` ignores SIGHUP,
    /// a shell's background job SIGINT): such a signal stays ignored.
    package static func isIgnored(_ signal: Int32) -> Bool { xil_signal_ignored(signal) == 1 }
}
