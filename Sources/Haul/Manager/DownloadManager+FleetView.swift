import Foundation
import GRDB

/// The whole fleet seen from one member: its lists and counts (read from the store, where every
/// member's rows are), the other members and what each published at its last look, and the
/// messages members send one another (`LISTEN`/`NOTIFY`). Outside a fleet, this manager's own.
extension DownloadManager {
    /// A member of the fleet, as it was at this manager's last look (every 250 ms).
    public struct FleetPeer: Sendable, Equatable {
        /// The `owner` of its rows; messages are sent to it (``sendToFleet(_:to:)``).
        public var id: String
        /// `HOST/PID`, for people.
        public var name: String
        /// Whether it is this manager.
        public var isThisDaemon: Bool
        /// Its downloads' summed rate.
        public var bytesPerSecond: Double
        /// Its uploads' summed rate.
        public var uploadBytesPerSecond: Double
        /// How many clients of its own wait for the fleet's notifications (``setFleetListeners(_:)``).
        public var listeners: Int
    }

    /// What a member publishes at each look, for the others (JSON in `fleetMember.status`).
    struct FleetStatus: Codable, Sendable {
        var down: Double = 0
        var up: Double = 0
        var listeners = 0
        /// Its running downloads' progress: the first ``publishedRunning`` of them.
        var running: [Running] = []

        struct Running: Codable, Sendable {
            var id: String
            var done: Int64
            var total: Int64?
            var speed: Double
        }

        static func decode(_ text: String) -> FleetStatus {
            (try? JSONDecoder().decode(FleetStatus.self, from: Data(text.utf8))) ?? FleetStatus()
        }
    }

    /// How many running downloads a member publishes the progress of.
    static let publishedRunning = 1000

    /// This manager's ``FleetStatus``, encoded.
    func publishedStatus() -> String {
        var status = FleetStatus()
        let totals = totals()
        (status.down, status.up, status.listeners) = (totals.bytesPerSecond, totals.uploadBytesPerSecond, fleetListeners)
        for id in book.index.active.prefix(Self.publishedRunning) {
            guard let progress = board.progress(of: id) else { continue }
            status.running.append(
                .init(id: id.description, done: progress.bytesDone, total: progress.totalBytes, speed: progress.bytesPerSecond))
        }
        return (try? JSONEncoder().encode(status)).map { String(decoding: $0, as: UTF8.self) } ?? ""
    }

    /// Hands this manager's counts to the store, which publishes them with every transaction
    /// (``fleetTotals()`` of the other members adds them up); when they changed, the writer
    /// writes a transaction soon even if no row changes (a transaction that began before they
    /// changed carried the old ones). In a fleet only; after every step of the queue.
    func publishCounts() {
        guard store.database.isShared else { return }
        let counts = MemberCounts(
            queued: book.counts[.queued, default: 0], running: book.counts[.running, default: 0],
            paused: book.counts[.paused, default: 0], completed: book.counts[.completed, default: 0],
            failed: book.counts[.failed, default: 0], completedBytes: book.completedBytes)
        if store.database.publish(counts, of: queue) { store.writer.touch() }
    }

    /// Says how many clients of this daemon wait for the fleet's notifications: published at the
    /// next look, so that the others send theirs only while someone listens.
    public func setFleetListeners(_ count: Int) {
        fleetListeners = count
    }

    /// The members of the fleet whose lease holds, eldest first, this one among them, as of
    /// the last look; only this one outside a fleet (with no name).
    public func fleetPeers() -> [FleetPeer] {
        let me = store.database.memberIdentity
        let totals = totals()
        let this = FleetPeer(
            id: me?.id ?? "", name: me?.name ?? "", isThisDaemon: true, bytesPerSecond: totals.bytesPerSecond,
            uploadBytesPerSecond: totals.uploadBytesPerSecond, listeners: fleetListeners)
        guard let me, !fleetMembers.isEmpty else { return [this] }
        return fleetMembers.map { member in
            if member.id == me.id { return this }
            let status = FleetStatus.decode(member.status)
            return FleetPeer(
                id: member.id, name: member.name, isThisDaemon: false, bytesPerSecond: status.down, uploadBytesPerSecond: status.up,
                listeners: status.listeners)
        }
    }

