import Foundation

/// Many downloads at once: a persistent queue with a concurrency limit, priorities,
/// dependencies, a per-host connection limit, and events.
///
/// Every change is written to the store before it is announced, so a manager opened on the
/// same state folder after a crash (or `kill -9`) picks up the queue with ``restore()``:
/// running downloads continue from their recorded ranges, queued stay queued, paused stay
/// paused, finished and failed are remembered.
///
/// ```swift
/// let downloader = try Downloader(.init())
/// let manager = DownloadManager(downloader: downloader)
/// let first = try await manager.add(DownloadRequest(url: "https://example.com/a.iso", directory: "."))
/// _ = try await manager.add(DownloadRequest(url: "https://example.com/b.iso", directory: "."), after: [first])
/// await manager.waitUntilIdle()
/// ```
public actor DownloadManager {
    /// A download's stable id: 16 hex digits, like aria2's GID.
    public typealias ID = String

    /// Limits of one manager.
    public struct Configuration: Sendable {
        /// Downloads running at once (aria2's `-j`).
        public var maxConcurrentDownloads = 5
        /// Connections open to one host across all downloads, counting each connection of a
        /// segmented download.
        public var maxConnectionsPerHost = 16
        /// The name of the queue in the store: managers with different names share the store
        /// but never see each other's downloads (`haul get` and the daemon keep theirs apart).
        public var queue = "default"

        public init(maxConcurrentDownloads: Int = 5, maxConnectionsPerHost: Int = 16, queue: String = "default") {
            self.maxConcurrentDownloads = max(1, maxConcurrentDownloads)
            self.maxConnectionsPerHost = max(1, maxConnectionsPerHost)
            self.queue = queue
        }
    }

    /// What a stop is for; a later, stronger request wins while one is in flight.
    enum Stop: Int, Comparable {
        /// The manager is going away: keep the row as "running" so a restore continues it.
        case shutdown, pause, cancel, remove
        static func < (a: Stop, b: Stop) -> Bool { a.rawValue < b.rawValue }
    }

    struct Job {
        var record: JobRecord
        /// The host its connections count against, worked out once per URL.
        var host: String
        var task: DownloadTask?
        var monitor: Task<Void, Never>?
        var attempt = 0
        var progress: DownloadProgress?
        var result: DownloadResult?
        var error: DownloadError?
        var restoredRunning = false
        var holdsHostSlot = false
        /// Set while a stop is in flight: what to do once the transfer has stopped.
        var stopping: Stop?
        var resumeAfterStop = false
        var startedAt: ContinuousClock.Instant?
        var endedAt: ContinuousClock.Instant?

        init(record: JobRecord) {
            self.record = record
            host = HostConnections.host(of: record.url)
        }
    }

    let downloader: Downloader
    let store: Store
    var policy: QueuePolicy
    let hosts: HostConnections
    let queue: String
    var jobs: [ID: Job] = [:]
    var nextPosition: Int
    var subscribers: [UUID: AsyncStream<Event>.Continuation] = [:]
    var idleWaiters: [CheckedContinuation<Void, Never>] = []
    var isShutDown = false
    var shuttingDown: Task<Void, Never>?

    /// A manager whose downloads run on `downloader` and live in its store.
    public init(downloader: Downloader, configuration: Configuration = Configuration()) {
        self.downloader = downloader
        store = downloader.store
        policy = QueuePolicy(maxConcurrent: configuration.maxConcurrentDownloads,
                             hostLimit: configuration.maxConnectionsPerHost)
        hosts = HostConnections(limit: configuration.maxConnectionsPerHost)
        queue = configuration.queue
        nextPosition = ((try? store.maxJobPosition()) ?? nil).map { $0 + 1 } ?? 0
    }

    // MARK: Adding

    /// Adds a download and returns its id.
    ///
    /// Adding the same URL for the same destination again returns the existing download
    /// (also one an earlier process added to this queue), as it stands: a running one
    /// continues, a paused one stays paused, a failed one failed, a completed one completed
    /// unless its file is gone (then it is queued again).
    ///
    /// - Parameters:
    ///   - priority: higher starts first; equal priorities start in the order added.
    ///   - dependencies: downloads that must complete first; if one fails or is removed, this
    ///     one fails with a ``DownloadError/Kind/dependency`` error.
    ///   - replacing: when another URL already downloads to the same file, remove that download
    ///     (and its partial file) instead of failing.
    ///   - paused: add it paused: it waits until ``resume(_:)`` (aria2's `pause` option).
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/invalidRequest`` for an unknown
    ///   dependency or a destination taken by another URL; ``DownloadError/Kind/io`` when the
    ///   store fails.
    @discardableResult
    public func add(_ request: DownloadRequest, priority: Int = 0, after dependencies: [ID] = [],
                    replacing: Bool = false, paused: Bool = false) async throws(DownloadError) -> ID {
        guard !isShutDown else { throw .invalidRequest("the download manager has shut down") }
        for dependency in dependencies where jobs[dependency] == nil {
            throw .invalidRequest("unknown download \(dependency) to depend on")
        }
        let (kind, path) = request.destination.stored
        let stored: [JobRecord]
        do { stored = try store.jobs(queue: queue, destinationPath: path, url: request.url).filter { jobs[$0.id] == nil } } catch {
            throw storeError(error)
        }
        let isSame = { (record: JobRecord) in
            record.destinationKind == kind && record.destinationPath == path && record.url == request.url
        }
        // An earlier process (killed, or finished) may have added it.
        if let earlier = stored.first(where: isSame) { jobs[earlier.id] = Self.job(restoring: earlier) }
        if let existing = jobs.values.first(where: { isSame($0.record) }) {
            try requeueIfFileGone(existing.record.id)
            schedule()
            return existing.record.id
        }
        if kind == "file" {
            let taken = jobs.values.filter { $0.record.destinationKind == "file" && $0.record.destinationPath == path }.map(\.record)
                + stored.filter { $0.destinationKind == "file" }
            if let first = taken.first, !replacing {
                throw .invalidRequest("\(path) is already the destination of download \(first.id) (\(first.url)); remove it first or add with replacing")
            }
            for record in taken {
                if jobs[record.id] == nil { jobs[record.id] = Self.job(restoring: record) }
                await remove(record.id)
            }
        }
        let id = Self.makeID()
        var record = JobRecord(id: id, queue: queue, request: request, priority: priority, position: nextPosition,
                               dependencies: dependencies)
        if paused { record.status = .paused }
        nextPosition += 1
        try persist([record])
        jobs[id] = Job(record: record)
        emit(.added(id))
        schedule()
        return id
    }

    /// Continues the queue kept in the store: running and queued downloads are queued (the
    /// ones that were running first), paused stay paused, finished ones are remembered.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/io`` when the store fails.
    /// An unfinished download reports what its partial file holds until it runs again.
    public func restore() async throws(DownloadError) {
        let stored: [JobRecord]
        do { stored = try store.jobs(queue: queue) } catch { throw storeError(error) }
        var restored: [JobRecord] = []
        for record in stored where jobs[record.id] == nil {
            jobs[record.id] = Self.job(restoring: record)
            restored.append(record)
        }
        for record in restored where [.queued, .paused, .running].contains(record.status) {
            guard let path = record.resolvedPath ?? (record.destinationKind == "file" ? record.destinationPath : nil),
                  let engine = try? await store.record(destination: path), jobs[record.id]?.progress == nil
            else { continue }
            jobs[record.id]?.progress = DownloadProgress(destination: path, bytesDone: engine.ranges.byteCount,
                                                         totalBytes: engine.totalLength, bytesPerSecond: 0)
        }
        schedule()
    }

    static func job(restoring record: JobRecord) -> Job {
        var job = Job(record: record)
        switch record.status {
        case .running:
            job.record.status = .queued
            job.restoredRunning = true
        case .completed:
            let path = record.resolvedPath ?? record.destinationPath
            job.result = DownloadResult(path: path, bytes: record.resultBytes ?? 0, bytesFetched: 0, wasAlreadyComplete: true)
        case .failed:
            job.error = .stored(kind: record.errorKind ?? "io", message: record.lastError ?? "failed")
        case .queued, .paused:
            break
        }
        return job
    }

    func requeueIfFileGone(_ id: ID) throws(DownloadError) {
        guard let job = jobs[id], job.record.status == .completed else { return }
        let path = job.record.resolvedPath ?? job.record.destinationPath
        guard DestinationResolver.regularFileSize(path) == nil else { return }
        try update(id) { job in
            job.record.status = .queued
            job.result = nil
        }
    }

    // MARK: Observing

    /// A new stream of every event from now on. Each caller gets its own stream; it ends
    /// when the manager shuts down.
    public func events() -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .unbounded)
        let key = UUID()
        subscribers[key] = continuation
        continuation.onTermination = { [weak self] _ in
            Task { await self?.unsubscribe(key) }
        }
        return stream
    }

    func unsubscribe(_ key: UUID) {
        subscribers[key] = nil
    }

    /// One download as it stands, or nil for an unknown id.
    public func download(_ id: ID) -> Download? {
        jobs[id].map(Self.describe)
    }

    /// Every download, in queue order.
    public func downloads() -> [Download] {
        jobs.values.sorted { $0.record.position < $1.record.position }.map(Self.describe)
    }

    /// Bytes, rate, time left and counts across every download.
    public func totals() -> Totals {
        var totals = Totals()
        for job in jobs.values {
            switch job.record.status {
            case .queued: totals.queued += 1
            case .running: totals.running += 1
            case .paused: totals.paused += 1
            case .completed: totals.completed += 1
            case .failed: totals.failed += 1
            }
            if let result = job.result {
                totals.bytesDone += result.bytes
                totals.totalBytes += result.bytes
            } else if let progress = job.progress {
                totals.bytesDone += progress.bytesDone
                totals.totalBytes += progress.totalBytes ?? 0
                if job.record.status == .running { totals.bytesPerSecond += progress.bytesPerSecond }
            }
        }
        return totals
    }

    /// Returns when nothing is running and nothing queued can start (what is left is paused,
    /// or waits for a paused download), or the manager has shut down and every download it
    /// was running has stopped and saved its state.
    public func waitUntilIdle() async {
        guard !isIdle else { return }
        await withCheckedContinuation { idleWaiters.append($0) }
    }

    var isIdle: Bool {
        !jobs.values.contains { $0.record.status == .running || $0.stopping != nil }
    }

    static func describe(_ job: Job) -> Download {
        Download(id: job.record.id, url: job.record.url, destination: job.record.resolvedPath ?? job.record.destinationPath,
                 destinationIsFile: job.record.resolvedPath != nil || job.record.destinationKind == "file",
                 status: job.record.status, priority: job.record.priority, dependencies: job.record.dependencyIDs,
                 progress: job.progress, result: job.result, error: job.error, request: job.record.request,
                 startedAt: job.startedAt, endedAt: job.endedAt)
    }

    // MARK: Bookkeeping

    /// Changes a job and writes its row.
    func update(_ id: ID, _ change: (inout Job) -> Void) throws(DownloadError) {
        guard var job = jobs[id] else { return }
        change(&job)
        jobs[id] = job
        try persist([job.record])
    }

    func persist(_ records: [JobRecord]) throws(DownloadError) {
        guard !records.isEmpty else { return }
        do { try store.save(jobs: records) } catch { throw storeError(error) }
    }

    func storeError(_ error: any Error) -> DownloadError {
        .io("cannot use the store \(store.path): \(error)")
    }

    func emit(_ event: Event) {
        for subscriber in subscribers.values { subscriber.yield(event) }
    }

    func wakeIdleWaiters() {
        let waiters = idleWaiters
        idleWaiters = []
        for waiter in waiters { waiter.resume() }
    }

    static func makeID() -> ID {
        String(UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16)).lowercased()
    }
}
