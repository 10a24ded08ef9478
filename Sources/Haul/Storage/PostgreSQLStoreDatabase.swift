import Foundation
import GRDB
import Logging
import NIOCore
import NIOSSL
import PostgresNIO
import Synchronization

/// The store on a PostgreSQL server (``StoreLocation/init(parsing:)``), with migrations of its
/// own (``migrations``).
///
/// Two connections, each made on first use and again after it broke: one that writes, a
/// transaction at a time, and one that reads. The schema is brought up to date before the first
/// statement, so opening never blocks; the first read or write waits for it and says why when it
/// cannot.
///
/// A server that stops answering (an error, or silence) is asked again, for three times the
/// connect timeout, before a failure is reported: every statement the store writes can be written
/// twice (an insert replaces, an update sets values, a delete deletes), so a transaction whose
/// commit was lost with its connection is simply written again.
///
/// A queue may be shared by several daemons, a fleet (``join(_:)``). Each is a member with a
/// lease (a row of `fleetMember`), renewed by every transaction it writes and every
/// ``leaseRenewal`` besides, and each download or upload is owned by one member (its `owner`),
/// whose manager alone runs it. A member whose lease ran out, or whose process is gone, is
/// removed by the next member to look (``takeOver(_:)``), which takes its rows. A transaction
/// that finds this store's lease gone (it was paused, or cut off from the server, past the
/// lease) writes nothing, and the store fails: a row is only ever written by its owner.
final class PostgreSQLStoreDatabase: StoreDatabase {
    let location: String
    private let server: StoreLocation.PostgreSQL
    private let writer: PostgreSQLConnectionSlot
    private let reader: PostgreSQLConnectionSlot
    /// Whether the schema is up to date (``migrateOnce()``).
    private let migrated = Mutex(false)
    private let logger: Logger
    /// This store, as `fleetMember` and the rows' `owner` name it.
    let member: FleetMember
    /// The queues this store is a member of, and why it lost them once it has.
    private let queues = Mutex<(held: Set<String>, lost: String?, renewal: Task<Void, Never>?)>(([], nil, nil))
    /// Renewals of this store's lease so far (``leaseRenewals``).
    private let renewals = Atomic<Int>(0)
    /// `?` placeholders turned into `$n`, by statement.
    private let numbered = Mutex<[String: String]>([:])

    /// How long a member keeps its downloads without writing: a daemon whose machine died is
    /// taken over after this long (at once when it was on this machine: its pid is gone). Longer
    /// than a daemon cut off from the server goes on before its writes fail (twice the
    /// ``window``: one attempt's, then the retries') plus a renewal: by the time another daemon may
    /// take its downloads over, the first has stopped. 70 s with the default connect timeout.
    var lease: Duration { max(.seconds(30), window * 2 + Self.leaseRenewal) }
    /// How often an idle member renews its lease.
    static let leaseRenewal: Duration = .seconds(10)

    init(_ server: StoreLocation.PostgreSQL, logger: Logger) {
        self.server = server
        // PostgresNIO logs every failed connection at `info`: the store says it once, in its error.
        var quiet = logger
        if quiet.logLevel > .debug { quiet.logLevel = .error }
        let background = quiet
        self.logger = background
        location = StoreLocation(kind: .postgreSQL(server)).description
        let member = FleetMember.make()
        self.member = member
        let connect: @Sendable () async throws -> PostgresConnection = { try await Self.connect(server, member: member.id, logger: background) }
        writer = PostgreSQLConnectionSlot(connect: connect, exclusive: true)
        reader = PostgreSQLConnectionSlot(connect: connect, exclusive: false)
    }

    /// Brings the schema up to date once, before the first statement (again after a failure:
    /// a server that was down at first may be up now).
    private func migrateOnce() async throws {
        guard !migrated.withLock({ $0 }) else { return }
        let logger = logger
        try await writer.use(within: window) { connection in try await Self.migrate(connection, logger: logger) }
        migrated.withLock { $0 = true }
    }