    /// This member's name in the fleet (`HOST/PID`); nil outside one.
    public nonisolated var fleetMemberName: String? { store.database.memberIdentity?.name }

    /// This member's id in the fleet (``FleetPeer/id``); nil outside one.
    public nonisolated var fleetMemberID: String? { store.database.memberIdentity?.id }

    // MARK: Lists of the whole fleet

    /// Whether the lists and counts are the fleet's: in one, until its store failed (a member
    /// fenced off, or cut off from the database, holds nothing the others need to hear of; its
    /// own lists say what it stopped).
    var answersForFleet: Bool { queueIsShared && storeFailure == nil }

    /// The lists ``fleetDownloads(_:from:limit:)`` reads.
    public enum FleetList: Sendable {
        /// Queued and paused, in the order they start (priority, then position).
        case waiting
        /// Completed and failed, in the order their rows were last written (when they ended,
        /// by the clock of the member that ran each).
        case stopped

        var statuses: [DownloadStatus] { self == .waiting ? [.queued, .paused] : [.completed, .failed] }
        var order: String { self == .waiting ? "priority DESC, position, id" : "updatedAt, id" }
    }

    /// How many downloads of the whole queue are in `list`: every member's and the pool's.
    /// Outside a fleet, ``waitingCount`` or ``stoppedCount``.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/io`` when the store fails.
    public func fleetCount(_ list: FleetList) async throws(DownloadError) -> Int {
        guard answersForFleet else { return list == .waiting ? waitingCount : stoppedCount }
        let statuses = list.statuses.map { "\($0.storedValue)" }.joined(separator: ", ")
        return try await store.fetch(
            "SELECT count(*) AS n FROM download WHERE queue = ? AND status IN (\(statuses))", [queue.databaseValue]
        ) { Int($0["n"] as Int64) }.first ?? 0
    }

    /// `limit` downloads of `list` from `offset`, across the whole queue: those this manager
    /// holds as ``download(_:)`` describes them, the others as the store records them (their
    /// ``Download/daemon`` says where they are). Outside a fleet, ``waiting(from:limit:)`` or
    /// ``stopped(from:limit:)``.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/io`` when the store fails.
    public func fleetDownloads(_ list: FleetList, from offset: Int, limit: Int) async throws(DownloadError) -> [Download] {
        guard answersForFleet else { return list == .waiting ? waiting(from: offset, limit: limit) : stopped(from: offset, limit: limit) }
        guard limit > 0, offset >= 0 else { return [] }
        let statuses = list.statuses.map { "\($0.storedValue)" }.joined(separator: ", ")
        return try await storedDownloads(
            "SELECT * FROM download WHERE queue = ? AND status IN (\(statuses)) ORDER BY \(list.order) LIMIT ? OFFSET ?",
            [queue.databaseValue, limit.databaseValue, offset.databaseValue])
    }

    /// The running downloads of the whole queue: this manager's (``active()``), then the other
    /// members', with the progress each published at its last look.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/io`` when the store fails.
    public func fleetActive() async throws(DownloadError) -> [Download] {
        let mine = active()
        guard answersForFleet, let me = store.database.memberIdentity else { return mine }
        let others = try await storedDownloads(
            "SELECT * FROM download WHERE queue = ? AND status = ? AND owner <> ? ORDER BY updatedAt, id",
            [queue.databaseValue, DownloadStatus.running.storedValue.databaseValue, me.id.databaseValue])
        return mine + others
    }

