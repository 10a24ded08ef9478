import Foundation
import GRDB

/// One statement of a transaction: its SQL, with `?` placeholders, and their values in order.
struct StoreStatement: Sendable {
    var sql: String
    var values: [DatabaseValue]
    /// What the writer's statements do to a `download` row, so that a database where each
    /// statement costs a round trip (PostgreSQL) can write many rows in one; nil for the rest.
    var batching: Batching?

    /// The writer's statements on the `download` table.
    enum Batching: Hashable, Sendable {
        /// Inserts a row of ``DownloadRow/storedColumns``, replacing the row of its id.
        case insert
        /// The same, with an empty `owner` last: the row goes to a fleet's pool.
        case pooledInsert
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

/// A database opened at its first use (SQLite's) that could not be: its error, worded, which the
/// store passes on as it is rather than as a read or a write that failed.
struct StoreOpenFailure: Error {
    let error: DownloadError
}

/// The database under a ``Store``: SQLite in the state folder (``SQLiteStoreDatabase``, the
/// default) or a PostgreSQL server (``PostgreSQLStoreDatabase``), each with its own migrations.
///
/// The store speaks to both in the SQL they share, with `?` placeholders; what differs (an upsert,
/// the errors' words) is asked of the database. Rows come back as GRDB's `Row`, so each record
/// decodes the same way from either; download rows, the many, as ``StoredColumns``
/// (``fetchDownloads(_:_:)``).
protocol StoreDatabase: Sendable {
    /// Where the records are, for messages: a file's path, or a server's URL without its password.
    var location: String { get }

    /// The rows `sql` selects, each made a `T` by `decode` (which looks columns up by name, in
    /// any case).
    func fetch<T: Sendable>(_ sql: String, _ values: [DatabaseValue], _ decode: @escaping @Sendable (Row) throws -> T) async throws -> [T]

    /// The download rows `sql` selects (every column of `download`).
    func fetchDownloads(_ sql: String, _ values: [DatabaseValue]) async throws -> [DownloadRow]

    /// Whether the rows ``fetch(_:_:_:)`` gives for one query all hold their columns in one
    /// order, so that a decoder may find them once (SQLite's, a statement's rows); false where
    /// each row is made from a dictionary, in any order (PostgreSQL's).
    var rowsKeepColumnOrder: Bool { get }

    /// Runs `statements` in one transaction: all of them, or none when one fails.
    func write(_ statements: [StoreStatement]) async throws

    /// Inserts a row of `table` with `columns`, replacing the row of the same `key`.
    func upsertSQL(table: String, columns: [String], key: [String]) -> String

    /// Whether other processes may share its queues (PostgreSQL): a manager then looks for rows
    /// to take over (``takeOver(_:)``).
    var isShared: Bool { get }

    /// Makes this store a member of `queue`, which several processes may share (a fleet of
    /// daemons on one PostgreSQL), taking over the rows no live member holds (as
    /// ``takeOver(_:)``, whose look it returns); throws
    /// ``DownloadError/Kind/io`` when it cannot. SQLite needs nothing: the daemon's lock on its
    /// state folder keeps a second daemon away, and every row is this process's.
    @discardableResult
    func join(_ queue: String) async throws(DownloadError) -> FleetLook

    /// Takes over the rows of `queue` that no live member holds any more (a member gone, or
    /// out of its lease); says how many, and which members are live with what each published.
    /// `status` is this member's to publish (``FleetStatus``, encoded). Nothing on SQLite.
    func takeOver(_ queue: String, publishing status: String) async throws(DownloadError) -> FleetLook

    /// How many download rows of `queue` this store holds; 0 on SQLite (the manager holds them all).
    func heldCount(_ queue: String) async throws(DownloadError) -> Int

    /// Offers `ids`, queued downloads of this store's, to the other members of its queue: each
    /// is claimed by one of them (``claim(_:limit:)``), or by this store again.
    func offer(_ ids: [DownloadID]) async throws(DownloadError)

    /// Takes up to `limit` of the downloads offered in `queue`, first in queue order; those
    /// another member is claiming at this moment are left to it.
    func claim(_ queue: String, limit: Int) async throws(DownloadError) -> [DownloadRow]

    /// Takes those of `ids` that wait in the pool; another member's are left to it.
    func claim(ids: [DownloadID]) async throws(DownloadError) -> [DownloadRow]

    /// Sets this member's shares of the connections to the hosts of `wanted` (how many it would
    /// use to each, and has open), so that the fleet opens at most `limit` to each host, and
    /// returns them; nil when another member is sharing at this moment (ask again later). On
    /// SQLite, the wants capped at `limit` (a process of its own has no one to share with).
    func shareHosts(_ queue: String, limit: Int, wanted: [String: HostWant]) async throws(DownloadError) -> [String: Int]?

    /// Why this store may not write any more, once another member of a queue it joined took its
    /// rows over (it was paused, or cut off, past its lease); nil while it may.
    var lostMembership: (any Error)? { get }

    /// How many times this store renewed its lease as a member of a queue (every transaction it
    /// wrote); 0 on SQLite.
    var leaseRenewals: Int { get }

    /// Sets what this member's next transactions publish of `queue` for the others
    /// (``MemberCounts``); says whether that changed what they publish (nothing does on SQLite).
    func publish(_ counts: MemberCounts, of queue: String) -> Bool

    /// The SQL condition (and its values) that selects the rows this store holds in a queue it
    /// joined: `AND owner = ?` on PostgreSQL, nothing on SQLite.
    var heldCondition: (sql: String, values: [DatabaseValue]) { get }