    /// A new connection to `server`, whose inserts are owned by `member` (the `owner` columns'
    /// default, `haul.member`).
    static func connect(_ server: StoreLocation.PostgreSQL, member: String? = nil, logger: Logger) async throws -> PostgresConnection {
        var configuration =
            if let socket = server.socket {
                PostgresConnection.Configuration(
                    unixSocketPath: (socket as NSString).appendingPathComponent(".s.PGSQL.\(server.port)"), username: server.user,
                    password: server.password, database: server.database)
            } else {
                PostgresConnection.Configuration(
                    host: server.host ?? "localhost", port: server.port, username: server.user, password: server.password,
                    database: server.database, tls: try tls(server.sslMode))
            }
        configuration.options.connectTimeout = .nanoseconds(Int64(server.connectTimeout.components.seconds) * 1_000_000_000)
        // A transaction left open by a daemon cut off mid-write holds its rows' locks (its
        // member row among them) until the server drops the session: after this long, not
        // after TCP's two hours.
        let idle = Int64((server.connectTimeout * 3).components.seconds) * 1000
        configuration.options.additionalStartupParameters = [("idle_in_transaction_session_timeout", String(idle))]
        if let member { configuration.options.additionalStartupParameters.append(("haul.member", member)) }
        return try await PostgresConnection.connect(configuration: configuration, id: Int.random(in: 0..<Int.max), logger: logger)
    }

    /// libpq's `sslmode`: `prefer` and `require` encrypt without checking the certificate (a
    /// server's self-signed one, as Debian's `postgresql` makes, is accepted); `verify-ca` checks
    /// it against the system's CAs, `verify-full` its name too.
    static func tls(_ mode: String) throws -> PostgresConnection.Configuration.TLS {
        var configuration = TLSConfiguration.makeClientConfiguration()
        switch mode {
        case "disable": return .disable
        case "verify-full": return .require(try NIOSSLContext(configuration: configuration))
        case "verify-ca":
            configuration.certificateVerification = .noHostnameVerification
            return .require(try NIOSSLContext(configuration: configuration))
        case "require":
            configuration.certificateVerification = .none
            return .require(try NIOSSLContext(configuration: configuration))
        default:
            configuration.certificateVerification = .none
            return .prefer(try NIOSSLContext(configuration: configuration))
        }
    }

    // MARK: Statements

    func fetch<T: Sendable>(_ sql: String, _ values: [DatabaseValue], _ decode: @escaping @Sendable (Row) throws -> T) async throws -> [T] {
        let query = PostgresQuery(unsafeSQL: numbering(sql), binds: try Self.bindings(values))
        let logger = logger
        // A read of a whole queue (a restore) may take a while: as long as 3000 rows written.
        return try await retrying(on: reader, rows: 3000) { connection in
            var rows: [T] = []
            for try await row in try await connection.query(query, logger: logger) { rows.append(try decode(try Self.row(row))) }
            return rows
        }
    }

    func write(_ statements: [StoreStatement]) async throws {
        try await transaction(try queries(statements), rows: statements.count)
    }

