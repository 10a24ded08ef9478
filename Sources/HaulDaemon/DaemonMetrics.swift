import Haul
import Prometheus
import Synchronization

/// The daemon's figures, served on `/metrics` in Prometheus' text format.
///
/// They live in a `PrometheusCollectorRegistry` of the daemon's own, never in the process-wide
/// `MetricsSystem`: several daemons in one process (the tests) each count their own. Counters
/// are counted as things happen, from the engine's ``EngineObserver`` (retries, bytes, the
/// store's transactions) and the manager's events (``count(_:)``); gauges are read from the
/// manager when scraped (``exposition(of:)``), so the byte loops do nothing more for them.
///
/// A new figure (a fleet's claims, lease renewals, takeovers) is one more metric made in
/// `init` and the hook that counts it.
final class DaemonMetrics: Sendable {
    /// The answer's content type: the text exposition format, version 0.0.4.
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// The states `haul_downloads` is labelled with, aria2's words (``Aria2Status``).
    static let states = ["active", "waiting", "paused", "complete", "error"]

    /// Upper bounds of the store's commit-latency buckets: a group commit takes a millisecond
    /// or two on a quiet disk, and seconds on one that is full of other writes.
    static let commitBuckets: [Duration] = [
        .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
        .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
        .milliseconds(2500), .seconds(5), .seconds(10),
    ]

    let registry = PrometheusCollectorRegistry()
    private let downloads: [String: Gauge]
    private let speed: Gauge
    private let bytes: Counter
    private let completed: Counter
    private let failed: Counter
    private let commits: DurationHistogram
    /// The fleet's counters, by ``DownloadManager/FleetCounts`` field, and what they were at the
    /// last scrape (the manager counts; a scrape adds what changed since).
    private let fleet: [(counter: Counter, value: KeyPath<DownloadManager.FleetCounts, Int> & Sendable)]
    private let fleetSeen = Mutex(DownloadManager.FleetCounts())

    init() {
        let states = MetricNameDescriptor(
            namespace: "haul", metricName: "downloads", unitName: "",
            helpText: "Downloads by state: active, waiting, paused, complete, error (failed or cancelled).")
        let registry = registry
        downloads = Dictionary(uniqueKeysWithValues: Self.states.map { ($0, registry.makeGauge(descriptor: states, labels: [("state", $0)])) })
        speed = registry.makeGauge(
            descriptor: .init(
                namespace: "haul", metricName: "download_speed", unitName: "bytes_per_second",
                helpText: "The running downloads' summed rate."))
        bytes = registry.makeCounter(
            descriptor: .init(
                namespace: "haul", metricName: "downloaded", unitName: "bytes_total",
                helpText: "Body bytes written to downloads' files since the daemon started."))
        completed = registry.makeCounter(
            descriptor: .init(
                namespace: "haul", metricName: "downloads_completed", unitName: "total",
                helpText: "Downloads completed since the daemon started (verified and at their final name)."))
        failed = registry.makeCounter(
            descriptor: .init(
                namespace: "haul", metricName: "downloads_failed", unitName: "total",
                helpText: "Downloads failed since the daemon started (cancelled ones are not counted)."))
        commits = registry.makeDurationHistogram(
            descriptor: .init(
                namespace: "haul", metricName: "store_commit_duration", unitName: "seconds",
                helpText: "How long each of the store's transactions (a group commit) took."),
            buckets: Self.commitBuckets)
        let fleetCounter = { (name: String, help: String) in
            registry.makeCounter(descriptor: .init(namespace: "haul", subsystem: "fleet", metricName: name, unitName: "total", helpText: help))
        }
        fleet = [
            (fleetCounter("claims", "Downloads this daemon claimed from those other daemons of its queue offered."), \.claimed),
            (fleetCounter("offers", "Downloads this daemon offered to the other daemons of its queue."), \.offered),
            (fleetCounter("takeovers", "Downloads and uploads this daemon took over from daemons of its queue that were gone."), \.takenOver),
            (fleetCounter("lease_renewals", "Renewals of this daemon's lease on its queue (one with each transaction it writes)."), \.leaseRenewals),
        ]
    }

    /// The hooks to give the ``Downloader`` (``Downloader/Configuration/observer``).
    var observer: EngineObserver {
        var observer = EngineObserver()
        let (bytes, commits) = (bytes, commits)
        observer.fetched = { bytes.increment(by: $0) }
        observer.storeCommitted = { duration, _ in commits.record(duration) }
        observer.retrying = { [self] error in retried(error) }
        return observer
    }

    /// `haul_retries_total`, one counter per reason (the descriptor is not `Sendable`: made when used).
    private static var retries: MetricNameDescriptor {
        .init(
            namespace: "haul", metricName: "retries", unitName: "total",
            helpText: "Tries that failed and were tried again, by reason (an HTTP status, a network reason, or the error's kind).")
    }

    /// Counts a retry under its reason. Retries are rare: the counter is looked up each time.
    func retried(_ error: DownloadError) {
        registry.makeCounter(descriptor: Self.retries, labels: [("reason", Self.reason(of: error))]).increment()
    }

    /// The `reason` label of a retry: the error's reason (`stalled`, `connect-timeout`,
    /// `name-not-resolved`, …), else `http-STATUS` for an HTTP status, else its kind
    /// (`network`, `protocol`, `io`, …). A bounded set: a retried status is 408, 429 or 5xx.
    static func reason(of error: DownloadError) -> String {
        if let reason = error.reason { return reason.description }
        if error.kind == .http, let status = error.status { return "http-\(status)" }
        return error.kind.description
    }

    /// Counts a download's end: completed, or failed (a cancelled one is not a failure).
    func count(_ event: DownloadManager.Event) {
        switch event {
        case .completed: completed.increment()
        case .failed(_, let error) where error.kind != .cancelled: failed.increment()
        default: break
        }
    }

    /// The text a scrape answers: the gauges read from `manager` now, then every metric.
    func exposition(of manager: DownloadManager) async -> [UInt8] {
        let totals = await manager.totals()
        let counts = [
            "active": totals.running, "waiting": totals.queued, "paused": totals.paused,
            "complete": totals.completed, "error": totals.failed,
        ]
        for (state, gauge) in downloads { gauge.set(Double(counts[state] ?? 0)) }
        speed.set(totals.bytesPerSecond)
        // Each counter moves by what its figure grew since the last scrape; two scrapes at once
        // count each growth once (the figures only grow).
        let now = await manager.fleetCounts
        let fleet = fleet
        fleetSeen.withLock { seen in
            for (counter, value) in fleet where now[keyPath: value] > seen[keyPath: value] {
                counter.increment(by: Int64(now[keyPath: value] - seen[keyPath: value]))
            }
            seen.claimed = max(seen.claimed, now.claimed)
            seen.offered = max(seen.offered, now.offered)
            seen.takenOver = max(seen.takenOver, now.takenOver)
            seen.leaseRenewals = max(seen.leaseRenewals, now.leaseRenewals)
        }
        return registry.emitToBuffer()
    }
}
