// IdleCoreBench: how fast the pure state machine runs simulated days.
//
//   IdleCoreBench [--days N] [--repeats R] [--seed S]
//   IdleCoreBench --guard-metrics SESSIONS [--repeats R]   (GuardMetricsBench.swift)
//
// Each simulated day: the laptop resumes from a night's suspend (the lock is due at
// once), then eight hours of work in segments of activity (input every 20-400 ms,
// short pauses) and idleness (1-25 min, so some segments reach the 10-minute lock
// and the 9-minute warning); the user comes back to a locked screen, types for a
// few seconds, the locker exits. Evening: suspend again.
//
// Two feeds, one line each (JSON) per repeat:
//   agent  — events as the agent delivers them: raw input only while the machine
//            listens (it stops after the first event until the next deadline), and a
//            wake with the server's idle counter at every deadline.
//   every  — every simulated raw input event is delivered (a naive agent that never
//            stops listening): the hot path of `.input`.
// The clock is injected; nothing sleeps. Times include the simulation's own work
// (random numbers, bookkeeping), so they are a lower bound on the machine's speed.

import IdleCore

/// The core's own SplitMix64: small, fast, deterministic.
struct Random {
    var generator: SplitMix64
    init(state: UInt64) { generator = SplitMix64(seed: state) }
    mutating func next() -> UInt64 { generator.next() }
    /// Uniform in lo...hi.
    mutating func between(_ lo: Int64, _ hi: Int64) -> Int64 {
        lo + Int64(next() % UInt64(hi - lo + 1))
    }
}

enum Feed: String { case agent, every }

struct Simulation {
    let feed: Feed
    var machine: IdleMachine
    var random: Random
    /// CLOCK_MONOTONIC and CLOCK_BOOTTIME in ms; they part while suspended.
    var monotonic: Int64 = 0
    var boottime: Int64 = 0
    /// Monotonic time of the last user input, as the X server's idle counter knows it.
    var lastInputMonotonic: Int64 = 0
    var lockerRunning = false
    var notifierRunning: Int?
    var events = 0
    var actions = 0
    var checksum = 0

    var pendingProbeAnswer = false

    init(feed: Feed, seed: UInt64) {
        var options = AgentOptions()
        options.notifyBefore = .minutes(1)
        options.notifier = "notify-send 'locking soon'"
        options.onUnlock = "true"
        options.onUnlockInterval = .minutes(30)
        self.feed = feed
        self.random = Random(state: seed)
        self.machine = IdleMachine(config: options.config(locker: "i3lock -n"), now: Instant(monotonic: .zero, boottime: .zero))
        handle(.start(serverIdle: .zero))
    }

    var now: Instant { Instant(monotonic: .ms(monotonic), boottime: .ms(boottime)) }

    mutating func handle(_ event: Event) {
        let out = machine.handle(event, at: now)
        events += 1
        actions += out.count
        for action in out {
            switch action {
            case .run(let role, let command, let environment):
                checksum &+= command.utf8.count &+ environment.count
                if role == .locker { lockerRunning = true }
                if case .stage(let i) = role { notifierRunning = i }
            case .terminate(.stage(let i)) where notifierRunning == i:
                notifierRunning = nil
            case .terminate:
                break
            case .killLocker:
                lockerRunning = false
            case .log(_, let message), .logRefusal(let message):
                checksum &+= message.utf8.count
            case .announce:
                checksum &+= 1
            case .releaseSleepDelay, .setLockedHint, .setIdleHint, .checkPointerCorner, .answer, .turnScreenOff, .restoreScreenSettings:
                checksum &+= 1
            case .probeGrabs:
                // The edge answers at once: a running locker holds the keyboard.
                pendingProbeAnswer = true
            }
        }
        if pendingProbeAnswer {
            pendingProbeAnswer = false
            handle(.lockerFact(.keyboardGrabbed(lockerRunning)))
        }
    }

