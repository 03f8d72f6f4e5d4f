import CBus
import Glibc

/// Questions to logind (the guard's, and the agent's of a caller's session), none
/// waited for: each is sent, and its answer comes once, from the loop's processing of
/// the system bus (sd-bus calls the C side's callback, which hands it to the closure
/// kept here until then). A blocking call would hold every session's guarding behind
/// one slow answer.
///
/// At most `mostAtOnce` wait for their answer at a time; the others wait here, in the
/// order asked. dbus-daemon lets one connection wait for 128 replies at once
/// (`max_replies_per_connection`) and answers every call past that with an error: a
/// terminal server's 300 sessions, read at once, left half of them unread, and their
/// agents unverified.
package final class LogindQuestions {
    package init() {}

    /// Why logind gave no answer: its errno and its words.
    package struct Failure: Error {
        package var code: Int32
        package var why: String
    }

    package static let mostAtOnce = 64

    /// The system bus; nil while it is lost: every question waiting then fails.
    package var bus: OpaquePointer? {
        didSet {
            // Answers of an earlier connection, if any ever come, are not this one's.
            connection &+= 1
            outstanding = 0
            if bus == nil { failWaiting() } else { sendWaiting() }
        }
    }

    private var connection = 0
    private var outstanding = 0
    /// Questions not sent yet, the first at `next`.
    private var waiting: [Question] = []
    private var next = 0

    private struct Question {
        /// Sends on the bus (where sd-bus refuses, the question is answered with why).
        let send: (OpaquePointer) -> Void
        let fail: (Failure) -> Void
    }

    /// A closure kept alive (retained by the C side's question) until its answer.
    private final class Waiting<Answer> {
        let answer: (Answer) -> Void
        init(_ answer: @escaping (Answer) -> Void) { self.answer = answer }
        /// Retained for the C side; `take` gives it back once.
        var passed: UnsafeMutableRawPointer { Unmanaged.passRetained(self).toOpaque() }
        static func take(_ pointer: UnsafeMutableRawPointer?) -> Waiting { Unmanaged<Waiting>.fromOpaque(pointer!).takeRetainedValue() }
        static func drop(_ pointer: UnsafeMutableRawPointer) { Unmanaged<Waiting>.fromOpaque(pointer).release() }
    }

    package typealias SessionAnswer = Result<SessionFacts, Failure>
    package typealias CallAnswer = Failure?

    /// Asks, now or once fewer are outstanding. `answer` is called once: with logind's
    /// answer, or with the failure (`failed`) when the question could not be sent,
    /// which may be before `ask` returns.
    private func ask<Answer>(_ answer: @escaping (Answer) -> Void, failed: @escaping (Failure) -> Answer,
                             _ send: @escaping (OpaquePointer, UnsafeMutableRawPointer) -> Int32) {
        let question = Question(send: { [unowned self] bus in
            let asked = connection
            let waiting = Waiting<Answer> { [weak self] reply in
                if let self, connection == asked {
                    outstanding -= 1
                    sendWaiting()
                }
                answer(reply)
            }
            let pointer = waiting.passed
            let r = send(bus, pointer)
            guard r < 0 else {
                outstanding += 1
                return
            }
            Waiting<Answer>.drop(pointer)
            answer(failed(Failure(code: -r, why: String(cString: strerror(-r)))))
        }, fail: { answer(failed($0)) })
        waiting.append(question)
        if bus == nil { failWaiting() } else { sendWaiting() }
    }

    private func sendWaiting() {
        while outstanding < LogindQuestions.mostAtOnce, next < waiting.count, let bus {
            let question = waiting[next]
            next += 1
            question.send(bus)
        }
        if next == waiting.count {
            waiting.removeAll(keepingCapacity: true)
            next = 0
        }
    }

    private func failWaiting() {
        let failing = waiting[next...]
        waiting = []
        next = 0
        for question in failing { question.fail(Failure(code: ENOTCONN, why: "the system bus is not connected")) }
    }

    private static let sessionAnswered: xil_session_answer = { userdata, error, info, why in
        let answer: SessionAnswer = if error >= 0, let info { .success(SessionFacts(info.pointee)) }
            else { .failure(Failure(code: -error, why: why.map { String(cString: $0) } ?? "no answer")) }
        Waiting<SessionAnswer>.take(userdata).answer(answer)
    }

    /// The session logind places process `pid` (of `uid`) in.
    package func session(ofProcess pid: pid_t, uid: uid_t, _ answer: @escaping (SessionAnswer) -> Void) {
        ask(answer, failed: { .failure($0) }) { xil_logind_session_of_pid_async($0, UInt32(pid), uid, LogindQuestions.sessionAnswered, $1) }
    }

    /// One session's properties, by its object path.
    package func session(at path: String, _ answer: @escaping (SessionAnswer) -> Void) {
        ask(answer, failed: { .failure($0) }) { xil_logind_session_at_async($0, path, LogindQuestions.sessionAnswered, $1) }
    }

    /// Every session's object path.
    package func sessionPaths(_ answer: @escaping (Result<[String], Failure>) -> Void) {
        ask(answer, failed: { .failure($0) }) { xil_logind_list_sessions_async($0, LogindQuestions.pathsAnswered, $1) }
    }

    private static let pathsAnswered: xil_paths_answer = { userdata, error, paths, count in
        let waiting = Waiting<Result<[String], Failure>>.take(userdata)
        guard error >= 0 else {
            return waiting.answer(.failure(Failure(code: -error, why: String(cString: strerror(-error)))))
        }
        // No session at all (before the first login) comes as no list.
        waiting.answer(.success(paths.map { paths in (0..<Int(count)).compactMap { paths[$0].map { String(cString: $0) } } } ?? []))
    }

    private static let callAnswered: xil_call_answer = { userdata, error, why in
        Waiting<CallAnswer>.take(userdata).answer(error < 0 ? Failure(code: -error, why: why.map { String(cString: $0) } ?? "") : nil)
    }

    /// logind's TerminateSession of session `id`.
    package func terminate(session id: String, _ answer: @escaping (CallAnswer) -> Void) {
        ask(answer, failed: { $0 }) { xil_logind_terminate_session_async($0, id, LogindQuestions.callAnswered, $1) }
    }

    /// The session's SetLockedHint(false), by its object path.
    package func clearLockedHint(at path: String, _ answer: @escaping (CallAnswer) -> Void) {
        ask(answer, failed: { $0 }) { xil_logind_clear_locked_hint_async($0, path, LogindQuestions.callAnswered, $1) }
    }
}
