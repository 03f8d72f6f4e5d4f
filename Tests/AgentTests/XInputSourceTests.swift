@testable import Agent
import Glibc
import IdleCore
import Testing

/// A connection whose socket holds what the test puts there: raw events counted as
/// the real one counts them (input while listening, late after the deselection).
final class ScriptedConnection: RawInputConnection {
    let fileDescriptor: Int32 = 5
    private(set) var listening = true
    /// Raw events in the socket, not yet read.
    var inSocket = 0
    private(set) var socketReads = 0
    private(set) var selections = 0

    func listen(_ on: Bool) {
        guard on != listening else { return }
        listening = on
        selections += 1
    }

    func drainInput(readingSocket: Bool, stoppingAtInput: Bool) -> XServer.Drained {
        var drained = XServer.Drained()
        guard readingSocket else { return drained }
        socketReads += 1
        if listening {
            drained.input = stoppingAtInput ? min(inSocket, 1) : inSocket
        } else {
            drained.late = inSocket
        }
        inSocket -= drained.input + drained.late
        return drained
    }
}

@Suite("The X source: raw input, and the late events after a deselection")
struct XInputSourceTests {
    let clock = TestClock()

    /// A machine in miniature: input pauses listening until `resume` says.
    final class Listening {
        var on = true
        var inputs = 0
    }

    /// A source over a scripted connection, listening.
    func setUp() -> (ScriptedConnection, Listening, XInputSource) {
        let x = ScriptedConnection()
        let listening = Listening()
        let clock = self.clock
        let source = XInputSource(x, wantsInput: { listening.on }, onInput: {
            listening.inputs += 1
            listening.on = false
        }, now: { clock.now })
        return (x, listening, source)
    }

    @Test("events the server sent before it took the deselection are not input, and the socket is left alone 5 ms once one came: one read for the rest, not a wake-up each")
    func lateEventsReadTogether() throws {
        let (x, listening, source) = setUp()
        x.inSocket = 1
        source.dispatch(.readable)
        #expect(listening.inputs == 1)
        #expect(!x.listening && x.selections == 1, "input deselects")
        #expect(source.pollInterest?.fd == 5, "nothing late came yet: the socket is watched")
        // The flood goes on until the server takes the deselection.
        x.inSocket = 1
        source.dispatch(.readable)
        #expect(listening.inputs == 1, "a late event is no input")
        #expect(source.pollInterest == nil, "the socket is left alone")
        #expect(source.deadline == clock.now + XInputSource.lateEventsWait)
        // Meanwhile nothing reads the socket, whatever wakes the loop.
        x.inSocket = 300
        let reads = x.socketReads
        source.prepareToWait()
        #expect(x.socketReads == reads && x.inSocket == 300)
        // At the deadline the rest comes in one read; more came, so one more wait.
        clock.now = source.deadline!
        source.dispatch([])
        #expect(x.inSocket == 0 && x.socketReads == reads + 1)
        #expect(source.pollInterest == nil && source.deadline == clock.now + XInputSource.lateEventsWait)
        // Nothing more: the socket is watched again.
        clock.now = source.deadline!
        source.dispatch([])
        #expect(source.pollInterest?.fd == 5 && source.deadline == nil)
        #expect(listening.inputs == 1)
    }

    @Test("listening again ends the wait for late events at once: input is heard from its first event")
    func listeningAgainReadsAtOnce() throws {
        let (x, listening, source) = setUp()
        for _ in 0..<2 {
            x.inSocket = 1
            source.dispatch(.readable)
        }
        #expect(source.pollInterest == nil, "one input, then one late event")
        // The machine's deadline: listening resumes (its prepare comes before the wait).
        listening.on = true
        source.prepareToWait()
        #expect(x.listening && source.pollInterest?.fd == 5 && source.deadline == nil)
        x.inSocket = 1
        source.dispatch(.readable)
        #expect(listening.inputs == 2)
    }

    @Test("input with nothing late after it starts no wait: a user's key press costs no extra wake-up")
    func inputAloneNoWait() throws {
        let (x, listening, source) = setUp()
        x.inSocket = 1
        source.dispatch(.readable)
        source.prepareToWait()
        #expect(listening.inputs == 1 && source.deadline == nil && source.pollInterest?.fd == 5)
    }
}

extension XInputSourceTests {
    @Test("the first input event stops the read: listening is paused (the deselection sent) before the rest of a burst is read, which is then late")
    func firstInputDeselectsAtOnce() throws {
        let (x, listening, source) = setUp()
        x.inSocket = 50
        source.dispatch(.readable)
        #expect(listening.inputs == 1 && !x.listening)
        #expect(x.inSocket == 0, "the rest read after the deselection")
        #expect(source.pollInterest == nil, "they were late: the socket is left alone")
    }
}