    /// Counts and rates across the whole queue: this manager's as ``totals()`` has them; each
    /// other live member's counts as it published them with its last transaction (every
    /// member's manager publishes its own); the pool's queued downloads as its kept size says
    /// (`fleetPool`); the rows of no live member that published (a queue of before the fleet's,
    /// a member's before its first transaction) counted in the store as last committed (a poll
    /// does not cut the writer's group commit short); their rates and running bytes as each
    /// published at its last look. Outside a fleet, ``totals()``.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/io`` when the store fails.
    public func fleetTotals() async throws(DownloadError) -> Totals {
        guard answersForFleet, let me = store.database.memberIdentity else { return totals() }
        // A few rows of fleetMember and fleetPool, and what the owner index finds of the rest,
        // counted in one pass (no sort): never a count of the whole table (22 ms a poll at 20,000
        // rows), nor of the pool (10-22 ms at 10,000 pooled rows on a busy table).
        func counted(_ status: DownloadStatus) -> String { "count(*) FILTER (WHERE status = \(status.storedValue))" }
        let rows =
            "\(counted(.queued)), \(counted(.running)), \(counted(.paused)), \(counted(.completed)), \(counted(.failed)), "
            + "coalesce(sum(resultBytes) FILTER (WHERE status = \(DownloadStatus.completed.storedValue)), 0)::bigint FROM download"
        let counts = try await store.fetchCommitted(
            """
            WITH others AS (
                SELECT member, counts FROM fleetMember
                WHERE queue = ? AND member <> ? AND leaseUntil >= extract(epoch from clock_timestamp())
            )
            SELECT (counts->>0)::bigint AS queued, (counts->>1)::bigint AS running, (counts->>2)::bigint AS paused,
            (counts->>3)::bigint AS completed, (counts->>4)::bigint AS failed, (counts->>5)::bigint AS bytes
            FROM others WHERE counts IS NOT NULL
            UNION ALL
            SELECT \(rows) WHERE queue = ? AND owner = ANY(ARRAY(SELECT member FROM others WHERE counts IS NULL))
            UNION ALL
            SELECT \(rows) WHERE queue = ? AND owner IS NULL
            UNION ALL
            SELECT coalesce(sum(pooled), 0)::bigint, 0, 0, 0, 0, 0 FROM fleetPool WHERE queue = ?
            """,
            [queue.databaseValue, me.id.databaseValue, queue.databaseValue, queue.databaseValue, queue.databaseValue]
        ) { row in
            // A published array shorter than this haul's (another version's) reads as zeros.
            func count(_ column: String) -> Int64 { row[column] as Int64? ?? 0 }
            return MemberCounts(
                queued: Int(count("queued")), running: Int(count("running")), paused: Int(count("paused")),
                completed: Int(count("completed")), failed: Int(count("failed")), completedBytes: count("bytes"))
        }
        // The book as it stands after the read: a claim or an offer meanwhile is counted once.
        var totals = totals()
        for counts in counts {
            totals.queued += counts.queued
            totals.running += counts.running
            totals.paused += counts.paused
            totals.completed += counts.completed
            totals.failed += counts.failed
            totals.bytesDone += counts.completedBytes
            totals.totalBytes += counts.completedBytes
        }
        for member in fleetMembers where member.id != me.id {
            let status = FleetStatus.decode(member.status)
            totals.bytesPerSecond += status.down
            totals.uploadBytesPerSecond += status.up
            for running in status.running {
                totals.bytesDone += running.done
                totals.totalBytes += running.total ?? 0
            }
        }
        return totals
    }

    /// The downloads `sql` selects, each this manager's as it holds it, or as its row records it.
    func storedDownloads(_ sql: String, _ values: [DatabaseValue]) async throws(DownloadError) -> [Download] {
        let decode = DownloadRow.decoder(sameOrder: store.database.rowsKeepColumnOrder)
        let rows = try await store.fetch(sql, values) { row in (try decode(row), row["owner"] as String?) }
        return rows.map { row, owner in book.entries[row.id].map(describe) ?? describe(row, owner: owner) }
    }

    /// A row this manager does not hold, as ``storedDownload(_:)`` describes it: its status and
    /// progress as recorded, or as its owner last published while it runs; ``Download/daemon``
    /// names its owner while that is live.
    func describe(_ row: DownloadRow, owner: String?) -> Download {
        // Describing a row as restore() would must not move the manager's own counter.
        let finishOrder = book.nextFinishOrder
        var download = describe(restoredEntry(row))
        book.nextFinishOrder = finishOrder
        // As recorded: one running on another daemon runs (restoring it here would queue it).
        download.status = row.status
        download.daemon = nil
        if let owner, let member = fleetMembers.first(where: { $0.id == owner }) {
            download.daemon = member.name
            if row.status == .running, let running = FleetStatus.decode(member.status).running.first(where: { $0.id == row.id.description }) {
                download.progress = DownloadProgress(
                    destination: row.path, bytesDone: running.done, totalBytes: running.total, bytesPerSecond: running.speed)
            }
        }
        if download.progress == nil, !row.recorded.isEmpty || row.totalLength != nil {
            download.progress = DownloadProgress(
                destination: row.path, bytesDone: row.status == .completed ? row.resultBytes ?? 0 : row.recorded.byteCount,
                totalBytes: row.totalLength, bytesPerSecond: 0)
        }
        return download
    }

