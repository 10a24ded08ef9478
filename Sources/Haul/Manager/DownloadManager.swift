import Foundation
import Synchronization

/// Many downloads at once: a persistent queue with a concurrency limit, priorities,
/// dependencies, a per-host connection limit, and events — built for queues of 100,000.
///
/// Each download's lifecycle is one `DownloadLifecycle` value; every status written to
/// the store and every event comes from its transitions. No event costs work in proportion
/// to the queue (`DownloadQueue`), and the store is written in group commits.
///
/// A manager opened on the same state folder after a crash (or `kill -9`) picks up the queue
/// with ``restore()``: running downloads continue from their recorded ranges, queued stay
/// queued, paused stay paused, finished and failed are remembered.
///
/// ```swift
/// let downloader = try Downloader(.init())
/// let manager = DownloadManager(downloader: downloader)
/// let first = try await manager.add(DownloadRequest(url: "https://example.com/a.iso", directory: "."))
/// _ = try await manager.add(DownloadRequest(url: "https://example.com/b.iso", directory: "."), after: [first])
/// await manager.waitUntilIdle()
/// ```
public actor DownloadManager {
    /// A download's stable id: 64 bits, written as 16 hex digits like aria2's GID.
    public typealias ID = DownloadID

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

        /// Limits of at least 1 each, on the queue named `queue`.
        public init(maxConcurrentDownloads: Int = 5, maxConnectionsPerHost: Int = 16, queue: String = "default") {
            self.maxConcurrentDownloads = max(1, maxConcurrentDownloads)
            self.maxConnectionsPerHost = max(1, maxConnectionsPerHost)
            self.queue = queue
        }
    }

    /// One download as the manager keeps it.
    struct Entry {
        var lifecycle: DownloadLifecycle
        var request: DownloadRequest
        var priority: Int
        var position: Int64
        /// The host its connections count against.
        var host: String
        /// The final path, once the server has named the file.
        var path: String?
        var dependencies: [ID]
        /// Dependencies not completed yet.
        var unmet = 0
        var finishOrder: Int64?
        /// The next attempt asks the server whether a completed file changed.
        var revalidate = false
        /// Set once it runs in this process.
        var live: Live?

        var key: DownloadQueue.Key {
            DownloadQueue.Key(restored: lifecycle.restoredRunning, priority: priority, position: position, id: id)
        }

        let id: ID

        /// The file it writes, once known.
        var filePath: String? {
            if let path { return path }
            if case .file(let file) = request.destination { return file }
            return nil
        }
    }

    /// What only a download that runs (or ran) in this process has.
    struct Live {
        var task: AttemptHandle?
        /// The attempt's own rate limit (at 0, none): a change of the download's limit is set
        /// here while it runs, without stopping it.
        var limiter: RateLimiter?
        /// The host whose connection slot the attempt holds: the download's URL may change to
        /// another host while the attempt stops.
        var host: String?
        /// When it started and ended (``ProcessTime``: an entry is copied and changed often).
        var startedAt: Duration?
        var endedAt: Duration?
    }

    let downloader: Downloader
    let store: Store
    let hosts: HostConnections
    let queue: String
    var maxConcurrent: Int
    /// Every download's entry, the indexes, the maps and the counts: the bookkeeping, as a value.
    var book = DownloadBook()
    /// Counters continue from what the store holds (read once, before the first add).
    var countersLoaded = false
    /// Destinations whose rows from earlier processes have been brought in (`adopt`).
    var adoptedDestinations = Set<String>()
    /// Whether every row of the queue is in memory (after ``restore()``): then adding needs
    /// no lookup in the store.
    var restored = false
    let hub = EventHub()
    /// The latest progress of running downloads, written from their transfers without a hop.
    let board = ProgressBoard<DownloadProgress>()
    /// What the attempts' tasks reported and the manager has not taken in yet.
    let reports = AttemptReports()
    /// The uploads of this manager: a short queue beside the downloads, sharing their `-j`,
    /// host slots and store.
    var uploadBook = UploadBook()
    let uploadBoard = ProgressBoard<UploadProgress>()
    var idleWaiters: [CheckedContinuation<Void, Never>] = []
    var isShutDown = false
    var shuttingDown: Task<Void, Never>?
    /// Looks for downloads of gone daemons to take over, on a store a fleet shares (``watchFleet()``).
    var fleetWatch: Task<Void, Never>?
    /// Other members of the fleet whose lease held at the last look.
    var fleetOthers = 0
    /// The live members and what each published, as of the last look (``fleetPeers()``).
    var fleetMembers: [FleetLook.Member] = []
    /// Clients of this daemon that wait for the fleet's notifications (``setFleetListeners(_:)``).
    var fleetListeners = 0
    /// The shares of the hosts are being asked for (``shareHosts()``).
    var sharingHosts = false
    /// When the shares of the hosts were last asked for.
    var hostsSharedAt = ContinuousClock.now - .seconds(1)
    /// A claim from the fleet's pool, or an offer to it, is under way (``claimFromPool()``,
    /// ``offerSurplus()``).
    var claiming = false
    var offering = false {
        didSet {
            guard !offering else { return }
            for waiter in offerWaiters { waiter.resume() }
            offerWaiters = []
        }
    }
    /// Waiting for the offer under way to end (``settleOffers()``).
    var offerWaiters: [CheckedContinuation<Void, Never>] = []
    /// The last claim filled its batch, or a look is due: the pool may hold more.
    var poolMayHaveRows = true
    /// Downloads added here that ``poolsAsAdded(_:)`` found past what this member keeps ready:
    /// one in every live member's count is this member's share, kept.
    var addedPastKeep = 0
    /// The download that last went to the pool with its insert: a look or a claim that began
    /// while its insert was still in the store's writer may not see it, and find the pool empty.
    var lastPooled: ID?
    /// Downloads claimed from the pool and offered to it, since this manager started.
    var claimedFromPool = 0
    var offeredToPool = 0
    /// How many times ``pauseAll()`` ran: a claim it overtook admits its rows paused.
    var pausesOfAll = 0
    /// Rows taken over from members that were gone, since this manager started.
    var takenOverRows = 0
    /// The store may hold rows of this member's that the book does not (a look or an offer
    /// that failed halfway): the next look reads them.
    var heldRowsToLoad = false
    /// A look at the fleet is under way (``takeOver()``), and how many were made.
    var looking = false
    var looks = 0
    /// The store's failure was said in the log (``haltFleetMember(_:)``).
    var fleetFailureSaid = false
    /// Downloads removed while a look read the rows held: not brought back from what it read.
    var removedWhileLooking: Set<ID> = []
    /// This manager's store is the eldest live member of the fleet (always, outside one): it
    /// runs what only one daemon of a fleet may.
    public internal(set) var isEldestOfFleet = true
    /// The store failed (its writer's first failed transaction): downloads stop with it.
    var storeFailure: DownloadError? { store.writer.failure }
    /// Every download was stopped for the store's failure (``halt(_:)`` ran).
    var halted = false

    /// Runs one attempt instead of the engine: tests of the queue's own cost use one that
    /// finishes at once, without the network.
    typealias AttemptRunner = @Sendable (DownloadRequest, ID, DownloadRunner.RunEvents) async -> Result<DownloadResult, DownloadError>
    var attemptRunner: AttemptRunner?

    func setAttemptRunner(_ runner: @escaping AttemptRunner) {
        attemptRunner = runner
    }

    /// How far apart new downloads' positions are, so a move can land between two of them.
    static let positionStep: Int64 = 1 << 20

    /// A manager whose downloads run on `downloader` and live in its store.
    public init(downloader: Downloader, configuration: Configuration = Configuration()) {
        self.downloader = downloader
        store = downloader.store
        hosts = HostConnections(limit: configuration.maxConnectionsPerHost)
        queue = configuration.queue
        maxConcurrent = configuration.maxConcurrentDownloads
    }

    // MARK: Observing

    /// A new stream of every event from now on. Each caller gets its own stream; it ends
    /// when the manager shuts down.
    public func events() -> AsyncStream<Event> {
        events(includingProgress: true)
    }

    /// A new stream of the events from now on; without `includingProgress`, every one but
    /// ``Event/progress(_:_:)``, which comes for each running download up to ten times a second
    /// and once more as it ends: an observer of the downloads' lives only (their starts and
    /// ends) is not handed a snapshot of each to drop.
    public func events(includingProgress: Bool) -> AsyncStream<Event> {
        hub.subscribe(open: !isShutDown, progress: includingProgress)
    }

    /// One download as it stands, or nil for an unknown id.
    public func download(_ id: ID) -> Download? {
        book.entries[id].map(describe)
    }

    /// Every download, in queue order: running, then waiting, then finished. O(n): for a
    /// long queue, page with ``waiting(from:limit:)`` and ``stopped(from:limit:)``.
    public func downloads() -> [Download] {
        active() + waiting(from: 0, limit: book.index.waiting.count) + stopped(from: 0, limit: book.index.stopped.count)
    }

    /// The running downloads, in the order they started.
    public func active() -> [Download] {
        book.index.active.compactMap { book.entries[$0].map(describe) }
    }

    /// Queued and paused downloads in the order they will start, `limit` of them from `offset`.
    public func waiting(from offset: Int, limit: Int) -> [Download] {
        book.index.waiting.elements(from: offset, limit: limit).compactMap { book.entries[$0.id].map(describe) }
    }

    /// Completed and failed downloads in the order they ended, `limit` of them from `offset`.
    public func stopped(from offset: Int, limit: Int) -> [Download] {
        book.index.stopped.elements(from: offset, limit: limit).compactMap { book.entries[$0.id].map(describe) }
    }

    /// The downloads whose id, written in hex, starts with `prefix` (at most `limit` of them).
    /// O(n): aria2 clients send whole GIDs; a prefix is for people typing.
    public func downloads(withIDPrefix prefix: String, limit: Int) -> [Download] {
        let prefix = prefix.lowercased()
        var found: [Download] = []
        for (id, entry) in book.entries where id.description.hasPrefix(prefix) {
            found.append(describe(entry))
            if found.count >= limit { break }
        }
        return found
    }

    /// How many downloads wait (queued or paused).
    public var waitingCount: Int { book.index.waiting.count }
    /// How many downloads have stopped (completed or failed).
    public var stoppedCount: Int { book.index.stopped.count }

    /// Where a waiting download stands in ``waiting(from:limit:)``, or nil.
    public func waitingPosition(of id: ID) -> Int? {
        guard let entry = book.entries[id] else { return nil }
        return book.index.waiting.rank(of: DownloadQueue.waitingKey(entry.key))
    }

    /// Bytes, rate, time left and counts across every download, without looking at each.
    public func totals() -> Totals {
        var totals = Totals()
        totals.queued = book.counts[.queued, default: 0]
        totals.running = book.counts[.running, default: 0]
        totals.paused = book.counts[.paused, default: 0]
        totals.completed = book.counts[.completed, default: 0]
        totals.failed = book.counts[.failed, default: 0]
        totals.bytesDone = book.completedBytes
        totals.totalBytes = book.completedBytes
        for id in book.index.active {
            guard let progress = board.progress(of: id) else { continue }
            totals.bytesDone += progress.bytesDone
            totals.totalBytes += progress.totalBytes ?? 0
            totals.bytesPerSecond += progress.bytesPerSecond
        }
        for entry in uploadBook.entries.values {
            switch entry.status {
            case .running:
                totals.uploading += 1
                totals.uploadBytesPerSecond += uploadBoard.progress(of: entry.id)?.bytesPerSecond ?? 0
            case .queued, .paused: totals.uploadsWaiting += 1
            case .completed, .failed: break
            }
        }
        return totals
    }

    /// Entries the queue's indexes touched so far: grows linearly with the work done, never
    /// with the square of the queue (a test holds it to that).
    var queueVisits: Int { book.index.visits }

    /// Returns when nothing is running and nothing queued can start (what is left is paused,
    /// or waits for a paused download), or the manager has shut down and every download it
    /// was running has stopped and saved its state.
    public func waitUntilIdle() async {
        guard !isIdle else { return }
        await withCheckedContinuation { idleWaiters.append($0) }
    }

    var isIdle: Bool {
        book.index.active.isEmpty && uploadBook.running == 0
            && ((book.index.ready.isEmpty && !uploadBook.hasQueued) || isShutDown)
    }

    func describe(_ entry: Entry) -> Download {
        let runtime = entry.live
        let progress = board.progress(of: entry.id)
        let path = entry.path ?? progress?.destination
        return Download(
            id: entry.id, url: entry.request.displayURL, destination: path ?? entry.request.destination.path,
            destinationIsFile: path != nil || { if case .file = entry.request.destination { true } else { false } }(),
            status: entry.lifecycle.status, priority: entry.priority, dependencies: entry.dependencies,
            progress: progress, result: entry.lifecycle.result, error: entry.lifecycle.error, request: entry.request,
            startedAt: runtime?.startedAt.map(ProcessTime.instant), endedAt: runtime?.endedAt.map(ProcessTime.instant),
            daemon: store.database.memberIdentity?.name)
    }

    func wakeIdleWaiters() {
        let waiters = idleWaiters
        idleWaiters = []
        for waiter in waiters { waiter.resume() }
    }
}

