import Synchronization

/// A clock whose sleeps return at once but are remembered, so a test of a 2-second
/// Retry-After runs in milliseconds and can still check the 2 seconds were asked for.
final class RecordingClock: Clock, Sendable {
    typealias Duration = Swift.Duration
    typealias Instant = ContinuousClock.Instant

    private let recorded = Mutex<[Duration]>([])

    var now: Instant { .now }
    var minimumResolution: Duration { .zero }

    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        recorded.withLock { $0.append(deadline - .now) }
        try await Task.sleep(for: .milliseconds(2))
    }

    /// The sleeps asked for, longer than the lock-polling interval (retry waits).
    var retryWaits: [Duration] { recorded.withLock { $0 }.filter { $0 > .milliseconds(250) } }
    var sleeps: [Duration] { recorded.withLock { $0 } }
}