    /// Writes every change made so far, in a fleet: from then on the other members see them
    /// (a download just added, or paused). Nothing outside one.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/io`` when the store fails.
    public func flushForFleet() async throws(DownloadError) {
        guard queueIsShared else { return }
        try await store.flush()
    }

    // MARK: Who holds a download

    /// Where a download of the queue is (``holder(of:)``).
    public enum Holder: Sendable, Equatable {
        /// This manager holds it.
        case thisDaemon
        /// Another live member runs it: ask that one (``sendToFleet(_:to:)``).
        case peer(FleetPeer)
        /// It waits in the pool, offered and not claimed yet (``claimOffered(_:)``).
        case pool
        /// Its member is gone; the next look of one of the others takes it over.
        case gone
        /// The queue has no such download.
        case nobody
    }

    /// Who holds download `id`: this manager, another member, the pool, or nobody.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/io`` when the store fails.
    public func holder(of id: ID) async throws(DownloadError) -> Holder {
        if book.entries.contains(id) { return .thisDaemon }
        guard queueIsShared, let me = store.database.memberIdentity else { return .nobody }
        let owners = try await store.fetch(
            "SELECT owner FROM download WHERE id = ? AND queue = ?", [id.storedValue.databaseValue, queue.databaseValue]
        ) { $0["owner"] as String? }
        guard let found = owners.first else { return .nobody }
        // A row of this member's that the book does not hold is one just removed, or not read yet.
        guard let owner = found, owner != me.id else { return book.entries.contains(id) ? .thisDaemon : .nobody }
        if owner.isEmpty { return .pool }
        return fleetPeers().first { $0.id == owner }.map(Holder.peer) ?? .gone
    }

    /// Claims download `id` from the pool, to act on it here (pause it, remove it); true when
    /// this manager holds it now, false when another member claimed it first.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/io`` when the store fails.
    public func claimOffered(_ id: ID) async throws(DownloadError) -> Bool {
        if book.entries.contains(id) { return true }
        // A member whose store failed runs nothing more: what it claimed would wait for nobody.
        guard queueIsShared, storeFailure == nil, !halted else { return false }
        let pauses = pausesOfAll
        let rows = try await store.claim(ids: [id])
        guard !isShutDown else { return false }
        admitClaimed(rows, paused: pausesOfAll != pauses)
        schedule()
        return book.entries.contains(id)
    }

    /// Claims every download waiting in the pool, paused: the whole queue is being paused, and
    /// no member may start one meanwhile. (Admitted queued, they would be this member's surplus,
    /// offered back to the pool before the pause reached them.) Nothing outside a fleet.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/io`` when the store fails.
    public func claimPool() async throws(DownloadError) {
        guard queueIsShared, storeFailure == nil, !halted else { return }
        while true {
            let rows = try await store.claim(queue: queue, limit: Self.poolClaimBatch)
            guard !isShutDown else { return }
            admitClaimed(rows, paused: true)
            guard rows.count == Self.poolClaimBatch else { break }
        }
        schedule()
    }

    /// Rows claimed from the pool in one transaction by ``claimPool()``.
    static let poolClaimBatch = 10_000

    // MARK: Messages

    /// The messages other members send this one (``sendToFleet(_:to:)``), until the store
    /// closes; outside a fleet, none. Returns once it listens. Ask once: each call listens anew.
    public func fleetMessages() async -> AsyncStream<FleetMessage> {
        await store.database.listen(queue)
    }

    /// Sends `body` to the member `recipient` (a ``FleetPeer/id``), or to every other member
    /// when nil. At most about 8000 bytes; a member that does not listen at this moment misses it.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/io`` when the store cannot be
    ///   reached, ``DownloadError/Kind/invalidRequest`` when `body` is too large.
    public func sendToFleet(_ body: String, to recipient: String?) async throws(DownloadError) {
        try await store.database.notify(queue, body, to: recipient)
    }
}