    /// This store as a member of a fleet: its id (the `owner` of its rows) and its name for
    /// people; nil on SQLite.
    var memberIdentity: (id: String, name: String)? { get }

    /// The messages other members of `queue` send to this one, or to all (``notify(_:_:to:)``),
    /// from when it returns until the store closes; none on SQLite.
    func listen(_ queue: String) async -> AsyncStream<FleetMessage>

    /// Sends `body` to the member `recipient` of `queue`, or to every other member when nil; on
    /// SQLite there is no one to send to.
    func notify(_ queue: String, _ body: String, to recipient: String?) async throws(DownloadError)

    /// Gives back what it holds: the log's copies of old rows (SQLite), the connections (PostgreSQL).
    func close() async throws

    /// Told once the writer failed for good (nothing more will be written): the queues joined
    /// are left, for other members to take the rows over.
    func failed() async

    /// The database's words for why `error` happened, without the statement.
    func reason(_ error: any Error) -> String

    /// What to do about `error`, for the end of a message.
    func advice(_ error: any Error) -> String
}

extension StoreDatabase {
    var isShared: Bool { false }

    var rowsKeepColumnOrder: Bool { false }

    func fetchDownloads(_ sql: String, _ values: [DatabaseValue]) async throws -> [DownloadRow] {
        try await fetch(sql, values, DownloadRow.decoder(sameOrder: rowsKeepColumnOrder))
    }

    func join(_ queue: String) async throws(DownloadError) -> FleetLook { FleetLook() }

    func takeOver(_ queue: String, publishing status: String) async throws(DownloadError) -> FleetLook { FleetLook() }

    /// ``takeOver(_:publishing:)`` with nothing to publish.
    func takeOver(_ queue: String) async throws(DownloadError) -> FleetLook { try await takeOver(queue, publishing: "") }

    var memberIdentity: (id: String, name: String)? { nil }

    func listen(_ queue: String) async -> AsyncStream<FleetMessage> { AsyncStream { $0.finish() } }

    func notify(_ queue: String, _ body: String, to recipient: String?) async throws(DownloadError) {}

    func offer(_ ids: [DownloadID]) async throws(DownloadError) {}

    func heldCount(_ queue: String) async throws(DownloadError) -> Int { 0 }

    func claim(_ queue: String, limit: Int) async throws(DownloadError) -> [DownloadRow] { [] }

    func claim(ids: [DownloadID]) async throws(DownloadError) -> [DownloadRow] { [] }

    func shareHosts(_ queue: String, limit: Int, wanted: [String: HostWant]) async throws(DownloadError) -> [String: Int]? {
        wanted.mapValues { min(limit, $0.want) }
    }

    var heldCondition: (sql: String, values: [DatabaseValue]) { ("", []) }

    var lostMembership: (any Error)? { nil }

    var leaseRenewals: Int { 0 }

    func publish(_ counts: MemberCounts, of queue: String) -> Bool { false }

    func failed() async {}
}

/// A member's downloads of a queue by status, as its manager's book has them: published with
/// every transaction it writes, so that any member can count the whole fleet's from a few rows.
struct MemberCounts: Sendable, Equatable {
    var queued = 0
    var running = 0
    var paused = 0
    var completed = 0
    var failed = 0
    /// The completed downloads' bytes.
    var completedBytes: Int64 = 0

    /// As published: `[queued, running, paused, completed, failed, completedBytes]`.
    var json: String { "[\(queued),\(running),\(paused),\(completed),\(failed),\(completedBytes)]" }
}

/// What a member of a fleet would use of a host's connections, and how many it has open now
/// (``StoreDatabase/shareHosts(_:limit:wanted:)``).
struct HostWant: Sendable, Equatable {
    var want: Int
    var open: Int
}

/// What a member of a fleet found when it looked (``StoreDatabase/takeOver(_:)``).
struct FleetLook: Sendable, Equatable {
    /// Rows that became this store's.
    var taken = 0
    /// The other members whose lease holds.
    var others = 0
    /// This store is the member that joined first of those whose lease holds (outside a
    /// fleet, always): it runs what only one daemon of a fleet may, the daemon's mirrors.
    var eldest = true
    /// Downloads wait in the pool, offered and not claimed yet.
    var pooled = false
    /// A batch was full: more rows may be waiting to be taken over.
    var more = false
    /// The members whose lease holds, this one among them, eldest first.
    var members: [Member] = []

    /// A live member, as the others see it.
    struct Member: Sendable, Equatable {
        /// The `owner` of its rows.
        var id: String
        /// `HOST/PID`, for people.
        var name: String
        /// What it published at its last look (``FleetStatus``, encoded; empty before its first).
        var status: String
    }
}

/// A message from another member of a fleet (``DownloadManager/fleetMessages()``).
public struct FleetMessage: Sendable, Equatable {
    /// The sender's id (``DownloadManager/FleetPeer/id``).
    public var from: String
    /// What it says; the store carries it as it is.
    public var body: String

    /// The text of a notification: the sender, the recipient (`*` for all), the body.
    static func envelope(from sender: String, to recipient: String?, _ body: String) -> String {
        sender + " " + (recipient ?? "*") + " " + body
    }

    /// The message of a notification's text, when it is for `member` (to it, or to all, from
    /// another); nil otherwise.
    init?(envelope: String, to member: String) {
        let parts = envelope.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] != member, parts[1] == "*" || parts[1] == member else { return nil }
        from = String(parts[0])
        body = String(parts[2])
    }
}
