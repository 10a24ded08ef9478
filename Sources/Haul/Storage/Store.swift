import Foundation
import GRDB

/// The store: one row per download (``DownloadRow``), written through one group-committing
/// ``StoreWriter``, in SQLite in the state folder (shared by every Haul process that uses the
/// same folder) or on a PostgreSQL server (``StoreLocation``).
///
/// Reads see every change submitted before them: they wait for the writer first.
final class Store: Sendable {
    let database: any StoreDatabase
    let writer: StoreWriter

    /// Where the records are, for messages.
    var path: String { database.location }

    /// The store in `state.sqlite` in `directory`. `observer` is told of each transaction.
    convenience init(directory: String, observer: EngineObserver = EngineObserver()) throws(DownloadError) {
        self.init(database: try SQLiteStoreDatabase(directory: directory), observer: observer)
    }

    /// A store in memory, for tests of the manager's bookkeeping at scale (and of the writer,
    /// with another `linger`).
    convenience init(inMemory: (), linger: Duration = StoreWriter.linger) throws(DownloadError) {
        self.init(database: try SQLiteStoreDatabase(inMemory: ()), linger: linger)
    }

    init(database: any StoreDatabase, observer: EngineObserver = EngineObserver(), linger: Duration = StoreWriter.linger) {
        self.database = database
        writer = StoreWriter(database: database, linger: linger, committed: observer.storeCommitted)
    }

    // MARK: Reading

    /// The rows `sql` selects, each made a `T` by `decode`, after everything submitted so far
    /// is written.
    func fetch<T: Sendable>(
        _ sql: String, _ values: [DatabaseValue] = [], _ decode: @escaping @Sendable (Row) throws -> T
    ) async throws(DownloadError) -> [T] {
        try await writer.flush()
        return try await fetchCommitted(sql, values, decode)
    }

    /// The rows `sql` selects as last committed, without waiting for the writer (a poll of
    /// counts every few milliseconds would otherwise cut its group commit short each time).
    func fetchCommitted<T: Sendable>(
        _ sql: String, _ values: [DatabaseValue], _ decode: @escaping @Sendable (Row) throws -> T
    ) async throws(DownloadError) -> [T] {
        try await reading { try await database.fetch(sql, values, decode) }
    }

    /// The download rows `sql` selects (every column) as last committed.
    private func committedDownloads(_ sql: String, _ values: [DatabaseValue]) async throws(DownloadError) -> [DownloadRow] {
        try await reading { try await database.fetchDownloads(sql, values) }
    }

    /// Runs `read`, its failure said as the store's.
    private func reading<T>(_ read: () async throws -> T) async throws(DownloadError) -> T {
        do { return try await read() } catch is CancellationError {
            // A pause or cancel arrived while waiting for the store; nothing failed.
            throw .cancelled
        } catch let failure as StoreOpenFailure {
            throw failure.error
        } catch {
            throw .io("cannot read the download records in \(path): \(database.reason(error))")
        }
    }

    /// The downloads `sql` selects.
    private func downloads(_ sql: String, _ values: [DatabaseValue]) async throws(DownloadError) -> [DownloadRow] {
        try await writer.flush()
        return try await committedDownloads(sql, values)
    }

    func row(_ id: DownloadID) async throws(DownloadError) -> DownloadRow? {
        try await downloads("SELECT * FROM download WHERE id = ?", [id.storedValue.databaseValue]).first
    }

    /// The row as last committed, without waiting for changes still on their way to the
    /// store (``fetch(_:_:)`` flushes them first, which cuts the writer's group commit short: a
    /// page polling a download's pieces every second would add a commit a second).
    func committedRow(_ id: DownloadID) async throws(DownloadError) -> DownloadRow? {
        try await committedDownloads("SELECT * FROM download WHERE id = ?", [id.storedValue.databaseValue]).first
    }

    /// The rows that have written (or finished) the file at `path`, newest first.
    func rows(path: String) async throws(DownloadError) -> [DownloadRow] {
        try await downloads("SELECT * FROM download WHERE path = ? ORDER BY updatedAt DESC", [path.databaseValue])
    }

    /// The row that wrote (or finished) the file at `path` most recently.
    func row(path: String) async throws(DownloadError) -> DownloadRow? {
        try await rows(path: path).first
    }

    /// Every row of `queue`, in queue order.
    func rows(queue: String) async throws(DownloadError) -> [DownloadRow] {
        // Sorted here: no index holds that order, and SQLite's sort of the whole queue (in a
        // temporary B-tree) took longer than reading it.
        var rows = try await downloads("SELECT * FROM download WHERE queue = ?", [queue.databaseValue])
        rows.sort { $0.priority != $1.priority ? $0.priority > $1.priority : $0.position < $1.position }
        return rows
    }

    /// The files of `queue`'s downloads to a file (not to a folder), a few columns of each
    /// (``DownloadRow/File``), in no order.
    func files(queue: String) async throws(DownloadError) -> [DownloadRow.File] {
        try await fetch(
            "SELECT \(DownloadRow.File.columns) FROM download WHERE queue = ? AND destinationKind = 0", [queue.databaseValue],
            DownloadRow.File.init(row:))
    }