/// The subscribers of a manager's events; sending needs no hop to the actor.
final class EventHub: Sendable {
    private struct Subscriber {
        var continuation: AsyncStream<DownloadManager.Event>.Continuation
        /// Whether it is given ``DownloadManager/Event/progress(_:_:)`` events.
        var wantsProgress: Bool
    }

    private struct State {
        var subscribers: [UUID: Subscriber] = [:]
    }

    private let state = Mutex(State())

    /// A stream of the events sent from now on; with `progress` false, of all but progress.
    func subscribe(open: Bool, progress: Bool = true) -> AsyncStream<DownloadManager.Event> {
        let (stream, continuation) = AsyncStream.makeStream(of: DownloadManager.Event.self, bufferingPolicy: .unbounded)
        guard open else {
            continuation.finish()
            return stream
        }
        let key = UUID()
        state.withLock { $0.subscribers[key] = Subscriber(continuation: continuation, wantsProgress: progress) }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: key) }
        }
        return stream
    }

    func send(_ event: DownloadManager.Event) {
        let isProgress = if case .progress = event { true } else { false }
        let subscribers = state.withLock { state in
            state.subscribers.values.compactMap { !isProgress || $0.wantsProgress ? $0.continuation : nil }
        }
        for subscriber in subscribers { subscriber.yield(event) }
    }

    /// Whether anyone is given progress events: a transfer's snapshot is sent only then.
    var wantsProgress: Bool { state.withLock { $0.subscribers.values.contains { $0.wantsProgress } } }

    func finish() {
        let subscribers = state.withLock { state in
            defer { state.subscribers = [:] }
            return state.subscribers.values.map(\.continuation)
        }
        for subscriber in subscribers { subscriber.finish() }
    }

}

/// The latest progress of each running download (or upload), written by its transfer (a lock,
/// not an actor hop, for every snapshot) and read by the manager when it describes it.
final class ProgressBoard<Progress: Sendable>: Sendable {
    private let latest = Mutex<[DownloadID: Progress]>([:])

    func update(_ id: DownloadID, _ progress: Progress) {
        latest.withLock { $0[id] = progress }
    }

    func progress(of id: DownloadID) -> Progress? {
        latest.withLock { $0[id] }
    }

    func remove(_ id: DownloadID) {
        _ = latest.withLock { $0.removeValue(forKey: id) }
    }
}