    /// The queries that run `statements`. The writer's (a batch of downloads' rows) are merged,
    /// since each statement costs a round trip: the deletes into one per 5000 rows, the inserts
    /// into one per 1000, the updates of each set of columns into one per 1000 (an `UPDATE …
    /// FROM (VALUES …)`). Deletes first, then inserts, then updates: a batch changes each row once
    /// (a delete, or an insert and an update), so the order between rows does not matter.
    func queries(_ statements: [StoreStatement]) throws -> [PostgresQuery] {
        guard statements.count > 1, statements.allSatisfy({ $0.batching != nil }) else {
            return try statements.map { PostgresQuery(unsafeSQL: numbering($0.sql), binds: try Self.bindings($0.values)) }
        }
        var deletes: [DatabaseValue] = []
        var inserts: [[DatabaseValue]] = []
        var updates: [UInt32: [[DatabaseValue]]] = [:]
        var masks: [UInt32] = []
        for statement in statements {
            switch statement.batching {
            case .delete?: deletes.append(contentsOf: statement.values)
            case .insert?: inserts.append(statement.values)
            case .update(let mask)?:
                if updates[mask] == nil { masks.append(mask) }
                updates[mask, default: []].append(statement.values)
            case nil: break
            }
        }
        var queries: [PostgresQuery] = []
        for start in stride(from: 0, to: deletes.count, by: 5000) {
            let chunk = Array(deletes[start..<min(deletes.count, start + 5000)])
            let marks = (1...chunk.count).map { "$\($0)::bigint" }.joined(separator: ", ")
            queries.append(PostgresQuery(unsafeSQL: "DELETE FROM download WHERE id IN (\(marks))", binds: try Self.bindings(chunk)))
        }
        let columns = DownloadRow.storedColumns
        let conflict =
            " ON CONFLICT (id) DO UPDATE SET " + columns.dropFirst().map { "\($0) = EXCLUDED.\($0)" }.joined(separator: ", ")
        for start in stride(from: 0, to: inserts.count, by: 1000) {
            let rows = Array(inserts[start..<min(inserts.count, start + 1000)])
            let sql = "INSERT INTO download (" + columns.joined(separator: ", ") + ") VALUES " + Self.valuesList(rows.count, columns) + conflict
            queries.append(PostgresQuery(unsafeSQL: sql, binds: try Self.bindings(rows.flatMap { $0 })))
        }
        for mask in masks {
            let rows = updates[mask] ?? []
            let names = RowPatch.columnNames(mask) + ["updatedAt", "id"]
            let set = names.dropLast().map { "\($0) = v.\($0)" }.joined(separator: ", ")
            for start in stride(from: 0, to: rows.count, by: 1000) {
                let chunk = Array(rows[start..<min(rows.count, start + 1000)])
                let sql =
                    "UPDATE download AS d SET \(set) FROM (VALUES " + Self.valuesList(chunk.count, names) + ") AS v("
                    + names.joined(separator: ", ") + ") WHERE d.id = v.id"
                queries.append(PostgresQuery(unsafeSQL: sql, binds: try Self.bindings(chunk.flatMap { $0 })))
            }
        }
        return queries
    }

    /// `($1::type, …), (…)`: `rows` rows of `columns`' placeholders, each cast to its column's
    /// type (a NULL bound alone has none).
    static func valuesList(_ rows: Int, _ columns: [String]) -> String {
        var sql = ""
        sql.reserveCapacity(rows * columns.count * 12)
        var number = 0
        for row in 0..<rows {
            sql += row == 0 ? "(" : ", ("
            for (index, column) in columns.enumerated() {
                number += 1
                sql += (index == 0 ? "$" : ", $") + String(number) + "::" + (downloadTypes[column] ?? "text")
            }
            sql += ")"
        }
        return sql
    }

    /// Runs `queries` (which write `rows` rows) in one transaction (``transaction(rows:_:)``).
    private func transaction(_ queries: [PostgresQuery], rows: Int) async throws {
        let logger = logger
        try await transaction(rows: rows) { connection in
            for query in queries { try await connection.query(query, logger: logger) }
        }
    }

    /// Runs `body` between `BEGIN` and `COMMIT`, after renewing the lease of every queue this
    /// store is a member of (which fails the transaction if one was lost: another member took
    /// this one's downloads over); rolled back when `body` fails.
    private func transaction<T: Sendable>(rows: Int, _ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        let (held, lost) = queues.withLock { ($0.held, $0.lost) }
        if let lost { throw QueueTaken(message: lost) }
        let logger = logger
        let member = member
        let lease = Int(lease.components.seconds)
        do {
            let result = try await retrying(on: writer, rows: rows + 1) { connection in
                try await connection.query("BEGIN", logger: logger)
                do {
                    if !held.isEmpty { try await Self.renew(held, of: member, lease: lease, on: connection, logger: logger) }
                    let result = try await body(connection)
                    try await connection.query("COMMIT", logger: logger)
                    return result
                } catch {
                    _ = try? await connection.query("ROLLBACK", logger: logger)
                    throw error
                }
            }
            if !held.isEmpty { renewals.add(1, ordering: .relaxed) }
            return result
        } catch let error as QueueTaken {
            queues.withLock { $0.lost = $0.lost ?? error.message }
            throw error
        }
    }

