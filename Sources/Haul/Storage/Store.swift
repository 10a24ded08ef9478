import Foundation
import GRDB

/// The SQLite store (WAL mode) shared by every Haul process that uses the same state folder:
/// one row per download (``DownloadRow``), written through one group-committing
/// ``StoreWriter``.
///
/// Reads see every change submitted before them: they wait for the writer first.
final class Store: Sendable {
    private let database: any DatabaseWriter
    let path: String
    let writer: StoreWriter

    /// Opens (creating if needed) `state.sqlite` in `directory`, a folder of mode 0700 with
    /// the database 0600: it may hold credentials. `observer` is told of each transaction.
    init(directory: String, observer: EngineObserver = EngineObserver()) throws(DownloadError) {
        do {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
        } catch {
            throw DownloadError.io("cannot create state folder \(directory): \((error as NSError).localizedDescription)")
        }
        // A folder made by an older version, or by hand, is closed to others too.
        chmod(directory, 0o700)
        // Said plainly here: SQLite would only say it cannot open its log.
        guard access(directory, W_OK) == 0 else {
            let reason = errno == EROFS ? "it is on a read-only filesystem" : String(cString: strerror(errno))
            throw DownloadError.io("cannot write to the state folder \(directory): \(reason); make it writable, or choose another with --state-dir")
        }
        path = (directory as NSString).appendingPathComponent("state.sqlite")
        var configuration = Configuration()
        // Another `haul` may be committing at the same moment; wait rather than fail.
        configuration.busyMode = .timeout(10)
        configuration.label = "haul.store"
        // A long list rewrites the same pages of its rows transaction after transaction: copied
        // to the database every 4000 pages of log (not SQLite's 1000) they are copied once for
        // many changes, and with 8 MiB of cache (not 2) the writer rereads none of them. The
        // readers keep SQLite's cache: they read a few pages now and then.
        // secure_delete: a row deleted (a download removed or purged) is overwritten with zeros,
        // not left in the file's free space: its request may hold passwords.
        configuration.prepareDatabase { db in
            guard !db.configuration.readonly else { return }
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 4000; PRAGMA cache_size = -8192; PRAGMA secure_delete = ON")
        }
        let path = path
        do {
            if !FileManager.default.fileExists(atPath: path) {
                // Created private before SQLite opens it; if this fails, opening it below says why.
                _ = FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
            } else {
                chmod(path, 0o600)
            }
            let pool = try DatabasePool(path: path, configuration: configuration)
            try Self.migrator.migrate(pool)
            database = pool
        } catch {
            throw DownloadError.io("cannot open the store \(path): \(StoreWriter.reason(error)); \(StoreWriter.advice(error))")
        }
        writer = StoreWriter(database: database, path: path, committed: observer.storeCommitted)
    }

    /// A store in memory, for tests of the manager's bookkeeping at scale (and of the writer,
    /// with another `linger`).
    init(inMemory: (), linger: Duration = StoreWriter.linger) throws(DownloadError) {
        path = ":memory:"
        do {
            let queue = try DatabaseQueue()
            try Self.migrator.migrate(queue)
            database = queue
        } catch {
            throw DownloadError.io("cannot make a store in memory: \(error)")
        }
        writer = StoreWriter(database: database, path: path, linger: linger)
    }

    // MARK: Reading

    func read<T: Sendable>(_ body: @Sendable @escaping (Database) throws -> T) async throws(DownloadError) -> T {
        try await writer.flush()
        do { return try await database.read(body) } catch is CancellationError {
            // A pause or cancel arrived while waiting for the store; nothing failed.
            throw .cancelled
        } catch {
            throw .io("cannot read the download records in \(path): \(StoreWriter.reason(error))")
        }
    }

    func row(_ id: DownloadID) async throws(DownloadError) -> DownloadRow? {
        try await read { db in try DownloadRow.fetchOne(db, key: id.storedValue) }
    }

    /// The row as last committed, without waiting for changes still on their way to the
    /// store (``read(_:)`` flushes them first, which cuts the writer's group commit short: a
    /// page polling a download's pieces every second would add a commit a second).
    func committedRow(_ id: DownloadID) async throws(DownloadError) -> DownloadRow? {
        do {
            return try await database.read { db in
                // A prepared statement kept by the connection: asked once for each file of a list.
                try DownloadRow.fetchOne(db.cachedStatement(sql: "SELECT * FROM download WHERE id = ?"), arguments: [id.storedValue])
            }
        } catch {
            throw .io("cannot read the download records in \(path): \(StoreWriter.reason(error))")
        }
    }

    /// The rows that have written (or finished) the file at `path`, newest first.
    func rows(path: String) async throws(DownloadError) -> [DownloadRow] {
        try await read { db in
            try DownloadRow.filter(DownloadRow.Columns.path == path).order(Column("updatedAt").desc).fetchAll(db)
        }
    }

    /// The row that wrote (or finished) the file at `path` most recently.
    func row(path: String) async throws(DownloadError) -> DownloadRow? {
        try await rows(path: path).first
    }

    /// Every row of `queue`, in queue order.
    func rows(queue: String) async throws(DownloadError) -> [DownloadRow] {
        try await read { db in
            try DownloadRow.filter(DownloadRow.Columns.queue == queue).order(Column("priority").desc, DownloadRow.Columns.position)
                .fetchAll(db)
        }
    }

    /// The rows of `queue` for these destinations (the paths asked for), in one query per 500.
    func rows(queue: String, destinations: Set<String>) async throws(DownloadError) -> [DownloadRow] {
        let list = Array(destinations)
        return try await read { db in
            var rows: [DownloadRow] = []
            var start = 0
            while start < list.count {
                let chunk = Array(list[start..<min(list.count, start + 500)])
                rows += try DownloadRow.filter(DownloadRow.Columns.queue == queue && chunk.contains(DownloadRow.Columns.destination))
                    .fetchAll(db)
                start += 500
            }
            return rows
        }
    }

    /// The largest position and finish order used in `queue`.
    func counters(queue: String) async throws(DownloadError) -> (position: Int64, finishOrder: Int64) {
        try await read { db in
            let row = try Row.fetchOne(db, sql: "SELECT MAX(position), MAX(finishOrder) FROM download WHERE queue = ?", arguments: [queue])
            return (row?[0] ?? 0, row?[1] ?? 0)
        }
    }

    /// Writes `body` in a transaction of its own, after everything submitted so far: for the
    /// few rows that are not downloads (``settings(queue:)``).
    func write(_ body: @Sendable @escaping (Database) throws -> Void) async throws(DownloadError) {
        try await writer.flush()
        do { try await database.write(body) } catch {
            throw .io("cannot write to the store \(path): \(StoreWriter.reason(error)); \(StoreWriter.advice(error))")
        }
    }

    /// Writes everything submitted so far.
    func flush() async throws(DownloadError) {
        try await writer.flush()
    }

    /// Writes what is left, then copies the log into the database and empties it: the log
    /// keeps old copies of rows (a finished download's credentials among them) until then.
    /// Another process still reading keeps its part of the log; that is not a failure.
    func close() async throws(DownloadError) {
        try await writer.flush()
        let database = database
        do {
            try await database.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY || error.resultCode == .SQLITE_LOCKED {
            return
        } catch {
            throw .io("cannot save the download records in \(path): \(StoreWriter.reason(error)); \(StoreWriter.advice(error)), then run again")
        }
    }
}
