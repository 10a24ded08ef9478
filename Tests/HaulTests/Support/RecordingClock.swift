import Synchronization

/// A clock whose sleeps return at once but are remembered, and that moves its own time forward
/// by each sleep: a test of a 2-second Retry-After or of a rate limit runs in milliseconds and
/// can still check the time that was asked for.
final class RecordingClock: Clock, Sendable {
    typealias Duration = Swift.Duration
    typealias Instant = ContinuousClock.Instant

    private let recorded = Mutex<[Duration]>([])
    private let skipped = Mutex<Duration>(.zero)

    var now: Instant { .now + skipped.withLock { $0 } }
    var minimumResolution: Duration { .zero }

    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        let wait = deadline - now
        recorded.withLock { $0.append(wait) }
        if wait > .zero { skipped.withLock { $0 += wait } }
        try await Task.sleep(for: .milliseconds(2))
    }

    /// The sleeps asked for, longer than the lock-polling interval (retry waits).
    var retryWaits: [Duration] { recorded.withLock { $0 }.filter { $0 > .milliseconds(250) } }
    var sleeps: [Duration] { recorded.withLock { $0 } }
    /// All the time the sleeps asked for.
    var totalSlept: Duration { recorded.withLock { $0 }.filter { $0 > .zero }.reduce(.zero, +) }
}
