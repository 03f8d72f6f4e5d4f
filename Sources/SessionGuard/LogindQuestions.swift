import CBus
import Glibc
import Platform

/// The guard's questions to logind, none waited for: each is sent, and its answer comes
/// once, from the loop's processing of the system bus (sd-bus calls the C side's
/// callback, which hands it to the closure kept here until then). A blocking call
/// would hold every session's guarding behind one slow answer.
enum LogindQuestions {
    /// Why logind gave no answer: its errno and its words.
    struct Failure: Error {
        var code: Int32
        var why: String
    }

    /// A closure kept alive (retained by the C side's question) until its answer.
    final class Waiting<Answer> {
        let answer: (Answer) -> Void
        init(_ answer: @escaping (Answer) -> Void) { self.answer = answer }
        /// Retained for the C side; `take` gives it back once.
        var passed: UnsafeMutableRawPointer { Unmanaged.passRetained(self).toOpaque() }
        static func take(_ pointer: UnsafeMutableRawPointer?) -> Waiting { Unmanaged<Waiting>.fromOpaque(pointer!).takeRetainedValue() }
        static func drop(_ pointer: UnsafeMutableRawPointer) { Unmanaged<Waiting>.fromOpaque(pointer).release() }
    }

    typealias SessionAnswer = Result<SessionFacts, Failure>

    /// Sent, or why not (then `answer` is never called).
    private static func sent<Answer>(_ waiting: Waiting<Answer>, _ send: (UnsafeMutableRawPointer) -> Int32) -> Failure? {
        let pointer = waiting.passed
        let r = send(pointer)
        guard r < 0 else { return nil }
        Waiting<Answer>.drop(pointer)
        return Failure(code: -r, why: String(cString: strerror(-r)))
    }

    private static let sessionAnswered: xil_session_answer = { userdata, error, info, why in
        let answer: SessionAnswer = if error >= 0, let info { .success(SessionFacts(info.pointee)) }
            else { .failure(Failure(code: -error, why: why.map { String(cString: $0) } ?? "no answer")) }
        Waiting<SessionAnswer>.take(userdata).answer(answer)
    }

    /// The session logind places process `pid` (of `uid`) in.
    static func session(ofProcess pid: pid_t, uid: uid_t, on bus: OpaquePointer,
                        _ answer: @escaping (SessionAnswer) -> Void) -> Failure? {
        sent(Waiting(answer)) { xil_logind_session_of_pid_async(bus, UInt32(pid), uid, sessionAnswered, $0) }
    }

    /// One session's properties, by its object path.
    static func session(at path: String, on bus: OpaquePointer, _ answer: @escaping (SessionAnswer) -> Void) -> Failure? {
        sent(Waiting(answer)) { xil_logind_session_at_async(bus, path, sessionAnswered, $0) }
    }

    /// Every session's object path.
    static func sessionPaths(on bus: OpaquePointer, _ answer: @escaping (Result<[String], Failure>) -> Void) -> Failure? {
        sent(Waiting(answer)) { xil_logind_list_sessions_async(bus, pathsAnswered, $0) }
    }

    private static let pathsAnswered: xil_paths_answer = { userdata, error, paths, count in
        let waiting = Waiting<Result<[String], Failure>>.take(userdata)
        guard error >= 0, let paths else {
            return waiting.answer(.failure(Failure(code: -error, why: String(cString: strerror(-error)))))
        }
        waiting.answer(.success((0..<Int(count)).compactMap { paths[$0].map { String(cString: $0) } }))
    }

    typealias CallAnswer = Failure?

    private static let callAnswered: xil_call_answer = { userdata, error, why in
        Waiting<CallAnswer>.take(userdata).answer(error < 0 ? Failure(code: -error, why: why.map { String(cString: $0) } ?? "") : nil)
    }

    /// logind's TerminateSession of session `id`.
    static func terminate(session id: String, on bus: OpaquePointer, _ answer: @escaping (CallAnswer) -> Void) -> Failure? {
        sent(Waiting(answer)) { xil_logind_terminate_session_async(bus, id, callAnswered, $0) }
    }

    /// The session's SetLockedHint(false), by its object path.
    static func clearLockedHint(at path: String, on bus: OpaquePointer, _ answer: @escaping (CallAnswer) -> Void) -> Failure? {
        sent(Waiting(answer)) { xil_logind_clear_locked_hint_async(bus, path, callAnswered, $0) }
    }
}