    func upsertSQL(table: String, columns: [String], key: [String]) -> String {
        let keys = Set(key)
        return "INSERT INTO \(table) (" + columns.joined(separator: ", ") + ") VALUES (" + columns.map { _ in "?" }.joined(separator: ", ")
            + ") ON CONFLICT (" + key.joined(separator: ", ") + ") DO UPDATE SET "
            + columns.filter { !keys.contains($0) }.map { "\($0) = EXCLUDED.\($0)" }.joined(separator: ", ")
    }

    // MARK: The fleet

    var isShared: Bool { true }

    var lostMembership: (any Error)? { queues.withLock { $0.lost }.map { QueueTaken(message: $0) } }

    var leaseRenewals: Int { renewals.load(ordering: .relaxed) }

    var heldCondition: (sql: String, values: [DatabaseValue]) { (" AND owner = ?", [member.id.databaseValue]) }

    /// Makes this store a member of `queue`, which any number of daemons may share, and takes
    /// over what no live member holds (``takeOver(_:)``), all in one transaction.
    func join(_ queue: String) async throws(DownloadError) -> FleetLook {
        let logger = logger
        let member = member
        let lease = Int(lease.components.seconds)
        do {
            _ = try await retrying(on: writer, rows: 1) { connection in
                try await connection.query(
                    """
                    INSERT INTO fleetMember (queue, member, host, machine, pid, leaseUntil, joinedAt)
                    VALUES (\(queue), \(member.id), \(member.host), \(member.machine), \(member.pid),
                    extract(epoch from clock_timestamp()) + \(lease), extract(epoch from clock_timestamp()))
                    ON CONFLICT (queue, member) DO UPDATE SET leaseUntil = EXCLUDED.leaseUntil
                    """, logger: logger)
            }
        } catch {
            throw .io("cannot open the store \(location): \(reason(error)); \(advice(error))")
        }
        queues.withLock { queues in
            queues.held.insert(queue)
            guard queues.renewal == nil else { return }
            // Renewed while nothing else is written; a renewal that fails says so at the next write.
            queues.renewal = Task { [weak self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: Self.leaseRenewal)
                    guard !Task.isCancelled, let self else { return }
                    try? await self.transaction([], rows: 0)
                }
            }
        }
        return try await takeOver(queue)
    }

    /// Takes over the downloads and uploads of `queue` that no live member holds: those of
    /// members whose lease ran out, or that were processes of this machine that are gone (a
    /// daemon killed with -9), or that left, and those of nobody; a batch of ``reapBatch`` rows
    /// a transaction, until none is left. Says how many rows became this store's, how many other
    /// members are live, and whether this store is the fleet's eldest; nothing when it is not a
    /// member.
    func takeOver(_ queue: String) async throws(DownloadError) -> FleetLook {
        guard queues.withLock({ $0.held.contains(queue) }) else { return FleetLook() }
        let logger = logger
        let member = member
        var look = FleetLook()
        do {
            while true {
                let step = try await transaction(rows: Self.reapBatch) { connection in
                    try await Self.look(queue, for: member, on: connection, logger: logger)
                }
                look.taken += step.taken
                (look.others, look.eldest, look.pooled) = (step.others, step.eldest, step.pooled)
                guard step.more else { return look }
            }
        } catch {
            // Rows taken in an earlier batch are this store's: the caller loads them at its next look.
            throw .io("cannot take over the downloads of \(location): \(reason(error)); \(advice(error))")
        }
    }

    /// Rows moved to their new owner in one transaction of a takeover.
    static let reapBatch = 10_000

    /// In the transaction under way: what `member` sees of the fleet of `queue` (the live
    /// members, the pool), and, unless another member is reaping at this moment (an advisory lock
    /// of the queue's, tried, not waited for), the reaping: the members that may be gone are
    /// locked, skipping any in the middle of a transaction; those gone get `member` as their heir
    /// (their rows all go to one member, so a download and the one it depends on stay together),
    /// and up to ``reapBatch`` of the rows of the members it is heir of, and of nobody's when it is
    /// the eldest, become its own; a gone member with no rows left is removed. A lease that ran
    /// out is never renewed (``renew(_:of:lease:on:logger:)``), so a member found out of its lease
    /// stays gone while its rows move over several batches.
    static func look(
        _ queue: String, for member: FleetMember, on connection: PostgresConnection, logger: Logger
    ) async throws -> FleetLook {
        var look = FleetLook()
        let live = try await connection.query(
            """
            SELECT member FROM fleetMember WHERE queue = \(queue) AND leaseUntil >= extract(epoch from clock_timestamp())
            ORDER BY joinedAt, member
            """, logger: logger)
        var members: [String] = []
        for try await id in live.decode(String.self) { members.append(id) }
        look.others = members.filter { $0 != member.id }.count
        look.eldest = members.first == member.id
        let pooled = try await connection.query(
            "SELECT EXISTS (SELECT 1 FROM download WHERE queue = \(queue) AND owner = '' AND status = \(DownloadStatus.queued.storedValue))",
            logger: logger)
        for try await any in pooled.decode(Bool.self) { look.pooled = any }
        // One reaper at a time; a member that finds another reaping leaves it to it.
        var reaping = false
        for try await locked in try await connection.query(
            "SELECT pg_try_advisory_xact_lock(hashtext('haul.fleet'), hashtext(\(queue)))", logger: logger
        ).decode(Bool.self) { reaping = locked }
        guard reaping else { return look }
        let candidates = try await connection.query(
            """
            SELECT member, machine, pid, leaseUntil - extract(epoch from clock_timestamp()), coalesce(heir, '')
            FROM fleetMember WHERE queue = \(queue) AND member <> \(member.id)
            AND (leaseUntil < extract(epoch from clock_timestamp()) OR machine = \(member.machine))
            FOR UPDATE SKIP LOCKED
            """, logger: logger)
        var gone: [String] = []
        var killed: [String] = []
        // Without its pid namespace, a pid of "this machine" may be another container's.
        let pidsMeanSomething = !member.machine.hasSuffix("pid:[?]")
        for try await (id, machine, pid, left, heir) in candidates.decode((String, String, Int64, Double, String).self) {
            // A gone member's rows all go to one heir, over as many batches as it takes: a
            // download and the one it depends on stay together.
            if !heir.isEmpty, heir != member.id, members.contains(heir) { continue }
            if left < 0 {
                gone.append(id)
            } else if pidsMeanSomething, machine == member.machine, kill(pid_t(truncatingIfNeeded: pid), 0) != 0, errno == ESRCH {
                gone.append(id)
                killed.append(id)
            }
        }
        if !gone.isEmpty {
            // A member killed here: its lease ends now, and nothing renews it again.
            try await connection.query(
                """
                UPDATE fleetMember SET heir = \(member.id),
                leaseUntil = CASE WHEN member = ANY(\(killed)) THEN 0 ELSE leaseUntil END
                WHERE queue = \(queue) AND member = ANY(\(gone))
                """, logger: logger)
        }
        // The rows of nobody (a queue of before the fleet) go whole to the eldest.
        let nobody = look.eldest
        for table in ["download", "uploadJob"] {
            let count = try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        WITH taken AS (
                            UPDATE \(table) SET owner = $1 WHERE id IN (
                                SELECT id FROM \(table) WHERE queue = $2 AND ((owner IS NULL AND $5) OR owner = ANY($3)) LIMIT $4
                            ) RETURNING 1
                        ) SELECT count(*) FROM taken
                        """,
                    binds: {
                        var binds = PostgresBindings()
                        binds.append(member.id)
                        binds.append(queue)
                        binds.append(gone)
                        binds.append(reapBatch)
                        binds.append(nobody)
                        return binds
                    }()), logger: logger)
            for try await rows in count.decode(Int64.self) { look.taken += Int(rows) }
        }
        look.more = look.taken >= reapBatch
        if !gone.isEmpty, !look.more {
            try await connection.query(
                """
                DELETE FROM fleetMember m WHERE queue = \(queue) AND member = ANY(\(gone))
                AND NOT EXISTS (SELECT 1 FROM download d WHERE d.queue = m.queue AND d.owner = m.member)
                AND NOT EXISTS (SELECT 1 FROM uploadJob u WHERE u.queue = m.queue AND u.owner = m.member)
                """, logger: logger)
        }
        return look
    }

    /// How many rows this store holds in `queue`: the manager compares it with its book now and
    /// then, and reads what it misses (rows a retried transaction took, say).
    func heldCount(_ queue: String) async throws(DownloadError) -> Int {
        let held = try await fetchCount(
            "SELECT count(*) AS n FROM download WHERE queue = ? AND owner = ?", [queue.databaseValue, member.id.databaseValue])
        return held
    }

    private func fetchCount(_ sql: String, _ values: [DatabaseValue]) async throws(DownloadError) -> Int {
        do { return try await fetch(sql, values) { Int($0["n"] as Int64) }.first ?? 0 } catch {
            throw .io("cannot read the download records in \(location): \(reason(error))")
        }
    }

    func offer(_ ids: [DownloadID]) async throws(DownloadError) {
        let logger = logger
        let member = member
        let values = ids.map(\.storedValue)
        do {
            _ = try await transaction(rows: ids.count) { connection in
                try await connection.query(
                    "UPDATE download SET owner = '' WHERE id = ANY(\(values)) AND owner = \(member.id)", logger: logger)
            }
        } catch {
            throw .io("cannot offer downloads to the fleet in \(location): \(reason(error)); \(advice(error))")
        }
    }

    func claim(_ queue: String, limit: Int) async throws(DownloadError) -> [DownloadRow] {
        let logger = logger
        let member = member
        let queued = DownloadStatus.queued.storedValue
        do {
            return try await transaction(rows: limit) { connection in
                let claimed = try await connection.query(
                    """
                    UPDATE download SET owner = \(member.id) WHERE id IN (
                        SELECT id FROM download WHERE queue = \(queue) AND owner = '' AND status = \(queued)
                        ORDER BY priority DESC, position LIMIT \(limit) FOR UPDATE SKIP LOCKED
                    ) RETURNING *
                    """, logger: logger)
                var rows: [DownloadRow] = []
                for try await row in claimed { rows.append(try DownloadRow(row: try Self.row(row))) }
                return rows
            }
        } catch {
            throw .io("cannot claim downloads of the fleet in \(location): \(reason(error)); \(advice(error))")
        }
    }

    /// Extends the lease of every queue in `held`, in the transaction under way; throws
    /// ``QueueTaken`` when this store is no longer a member of one. A lease that ran out is not
    /// renewed, taken over or not yet: once out of it, a member is gone (``look(_:for:on:logger:)``).
    static func renew(
        _ held: Set<String>, of member: FleetMember, lease: Int, on connection: PostgresConnection, logger: Logger
    ) async throws {
        var renewed = Set<String>()
        let rows = try await connection.query(
            """
            UPDATE fleetMember SET leaseUntil = extract(epoch from clock_timestamp()) + \(lease)
            WHERE member = \(member.id) AND leaseUntil >= extract(epoch from clock_timestamp()) RETURNING queue
            """, logger: logger)
        for try await queue in rows.decode(String.self) { renewed.insert(queue) }
        if let lost = held.subtracting(renewed).sorted().first {
            throw QueueTaken(
                message:
                    "another haul daemon took over this one's downloads of the queue \(lost) while this one did not renew its lease (it was paused, or cut off from the database, for over \(lease) s)"
            )
        }
    }

    func close() async throws {
        await leave(because: "this daemon left the queue (it stopped)")
        await writer.close()
        await reader.close()
    }

    /// The writer failed for good: renewing the lease would only keep this store's downloads
    /// from a daemon that could run them.
    func failed() async {
        await leave(because: Self.wroteNothingAfterAFailure)
    }

    /// Why nothing is written once a write failed for good: the rows go to another member.
    static let wroteNothingAfterAFailure = "an earlier write failed, and nothing is written after one"

    /// Stops renewing and ends this store's lease at once, so that another member (or the next
    /// daemon to join) takes its downloads over now rather than when the lease would have run out.
    private func leave(because why: String) async {
        let (held, renewal) = queues.withLock { queues in
            defer {
                // Nothing is written after leaving: the rows are another member's from now on.
                if !queues.held.isEmpty { queues.lost = queues.lost ?? why }
                queues.held = []
                queues.renewal = nil
            }
            return (queues.held, queues.renewal)
        }
        renewal?.cancel()
        await renewal?.value
        guard !held.isEmpty else { return }
        let logger = logger
        let member = member
        // In a task of its own: a shutdown cancels the one closing the store, and the lease
        // must still be given back.
        let writer = writer
        let window = window
        let giving = Task {
            try await writer.use(within: window) { connection in
                try await connection.query("UPDATE fleetMember SET leaseUntil = 0 WHERE member = \(member.id)", logger: logger)
            }
        }
        do { _ = try await giving.value } catch {
            // Nothing is lost: the lease runs out by itself, and another member takes over then.
            logger.error(
                "cannot leave the queue \(held.sorted().joined(separator: ", ")) of \(location): \(reason(error)); another daemon takes its downloads over in \(Int(lease.components.seconds)) s"
            )
        }
    }

    // MARK: Errors

    func reason(_ error: any Error) -> String {
        if let error = error as? QueueTaken { return error.message }
        if let error = error as? StoreTimeout { return "the server did not answer for \(error.seconds) s" }
        if error is StoreClosed { return "the store is closed" }
        if let error = error as? DownloadError { return error.message }
        if let error = error as? PostgresDecodingError { return "a value of column \(error.columnName) does not read" }
        guard let error = error as? PSQLError else { return "\(error)" }
        if error.serverInfo?[.sqlState] == "55P03" {
            return
                "the queue's rows are locked by a transaction that has not ended (a daemon cut off in the middle of a write); the server ends it within \(Int(window.components.seconds)) s"
        }
        if let message = error.serverInfo?[.message] { return message }
        switch error.code {
        case .connectionError:
            let underlying = error.underlying.map { "\($0)" } ?? "no answer"
            if underlying.contains("refused") { return "the connection was refused" }
            if underlying.lowercased().contains("timeout") || underlying.contains("timed out") { return "connecting timed out" }
            if underlying.contains("handshake") || underlying.contains("SSL") || underlying.contains("certificate") {
                return "the TLS handshake failed (\(underlying)); see sslmode in --store"
            }
            return "cannot connect (\(underlying))"
        case .serverClosedConnection, .uncleanShutdown: return "the server closed the connection"
        case .clientClosedConnection, .poolClosed: return "the connection was closed"
        case .sslUnsupported: return "the server does not offer TLS, which sslmode asks for"
        case .authMechanismRequiresPassword: return "the server asks for a password; put it in the URL or in $PGPASSWORD"
        default: return "\(error.code)"
        }
    }

    func advice(_ error: any Error) -> String {
        if let error = error as? QueueTaken, error.message != Self.wroteNothingAfterAFailure { return "restart this daemon to join the queue again" }
        if (error as? PSQLError)?.serverInfo?[.sqlState] == "55P03" { return "try again then" }
        if let code = (error as? PSQLError)?.serverInfo?[.sqlState] {
            // Classes 28 (authorization) and 3D (no such database): the URL's part to fix.
            if code.hasPrefix("28") { return "check the user and password of --store" }
            if code.hasPrefix("3D") { return "create the database (createdb), or name another in --store" }
            if code == "53100" { return "free some space on the database server" }
        }
        return "check that the PostgreSQL server of --store is running and reachable"
    }

    // MARK: Retrying

    /// Runs `body` on a connection of `slot`, again while the server cannot be reached, for
    /// three times the connect timeout (``window``). Each attempt, from when it has the slot,
    /// may take the window plus 10 ms a row for a long transaction; one that gets no answer at
    /// all (a server gone silent) then ends, its connection closed.
    private func retrying<T: Sendable>(
        on slot: PostgreSQLConnectionSlot, rows: Int, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        let limit = window + .milliseconds(10) * rows
        let deadline = ContinuousClock.now + window
        var wait: Duration = .milliseconds(50)
        while true {
            do {
                try await migrateOnce()
                return try await slot.use(within: limit, body)
            } catch  where Self.isTransient(error) && .now + wait < deadline {
                logger.debug("the store \(location) did not answer (\(reason(error))); asking again in \(wait)")
                try await Task.sleep(for: wait)
                wait = min(wait * 2, .seconds(1))
            }
        }
    }

    /// How long the store waits for a server that does not answer: three times the connect timeout.
    var window: Duration { server.connectTimeout * 3 }

    /// Whether `error` says the server could not be reached or did not answer, rather than that it
    /// refused a statement.
    static func isTransient(_ error: any Error) -> Bool {
        if error is StoreTimeout { return true }
        guard let error = error as? PSQLError else { return false }
        if let state = error.serverInfo?[.sqlState] {
            // The server shut down or is starting (57P01-03); the connection failed (08000, 08001,
            // 08003, 08004, 08006). Not 08P01, a protocol violation: it would fail again.
            return ["57P01", "57P02", "57P03", "08000", "08001", "08003", "08004", "08006"].contains(state)
        }
        return [.connectionError, .serverClosedConnection, .uncleanShutdown, .clientClosedConnection].contains(error.code)
    }

    // MARK: Values

    /// `sql` with its `?` placeholders numbered, as PostgreSQL wants them (the store's
    /// statements hold no `?` of their own).
    private func numbering(_ sql: String) -> String {
        if let known = numbered.withLock({ $0[sql] }) { return known }
        var result = ""
        result.reserveCapacity(sql.utf8.count + 16)
        var count = 0
        for character in sql {
            if character == "?" {
                count += 1
                result += "$\(count)"
            } else {
                result.append(character)
            }
        }
        numbered.withLock { numbered in
            if numbered.count >= 256 { numbered.removeAll() }
            numbered[sql] = result
        }
        return result
    }

    static func bindings(_ values: [DatabaseValue]) throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: values.count)
        for value in values {
            switch value.storage {
            case .null: bindings.appendNull()
            case .int64(let number): bindings.append(number)
            case .double(let number): bindings.append(number)
            case .string(let text): bindings.append(text)
            case .blob(let data): bindings.append(ByteBuffer(bytes: data))
            }
        }
        return bindings
    }

    /// A PostgreSQL row as GRDB's: integers, floats, text and bytes, by column name.
    static func row(_ row: PostgresRow) throws -> Row {
        var columns: [String: (any DatabaseValueConvertible)?] = [:]
        for cell in row {
            guard cell.bytes != nil else {
                columns[cell.columnName] = DatabaseValue.null
                continue
            }
            switch cell.dataType {
            case .int2, .int4, .int8: columns[cell.columnName] = try cell.decode(Int64.self)
            case .float4, .float8: columns[cell.columnName] = try cell.decode(Double.self)
            case .bool: columns[cell.columnName] = try cell.decode(Bool.self)
            case .bytea: columns[cell.columnName] = Data(try cell.decode(ByteBuffer.self).readableBytesView)
            default: columns[cell.columnName] = try cell.decode(String.self)
            }
        }
        return Row(columns)
    }
}

/// A store as a member of a queue's fleet: a random id, and the machine and pid it runs in, so that a
/// daemon of the same machine (the same boot and pid namespace) can tell that its predecessor is gone.
struct FleetMember: Sendable {
    var id: String
    /// The machine's name, for messages.
    var host: String
    /// Where `pid` means something: this boot of the kernel and its pid namespace (containers
    /// on one machine share its name, not their pids).
    var machine: String
    var pid: Int64

    static func make() -> FleetMember {
        FleetMember(id: UUID().uuidString, host: machineName, machine: machineIdentity, pid: Int64(getpid()))
    }

    /// `BOOT-ID pid:[INODE]`: the kernel's boot id and this process's pid namespace.
    static let machineIdentity: String = {
        let namespace = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/pid")) ?? "pid:[?]"
        return (BootID.current ?? machineName) + " " + namespace
    }()

    /// gethostname(2): the kernel's name for this machine, without a DNS lookup.
    static var machineName: String {
        var name = [CChar](repeating: 0, count: 256)
        guard gethostname(&name, name.count - 1) == 0 else { return "unknown" }
        return String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// This store's downloads were taken over by another member of the queue.
struct QueueTaken: Error {
    var message: String
}

/// No answer from the server within the store's window.
struct StoreTimeout: Error {
    var seconds: Int
}

/// The store was closed.
struct StoreClosed: Error {}