    /// Moves both clocks forward to `target` (boottime), waking at every deadline on the way.
    mutating func advance(to target: Int64) {
        while let deadline = machine.nextDeadline?.sinceZero.value, deadline <= target {
            let at = max(deadline, boottime)
            monotonic += at - boottime
            boottime = at
            let before = machine.nextDeadline
            handle(.wake(serverIdle: Millis(monotonic - lastInputMonotonic)))
            // A deadline that does not move would spin: step past it (never seen).
            if machine.nextDeadline == before { break }
        }
        if target > boottime {
            monotonic += target - boottime
            boottime = target
        }
    }

    /// One raw input event at boottime `t`.
    mutating func input(at t: Int64) {
        advance(to: t)
        lastInputMonotonic = monotonic
        if feed == .every || machine.listensForInput { handle(.input) }
    }

    /// A notifier exits by itself a few seconds after it starts.
    mutating func endNotifier() {
        if let i = notifierRunning {
            handle(.processEnded(.stage(i), .exited(0)))
            notifierRunning = nil
        }
    }

    mutating func suspend(for length: Int64) {
        endNotifier()
        boottime += length  // monotonic stands still while suspended
    }

    /// Someone works for `length` ms: input every 20-400 ms, with pauses of up to 30 s.
    mutating func work(for length: Int64) {
        let end = boottime + length
        var t = boottime
        if lockerRunning {
            // Back at a locked screen: type the password for 3-8 s, the locker exits.
            let unlockAt = t + random.between(3000, 8000)
            while t < unlockAt {
                input(at: t)
                t += random.between(60, 250)
            }
            advance(to: t)
            handle(.processEnded(.locker, .exited(0)))
            lockerRunning = false
        }
        while t < end {
            input(at: t)
            t += random.between(1, 100) <= 2 ? random.between(1000, 30_000) : random.between(20, 400)
        }
        advance(to: end)
    }

    mutating func day() {
        suspend(for: .hours(14))
        let workEnd = boottime + .hours(8)
        while boottime < workEnd {
            work(for: random.between(.minutes(2), .minutes(40)))
            let idle = random.between(.minutes(1), .minutes(25))
            advance(to: boottime + random.between(3000, 6000))
            endNotifier()
            advance(to: boottime + idle)
        }
        work(for: .minutes(5))
        advance(to: boottime + .hours(2) - .minutes(5))
    }
}

extension Int64 {
    static func minutes(_ n: Int64) -> Int64 { n * 60_000 }
    static func hours(_ n: Int64) -> Int64 { n * 3_600_000 }
}

func seconds(_ d: Duration) -> Double {
    let (s, atto) = d.components
    return Double(s) + Double(atto) / 1e18
}

var days = 100
var repeats = 5
var seed: UInt64 = 1
var guardMetricsSessions: Int?
var args = CommandLine.arguments.dropFirst()
while let flag = args.popFirst() {
    guard let value = args.popFirst() else { fatalError("\(flag) needs a value") }
    switch flag {
    case "--days": days = Int(value) ?? days
    case "--repeats": repeats = Int(value) ?? repeats
    case "--seed": seed = UInt64(value) ?? seed
    case "--guard-metrics": guardMetricsSessions = Int(value)
    default: fatalError("unknown flag \(flag)")
    }
}

let clock = ContinuousClock()
if let sessions = guardMetricsSessions { guardMetricsBench(sessions: sessions, repeats: repeats) }
for feed in [Feed.agent, .every] where guardMetricsSessions == nil {
    for r in 0..<repeats {
        var sim = Simulation(feed: feed, seed: seed &+ UInt64(r))
        let start = clock.now
        for _ in 0..<days { sim.day() }
        let took = seconds(clock.now - start)
        print("{\"feed\": \"\(feed.rawValue)\", \"repeat\": \(r), \"days\": \(days), \"seconds\": \(took), "
            + "\"events\": \(sim.events), \"actions\": \(sim.actions), \"checksum\": \(sim.checksum), "
            + "\"days_per_s\": \(Double(days) / took), \"events_per_s\": \(Double(sim.events) / took)}")
    }
}
