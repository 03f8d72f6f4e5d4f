import IdleCore
import Testing

@Suite("Backoff: the one retry delay, doubling to a limit")
struct BackoffTests {
    @Test("doubles from its first delay and stays at its limit")
    func doubles() {
        var backoff = Backoff(first: .seconds(5), limit: .minutes(5))
        let delays = (0..<9).map { _ in backoff.next().value / 1000 }
        #expect(delays == [5, 10, 20, 40, 80, 160, 300, 300, 300])
    }

    @Test("reset starts over; reset(startingAt:) starts where it is told")
    func resets() {
        var backoff = Backoff(first: .seconds(1), limit: .minutes(1))
        _ = backoff.next(); _ = backoff.next()
        backoff.reset()
        #expect(backoff.next() == .seconds(1))
        backoff.reset(startingAt: .ms(100))
        #expect([backoff.next(), backoff.next()] == [.ms(100), .ms(200)])
    }

    @Test("reachedLimit once the limit was handed out")
    func reachesLimit() {
        var backoff = Backoff(first: .seconds(1), limit: .seconds(16))
        var handed: [Int64] = []
        while !backoff.reachedLimit { handed.append(backoff.next().value / 1000) }
        #expect(handed == [1, 2, 4, 8, 16])
        backoff.reset()
        #expect(!backoff.reachedLimit)
    }

    @Test("delay(attempt:) is what the attempt-th next() hands out", arguments: [
        (Millis.seconds(1), Millis.seconds(60)), (.seconds(5), .minutes(5)), (.seconds(2), .seconds(2)), (.ms(3), .ms(1000)),
    ])
    func attemptForm(first: Millis, limit: Millis) {
        var backoff = Backoff(first: first, limit: limit)
        for attempt in 1...40 { #expect(backoff.delay(attempt: attempt) == backoff.next()) }
        #expect(backoff.delay(attempt: Int.max) == limit)
    }

    @Test("a fixed delay")
    func fixed() {
        var backoff = Backoff.every(.seconds(2))
        #expect([backoff.next(), backoff.next(), backoff.next()] == [.seconds(2), .seconds(2), .seconds(2)])
    }
}
