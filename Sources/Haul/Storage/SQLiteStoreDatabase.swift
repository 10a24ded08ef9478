import Foundation
import GRDB
import Synchronization

/// The store in SQLite (WAL mode), `state.sqlite` in the state folder: the default, shared by
/// every Haul process that uses the same folder.
///
/// The database itself is opened at the first read or write: a run that never reads or
/// writes a record (a plain `PUT`) does not pay for it (2-3 ms of a short run: SQLite's WAL
/// set-up, GRDB's pool, the migrations' check). The folder is made and checked at once.
final class SQLiteStoreDatabase: StoreDatabase {
    /// The database once opened, or why it could not be (every later use fails the same way).
    private let database: Mutex<Result<any DatabaseWriter, StoreOpenFailure>?>
    /// Opens the database; called once, at the first use.
    private let open: @Sendable () throws -> any DatabaseWriter
    let location: String

    /// Makes (if needed) the folder `directory`, of mode 0700, where `state.sqlite` will be,
    /// of mode 0600: it may hold credentials. The database is opened at its first use.
    init(directory: String) throws(DownloadError) {
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
        let path = (directory as NSString).appendingPathComponent("state.sqlite")
        location = path
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
        database = Mutex(nil)
        open = { [configuration] in
            if !FileManager.default.fileExists(atPath: path) {
                // Created private before SQLite opens it; if this fails, opening it below says why.
                _ = FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
            } else {
                chmod(path, 0o600)
            }
            let pool = try DatabasePool(path: path, configuration: configuration)
            try Store.migrator.migrate(pool)
            return pool
        }
    }

    /// A database in memory, for tests of the manager's bookkeeping at scale.
    init(inMemory: ()) throws(DownloadError) {
        location = ":memory:"
        do {
            let queue = try DatabaseQueue()
            try Store.migrator.migrate(queue)
            database = Mutex(.success(queue))
            open = { queue }
        } catch {
            throw DownloadError.io("cannot make a store in memory: \(error)")
        }
    }

    /// The database, opened by the first caller (the others wait for it).
    private func opened() throws(StoreOpenFailure) -> any DatabaseWriter {
        try database.withLock { database throws(StoreOpenFailure) in
            if let database { return try database.get() }
            let result = Result { () throws(StoreOpenFailure) in
                do { return try open() } catch {
                    throw StoreOpenFailure(
                        error: .io("cannot open the store \(location): \(Self.reason(error)); \(Self.advice(error))"))
                }
            }
            database = result
            return try result.get()
        }
    }

    /// A statement's rows: one `Row`, stepped through, whose columns keep the statement's order.
    var rowsKeepColumnOrder: Bool { true }

    func fetch<T: Sendable>(_ sql: String, _ values: [DatabaseValue], _ decode: @escaping @Sendable (Row) throws -> T) async throws -> [T] {
        try await opened().read { db in
            // A statement of a few placeholders is one of the store's own, asked again and again
            // (a file's row, once for each file of a list): prepared once and kept. A long list
            // of values is a batch's, whose length varies: prepared for the one query.
            let statement = values.count <= 16 ? try db.cachedStatement(sql: sql) : try db.makeStatement(sql: sql)
            // Decoded from the statement's own row as the cursor steps: a copied row looks each
            // column up by comparing lowercased names, 27 times over 27 columns for a download.
            return try Array(Row.fetchCursor(statement, arguments: StatementArguments(values)).map(decode))
        }
    }

    func write(_ statements: [StoreStatement]) async throws {
        try await opened().write { db in
            for statement in statements { try db.cachedStatement(sql: statement.sql).run(binding: statement.values) }
        }
    }

    func upsertSQL(table: String, columns: [String], key: [String]) -> String {
        "INSERT OR REPLACE INTO \(table) (" + columns.joined(separator: ", ") + ") VALUES ("
            + columns.map { _ in "?" }.joined(separator: ", ") + ")"
    }

    /// Copies the log into the database and empties it: the log keeps old copies of rows (a
    /// finished download's credentials among them) until then. Another process still reading
    /// keeps its part of the log; that is not a failure.
    ///
    /// A process that changed no row (a mirror's resync that found nothing new) leaves a log
    /// that holds nothing but GRDB's mark: the mark is what GRDB writes into an empty log when
    /// it opens the database (a table made and dropped, two pages), so emptying it only made
    /// the next process write it again, each a transaction and four `fsync`s for nothing.
    func close() async throws {
        // Never opened, or not openable (said at the first use): this process changed nothing.
        guard case .success(let database) = database.withLock({ $0 }) else { return }
        let log = location + "-wal"
        do {
            try await database.writeWithoutTransaction { db in
                if db.totalChangesCount == 0, let pageSize = try Int.fetchOne(db, sql: "PRAGMA page_size") {
                    var info = stat()
                    // The log's header and at most three pages (each with its own header).
                    if stat(log, &info) == 0, info.st_size <= 32 + 3 * (24 + pageSize) { return }
                }
                _ = try db.checkpoint(.truncate)
            }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY || error.resultCode == .SQLITE_LOCKED {
            return
        }
    }

    func reason(_ error: any Error) -> String { Self.reason(error) }

    func advice(_ error: any Error) -> String { Self.advice(error) }

    /// What to do about `error`, for the end of its message: only a full disk asks for space.
    static func advice(_ error: any Error) -> String {
        switch (error as? DatabaseError)?.resultCode {
        case .SQLITE_FULL?: "free some space"
        case .SQLITE_READONLY?, .SQLITE_CANTOPEN?, .SQLITE_PERM?, .SQLITE_AUTH?:
            "make the state folder writable, or choose another with --state-dir"
        default: "check the disk and the state folder (--state-dir)"
        }
    }

    /// SQLite's words for why, without the statement.
    static func reason(_ error: any Error) -> String {
        if let error = error as? DatabaseError {
            switch error.resultCode {
            case .SQLITE_FULL: return "the disk is full"
            case .SQLITE_READONLY: return "it is read-only"
            case .SQLITE_CANTOPEN: return "it cannot be opened"
            case .SQLITE_IOERR: return "input/output error (\(error.message ?? "disk error"))"
            default: return error.message ?? "\(error.resultCode)"
            }
        }
        return "\(error)"
    }
}
