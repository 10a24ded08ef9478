import Synchronization

/// Holds byte flows to an average rate, shared fairly by whoever draws from it: each caller
/// reserves the time its bytes take at the rate, in arrival order, and waits for its turn.
/// One limiter can be shared by all connections of all downloads (a global limit) or belong
/// to one download.
public final class RateLimiter: Sendable {
    /// The rate, in bytes per second; 0 lets everything through.
    public var bytesPerSecond: Int64 { rate.load(ordering: .relaxed) }
    private let rate: Atomic<Int64>
    private let elapsed: @Sendable () -> Duration
    private let sleep: @Sendable (Duration) async throws -> Void
    /// When (on `elapsed`'s scale) the next byte may flow.
    private let nextFree = Mutex<Duration>(.zero)

    /// A limiter of `bytesPerSecond` (0: no limit until ``setRate(_:)``), timed by `clock` (tests inject a fast one).
    public convenience init(bytesPerSecond: Int64, clock: any Clock<Duration> = ContinuousClock()) {
        let (elapsed, sleep) = Self.timing(clock)
        self.init(bytesPerSecond: bytesPerSecond, elapsed: elapsed, sleep: sleep)
    }

    private init(
        bytesPerSecond: Int64, elapsed: @escaping @Sendable () -> Duration,
        sleep: @escaping @Sendable (Duration) async throws -> Void
    ) {
        rate = Atomic(max(0, bytesPerSecond))
        self.elapsed = elapsed
        self.sleep = sleep
    }

    private static func timing<C: Clock<Duration>>(_ clock: C) -> (@Sendable () -> Duration, @Sendable (Duration) async throws -> Void) {
        let start = clock.now
        return ({ start.duration(to: clock.now) }, { try await clock.sleep(for: $0) })
    }

    /// Changes the rate for every byte from now on; 0 or nil lets everything through.
    public func setRate(_ bytesPerSecond: Int64?) {
        rate.store(max(0, bytesPerSecond ?? 0), ordering: .relaxed)
    }

    /// Waits until `bytes` more may flow. Throws ``DownloadError/cancelled`` when the task is cancelled.
    func acquire(_ bytes: Int) async throws(DownloadError) {
        let rate = bytesPerSecond
        guard rate > 0 else { return }
        let cost = Duration.nanoseconds(Int64(bytes) * 1_000_000_000 / rate)
        let now = elapsed()
        let wait: Duration = nextFree.withLock { next in
            // An idle limiter does not bank time: a pause never buys a burst afterwards.
            let start = max(next, now)
            next = start + cost
            return start - now
        }
        guard wait > .zero else { return }
        do { try await sleep(wait) } catch { throw .cancelled }
    }
}
