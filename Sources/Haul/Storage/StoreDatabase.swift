import Foundation
import GRDB

/// One statement of a transaction: its SQL, with `?` placeholders, and their values in order.
struct StoreStatement: Sendable {
    var sql: String
    var values: [DatabaseValue]
    /// What the writer's statements do to a `download` row, so that a database where each
    /// statement costs a round trip (PostgreSQL) can write many rows in one; nil for the rest.
    var batching: Batching?

    /// The writer's three statements on the `download` table.
    enum Batching: Hashable, Sendable {
        /// Inserts a row of ``DownloadRow/storedColumns``, replacing the row of its id.
        case insert
        /// Sets the columns of a ``RowPatch`` mask and `updatedAt` (the values' order) of the
        /// row whose id is the last value.
        case update(mask: UInt32)
        /// Deletes the row whose id is the one value.
        case delete
    }

    init(_ sql: String, _ values: [DatabaseValue] = [], batching: Batching? = nil) {
        self.sql = sql
        self.values = values
        self.batching = batching
    }
}

/// The database under a ``Store``: SQLite in the state folder (``SQLiteStoreDatabase``, the
/// default) or a PostgreSQL server (``PostgreSQLStoreDatabase``), each with its own migrations.
///
/// The store speaks to both in the SQL they share, with `?` placeholders; what differs (an upsert,
/// the errors' words) is asked of the database. Rows come back as GRDB's `Row`, so each record
/// decodes the same way from either.
protocol StoreDatabase: Sendable {
    /// Where the records are, for messages: a file's path, or a server's URL without its password.
    var location: String { get }

    /// The rows `sql` selects, each made a `T` by `decode` (which looks columns up by name, in
    /// any case).
    func fetch<T: Sendable>(_ sql: String, _ values: [DatabaseValue], _ decode: @escaping @Sendable (Row) throws -> T) async throws -> [T]

    /// Runs `statements` in one transaction: all of them, or none when one fails.
    func write(_ statements: [StoreStatement]) async throws

    /// Inserts a row of `table` with `columns`, replacing the row of the same `key`.
    func upsertSQL(table: String, columns: [String], key: [String]) -> String

    /// Keeps `queue` to this process while the database is open, or throws
    /// ``DownloadError/Kind/io`` saying who holds it. SQLite needs nothing: the daemon's lock
    /// on its state folder already keeps a second daemon away.
    func takeQueue(_ queue: String) async throws(DownloadError)

    /// Gives back what it holds: the log's copies of old rows (SQLite), the connections (PostgreSQL).
    func close() async throws

    /// Told once the writer failed for good (nothing more will be written): a queue held is
    /// given back.
    func failed() async

    /// The database's words for why `error` happened, without the statement.
    func reason(_ error: any Error) -> String

    /// What to do about `error`, for the end of a message.
    func advice(_ error: any Error) -> String
}

extension StoreDatabase {
    func takeQueue(_ queue: String) async throws(DownloadError) {}

    func failed() async {}
}