    /// The rows of `queue` for these destinations (the paths asked for), in one query per 500,
    /// after one flush.
    func rows(queue: String, destinations: Set<String>) async throws(DownloadError) -> [DownloadRow] {
        try await writer.flush()
        let list = Array(destinations)
        var rows: [DownloadRow] = []
        var start = 0
        while start < list.count {
            let chunk = list[start..<min(list.count, start + 500)]
            let marks = chunk.map { _ in "?" }.joined(separator: ", ")
            rows += try await committedDownloads(
                "SELECT * FROM download WHERE queue = ? AND destination IN (\(marks))", [queue.databaseValue] + chunk.map(\.databaseValue))
            start += 500
        }
        return rows
    }

    /// The largest position and finish order used in `queue`.
    func counters(queue: String) async throws(DownloadError) -> (position: Int64, finishOrder: Int64) {
        let counters = try await fetch(
            "SELECT MAX(position) AS lastPosition, MAX(finishOrder) AS lastFinishOrder FROM download WHERE queue = ?",
            [queue.databaseValue]
        ) { row in (position: row["lastPosition"] ?? 0 as Int64, finishOrder: row["lastFinishOrder"] ?? 0 as Int64) }
        return counters.first ?? (0, 0)
    }

    /// The rows of `queue` this store holds (on SQLite, all of them; in a fleet, this member's),
    /// in queue order.
    func heldRows(queue: String) async throws(DownloadError) -> [DownloadRow] {
        let held = database.heldCondition
        return try await downloads(
            "SELECT * FROM download WHERE queue = ?\(held.sql) ORDER BY priority DESC, position", [queue.databaseValue] + held.values)
    }

    /// The ids of the rows of `queue` this store holds (``heldRows(queue:)``'s, without the rows).
    func heldIDs(queue: String) async throws(DownloadError) -> [DownloadID] {
        let held = database.heldCondition
        return try await fetch("SELECT id FROM download WHERE queue = ?\(held.sql)", [queue.databaseValue] + held.values) {
            DownloadID(rawValue: UInt64(bitPattern: $0["id"] as Int64))
        }
    }

    /// Those of `ids` among the rows of `queue` this store holds, a few hundred ids a query.
    func heldRows(queue: String, ids: [DownloadID]) async throws(DownloadError) -> [DownloadRow] {
        let held = database.heldCondition
        var rows: [DownloadRow] = []
        var start = 0
        while start < ids.count {
            let chunk = ids[start..<min(start + 500, ids.count)]
            start += chunk.count
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ", ")
            rows += try await downloads(
                "SELECT * FROM download WHERE queue = ?\(held.sql) AND id IN (\(marks))",
                [queue.databaseValue] + held.values + chunk.map(\.storedValue.databaseValue))
        }
        return rows
    }

    /// Makes this store a member of `queue` (``StoreDatabase/join(_:)``).
    @discardableResult
    func join(_ queue: String) async throws(DownloadError) -> FleetLook {
        try await database.join(queue)
    }

    /// Takes over the rows of `queue` nobody holds (``StoreDatabase/takeOver(_:)``), after
    /// everything submitted so far is written.
    func takeOver(_ queue: String, publishing status: String) async throws(DownloadError) -> FleetLook {
        try await writer.flush()
        return try await database.takeOver(queue, publishing: status)
    }

    /// Offers `ids` to the other members of the queue (``StoreDatabase/offer(_:)``), after
    /// everything submitted so far is written (their rows among it).
    func offer(_ ids: [DownloadID]) async throws(DownloadError) {
        try await writer.flush()
        try await database.offer(ids)
    }

    /// Claims up to `limit` downloads offered in `queue` (``StoreDatabase/claim(_:limit:)``).
    func claim(queue: String, limit: Int) async throws(DownloadError) -> [DownloadRow] {
        try await database.claim(queue, limit: limit)
    }

    /// Claims those of `ids` offered to the fleet (``StoreDatabase/claim(ids:)``).
    func claim(ids: [DownloadID]) async throws(DownloadError) -> [DownloadRow] {
        try await database.claim(ids: ids)
    }

    // MARK: Writing

    /// Writes `statements` in a transaction of their own, after everything submitted so far:
    /// for the few rows that are not downloads (``settings(queue:)``, uploads).
    func write(_ statements: [StoreStatement]) async throws(DownloadError) {
        try await writer.flush()
        do { try await database.write(statements) } catch let failure as StoreOpenFailure { throw failure.error } catch {
            throw .io("cannot write to the store \(path): \(database.reason(error)); \(database.advice(error))")
        }
    }

    /// Writes everything submitted so far.
    func flush() async throws(DownloadError) {
        try await writer.flush()
    }

    /// Writes what is left, then lets the database go (``StoreDatabase/close()``), even when
    /// the writing failed.
    func close() async throws(DownloadError) {
        var failure: DownloadError?
        do { try await writer.flush() } catch { failure = error }
        do { try await database.close() } catch {
            failure =
                failure
                ?? .io("cannot save the download records in \(path): \(database.reason(error)); \(database.advice(error)), then run again")
        }
        if let failure { throw failure }
    }
}
