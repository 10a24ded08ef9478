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
    let server: StoreLocation.PostgreSQL
    let writer: PostgreSQLConnectionSlot
    let reader: PostgreSQLConnectionSlot
    /// Whether the schema is up to date (``migrateOnce()``).
    private let migrated = Mutex(false)
    let logger: Logger
    /// This store, as `fleetMember` and the rows' `owner` name it.
    let member: FleetMember
    /// The queues this store is a member of, and why it lost them once it has.
    let queues = Mutex<(held: Set<String>, lost: String?, renewal: Task<Void, Never>?)>(([], nil, nil))
    /// The tasks listening for the fleet's messages (``listen(_:)``), cancelled at ``close()``.
    let listeners = Mutex<[Task<Void, Never>]>([])
    /// Renewals of this store's lease so far (``leaseRenewals``).
    let renewals = Atomic<Int>(0)
    /// What this member publishes of each queue with its lease (``publish(_:of:)``).
    let published = Mutex<[String: MemberCounts]>([:])
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
        try await read(sql, values) { result in
            var rows: [T] = []
            for try await row in result { rows.append(try decode(try Self.row(row))) }
            return rows
        }
    }

    func fetchDownloads(_ sql: String, _ values: [DatabaseValue]) async throws -> [DownloadRow] {
        try await read(sql, values) { try await PostgresColumns.downloads($0) }
    }

    /// Runs the query `sql` on the reading connection and makes `T` of its rows.
    private func read<T: Sendable>(
        _ sql: String, _ values: [DatabaseValue], _ rows: @escaping @Sendable (PostgresRowSequence) async throws -> T
    ) async throws -> T {
        let query = PostgresQuery(unsafeSQL: numbering(sql), binds: try Self.bindings(values))
        let logger = logger
        // A read of a whole queue (a restore) may take a while: as long as 3000 rows written.
        return try await retrying(on: reader, rows: 3000) { connection in try await rows(try await connection.query(query, logger: logger)) }
    }

    func write(_ statements: [StoreStatement]) async throws {
        try await transaction(try queries(statements), rows: statements.count)
    }

    /// The queries that run `statements`. The writer's (a batch of downloads' rows) are merged,
    /// since each statement costs a round trip: the deletes into one, the inserts into one, the
    /// updates of each set of columns into one, each column of the batch sent as one array that
    /// `unnest` makes rows of again. The text of each is the same whatever the batch's size, so
    /// the server parses and plans each of a few short statements once on each connection (they
    /// run prepared), not one of thousands of parameters each time. Deletes first, then inserts,
    /// then updates: a batch changes each row once (a delete, or an insert and an update), so the
    /// order between rows does not matter.
    func queries(_ statements: [StoreStatement]) throws -> [WriterQuery] {
        guard statements.count > 1, statements.allSatisfy({ $0.batching != nil }) else {
            return try statements.map { statement in
                // A pooled insert counts itself into the pool's size.
                if case .pooledInsert? = statement.batching { return try Self.pooledInsert([statement.values]) }
                // Its values' types may differ from one run to the next (a NULL, an integral
                // number for a `double precision` column): not prepared.
                return WriterQuery(PostgresQuery(unsafeSQL: numbering(statement.sql), binds: try Self.bindings(statement.values)), prepared: false)
            }
        }
        var deletes: [[DatabaseValue]] = []
        var inserts: [[DatabaseValue]] = []
        var pooledInserts: [[DatabaseValue]] = []
        var updates: [UInt32: [[DatabaseValue]]] = [:]
        var masks: [UInt32] = []
        for statement in statements {
            switch statement.batching {
            case .delete?: deletes.append(statement.values)
            case .insert?: inserts.append(statement.values)
            case .pooledInsert?: pooledInserts.append(statement.values)
            case .update(let mask)?:
                if updates[mask] == nil { masks.append(mask) }
                updates[mask, default: []].append(statement.values)
            case nil: break
            }
        }
        var queries: [WriterQuery] = []
        if !deletes.isEmpty {
            let binds = try Self.arrays(of: deletes, ["id"])
            queries.append(WriterQuery(PostgresQuery(unsafeSQL: "DELETE FROM download WHERE id = ANY($1::bigint[])", binds: binds)))
        }
        if !inserts.isEmpty {
            queries.append(WriterQuery(PostgresQuery(unsafeSQL: Self.insertSQL, binds: try Self.arrays(of: inserts, DownloadRow.storedColumns))))
        }
        if !pooledInserts.isEmpty { queries.append(try Self.pooledInsert(pooledInserts)) }
        for mask in masks {
            let names = RowPatch.columnNames(mask) + ["updatedAt", "id"]
            let set = names.dropLast().map { "\($0) = v.\($0)" }.joined(separator: ", ")
            let sql = "UPDATE download AS d SET \(set) FROM " + Self.unnest(names) + " WHERE d.id = v.id"
            queries.append(WriterQuery(PostgresQuery(unsafeSQL: sql, binds: try Self.arrays(of: updates[mask] ?? [], names))))
        }
        return queries
    }

    /// The writer's insert of a batch of rows, replacing those of their ids.
    static let insertSQL = insertSQL(DownloadRow.storedColumns)
    /// The same, with an `owner` column last (the pool's, empty), counting the rows it added
    /// (not those it replaced: a transaction tried again after its commit) into the pool's size.
    static let pooledInsertSQL =
        "WITH pooled AS (" + insertSQL(DownloadRow.pooledColumns) + " RETURNING queue, xmax = 0 AS added) "
        + countPool(from: "pooled WHERE added", adding: "count(*)")

    /// The writer's pooled insert of `rows` (each the values of ``DownloadRow/pooledColumns``).
    static func pooledInsert(_ rows: [[DatabaseValue]]) throws -> WriterQuery {
        WriterQuery(PostgresQuery(unsafeSQL: pooledInsertSQL, binds: try arrays(of: rows, DownloadRow.pooledColumns)))
    }

    private static func insertSQL(_ columns: [String]) -> String {
        "INSERT INTO download (" + columns.joined(separator: ", ") + ") SELECT * FROM " + unnest(columns)
            + " ON CONFLICT (id) DO UPDATE SET " + columns.dropFirst().map { "\($0) = EXCLUDED.\($0)" }.joined(separator: ", ")
    }

    /// `unnest($1::type[], …) AS v(column, …)`: rows of `columns`, from an array each.
    static func unnest(_ columns: [String]) -> String {
        let arrays = columns.enumerated().map { "$\($0.offset + 1)::" + (downloadTypes[$0.element] ?? "text") + "[]" }
        return "unnest(" + arrays.joined(separator: ", ") + ") AS v(" + columns.joined(separator: ", ") + ")"
    }

    /// The bindings of `rows` (each the values of `columns`, in order): a ``ColumnArray`` a column.
    static func arrays(of rows: [[DatabaseValue]], _ columns: [String]) throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: columns.count)
        for (index, column) in columns.enumerated() {
            try bindings.append(ColumnArray(type: ColumnArray.Element(sqlType: downloadTypes[column] ?? "text"), values: rows.map { $0[index] }))
        }
        return bindings
    }

    /// Runs `queries` (which write `rows` rows) in one transaction (``transaction(rows:_:)``).
    func transaction(_ queries: [WriterQuery], rows: Int) async throws {
        let logger = logger
        try await transaction(rows: rows) { connection in
            for query in queries {
                if query.prepared {
                    for try await _ in try await connection.prepared(query.query, logger: logger) {}
                } else {
                    try await connection.query(query.query, logger: logger)
                }
            }
        }
    }

    /// Runs `body` between `BEGIN` and `COMMIT`, after renewing the lease of every queue this
    /// store is a member of (which fails the transaction if one was lost: another member took
    /// this one's downloads over); rolled back when `body` fails.
    func transaction<T: Sendable>(rows: Int, _ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        let (held, lost) = queues.withLock { ($0.held, $0.lost) }
        if let lost { throw QueueTaken(message: lost) }
        let logger = logger
        let member = member
        let lease = Int(lease.components.seconds)
        let publishing = held.isEmpty ? nil : publishedJSON()
        do {
            let result = try await retrying(on: writer, rows: rows + 1) { connection in
                try await connection.query("BEGIN", logger: logger)
                do {
                    if !held.isEmpty {
                        try await Self.renew(held, of: member, lease: lease, counts: publishing, on: connection, logger: logger)
                    }
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
    /// three times the connect timeout (``window``; a first failure is always tried again).
    /// Each attempt, from when it has the slot, may take the connect timeout plus 10 ms a row
    /// for a long transaction (the window at most); one that gets no answer at all (a statement
    /// sent as the server went down, a server gone silent) then ends, its connection closed, and
    /// is tried again on a new one while the window lasts.
    func retrying<T: Sendable>(
        on slot: PostgreSQLConnectionSlot, rows: Int, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        // Never more than the window: the lease (twice the window and a renewal) must outlast a
        // daemon cut off in the middle of its longest transaction.
        let limit = min(window, server.connectTimeout + .milliseconds(10) * rows)
        let deadline = ContinuousClock.now + window
        var wait: Duration = .milliseconds(50)
        var first = true
        while true {
            do {
                try await migrateOnce()
                return try await slot.use(within: limit, body)
            } catch  where Self.isTransient(error) && (first || .now + wait < deadline) {
                // The first failure is always tried again: a process paused in the middle of a
                // statement (SIGSTOP, a suspended machine) wakes to find its window spent and
                // perhaps its connection closed, neither of them the server's doing.
                first = false
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

/// A query of the writer's, and whether it runs prepared (``PostgresConnection/prepared(_:logger:)``):
/// a batch's, whose placeholders are arrays of the types their casts name, whatever the values.
struct WriterQuery: Sendable {
    var query: PostgresQuery
    var prepared = true

    init(_ query: PostgresQuery, prepared: Bool = true) {
        self.query = query
        self.prepared = prepared
    }

    var sql: String { query.sql }
    var binds: PostgresBindings { query.binds }
}

/// No answer from the server within the store's window.
struct StoreTimeout: Error {
    var seconds: Int
}

/// The store was closed.
struct StoreClosed: Error {}
