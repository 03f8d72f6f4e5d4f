@testable import IdleCore
import Testing

@Suite("One turn of the machine")
struct TurnTests {
    @Test("every timed check runs in a turn, once, in the order its cases are written")
    func everyCheckRuns() {
        #expect(TimedCheck.beforeEvent + TimedCheck.afterEvent == TimedCheck.allCases)
    }
}
