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
/// transaction at a time, and one that reads; and one more for each queue held
/// (``takeQueue(_:)``). The schema is brought up to date before the first statement, so opening
/// never blocks; the first read or write waits for it and says why when it cannot.
///
/// A server that stops answering is asked again, for three times the connect timeout, before a
/// failure is reported: every statement the store writes can be written twice (an insert
/// replaces, an update sets values, a delete deletes), so a transaction whose commit was lost
/// with its connection is simply written again.
final class PostgreSQLStoreDatabase: StoreDatabase {
    let location: String
    private let server: StoreLocation.PostgreSQL
    private let writer: PostgreSQLConnectionSlot
    private let reader: PostgreSQLConnectionSlot
    /// Whether the schema is up to date (``migrateOnce()``).
    private let migrated = Mutex(false)
    private let logger: Logger
    /// The queues this process holds (``takeQueue(_:)``), each by a task keeping a connection.
    private let holders = Mutex<[String: Task<Void, Never>]>([:])
    /// `?` placeholders turned into `$n`, by statement.
    private let numbered = Mutex<[String: String]>([:])

    init(_ server: StoreLocation.PostgreSQL, logger: Logger) {
        self.server = server
        // PostgresNIO logs every failed connection at `info`: the store says it once, in its error.
        var quiet = logger
        if quiet.logLevel > .debug { quiet.logLevel = .error }
        let background = quiet
        self.logger = background
        location = StoreLocation(kind: .postgreSQL(server)).description
        let connect: @Sendable () async throws -> PostgresConnection = { try await Self.connect(server, logger: background) }
        writer = PostgreSQLConnectionSlot(connect: connect, exclusive: true)
        reader = PostgreSQLConnectionSlot(connect: connect, exclusive: false)
    }

    /// Brings the schema up to date once, before the first statement (again after a failure:
    /// a server that was down at first may be up now).
    private func migrateOnce() async throws {
        guard !migrated.withLock({ $0 }) else { return }
        let logger = logger
        try await writer.use { connection in try await Self.migrate(connection, logger: logger) }
        migrated.withLock { $0 = true }
    }

    /// A new connection to `server`.
    static func connect(_ server: StoreLocation.PostgreSQL, logger: Logger) async throws -> PostgresConnection {
        let tls: PostgresConnection.Configuration.TLS =
            switch server.sslMode {
            case "disable": .disable
            case "require": .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
            default: .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
            }
        var configuration =
            if let socket = server.socket {
                PostgresConnection.Configuration(
                    unixSocketPath: (socket as NSString).appendingPathComponent(".s.PGSQL.\(server.port)"), username: server.user,
                    password: server.password, database: server.database)
            } else {
                PostgresConnection.Configuration(
                    host: server.host ?? "localhost", port: server.port, username: server.user, password: server.password,
                    database: server.database, tls: tls)
            }
        configuration.options.connectTimeout = .nanoseconds(Int64(server.connectTimeout.components.seconds) * 1_000_000_000)
        return try await PostgresConnection.connect(configuration: configuration, id: Int.random(in: 0..<Int.max), logger: logger)
    }

    // MARK: Statements

    func fetch<T: Sendable>(_ sql: String, _ values: [DatabaseValue], _ decode: @escaping @Sendable (Row) throws -> T) async throws -> [T] {
        let query = PostgresQuery(unsafeSQL: numbering(sql), binds: try Self.bindings(values))
        let logger = logger
        return try await retrying {
            try await self.reader.use { connection in
                var rows: [T] = []
                for try await row in try await connection.query(query, logger: logger) { rows.append(try decode(try Self.row(row))) }
                return rows
            }
        }
    }

    func write(_ statements: [StoreStatement]) async throws {
        let queries = try statements.map { PostgresQuery(unsafeSQL: numbering($0.sql), binds: try Self.bindings($0.values)) }
        let logger = logger
        try await retrying {
            try await self.writer.use { connection in try await Self.transaction(connection, queries, logger: logger) }
        }
    }

    /// Runs `queries` between `BEGIN` and `COMMIT`, rolled back when one fails.
    static func transaction(_ connection: PostgresConnection, _ queries: [PostgresQuery], logger: Logger) async throws {
        try await connection.query("BEGIN", logger: logger)
        do {
            for query in queries { try await connection.query(query, logger: logger) }
            try await connection.query("COMMIT", logger: logger)
        } catch {
            _ = try? await connection.query("ROLLBACK", logger: logger)
            throw error
        }
    }

    func upsertSQL(table: String, columns: [String], key: [String]) -> String {
        let keys = Set(key)
        return "INSERT INTO \(table) (" + columns.joined(separator: ", ") + ") VALUES (" + columns.map { _ in "?" }.joined(separator: ", ")
            + ") ON CONFLICT (" + key.joined(separator: ", ") + ") DO UPDATE SET "
            + columns.filter { !keys.contains($0) }.map { "\($0) = EXCLUDED.\($0)" }.joined(separator: ", ")
    }

    /// Holds PostgreSQL's advisory lock of `queue` on a connection of its own until ``close()``:
    /// a second daemon on the same queue would run the same downloads.
    func takeQueue(_ queue: String) async throws(DownloadError) {
        do { try await retrying {} } catch {
            throw .io("cannot open the store \(location): \(reason(error)); \(advice(error))")
        }
        if holders.withLock({ $0[queue] != nil }) { return }
        let taken = AsyncStream<Result<Bool, any Error>>.makeStream()
        let server = server
        let logger = logger
        let holder = Task {
            do {
                let connection = try await Self.connect(server, logger: logger)
                let lock: PostgresQuery = "SELECT pg_try_advisory_lock(hashtext('haul.queue'), hashtext(\(queue)))"
                var locked = false
                do {
                    for try await row in try await connection.query(lock, logger: logger) { locked = try row.decode(Bool.self) }
                } catch {
                    try? await connection.close()
                    throw error
                }
                taken.continuation.yield(.success(locked))
                // Held until close() cancels this task; closing the connection gives it back.
                while locked, !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
                try? await connection.close()
            } catch {
                taken.continuation.yield(.failure(error))
            }
            taken.continuation.finish()
        }
        var outcome: Result<Bool, any Error> = .success(false)
        for await first in taken.stream {
            outcome = first
            break
        }
        switch outcome {
        case .success(true):
            holders.withLock { $0[queue] = holder }
        case .success(false):
            throw .io(
                "cannot take the queue \(queue) of \(location): another haul daemon runs it; stop that one, or give this one a database of its own"
            )
        case .failure(let error):
            throw .io("cannot open the store \(location): \(reason(error)); \(advice(error))")
        }
    }

    func close() async throws {
        let held = holders.withLock { holders in
            defer { holders = [:] }
            return Array(holders.values)
        }
        for holder in held {
            holder.cancel()
            await holder.value
        }
        await writer.close()
        await reader.close()
    }

    // MARK: Errors

    func reason(_ error: any Error) -> String {
        guard let error = error as? PSQLError else {
            if let error = error as? DownloadError { return error.message }
            if let error = error as? PostgresDecodingError { return "a value of column \(error.columnName) does not read" }
            return "\(error)"
        }
        if let message = error.serverInfo?[.message] { return message }
        switch error.code {
        case .connectionError:
            let underlying = error.underlying.map { "\($0)" } ?? "no answer"
            if underlying.contains("refused") { return "the connection was refused" }
            if underlying.lowercased().contains("timeout") || underlying.contains("timed out") { return "connecting timed out" }
            return "cannot connect (\(underlying))"
        case .serverClosedConnection, .uncleanShutdown: return "the server closed the connection"
        case .clientClosedConnection, .poolClosed: return "the store is closed"
        case .sslUnsupported: return "the server does not offer TLS, which sslmode=require asks for"
        case .authMechanismRequiresPassword: return "the server asks for a password; put it in the URL or in $PGPASSWORD"
        default: return "\(error.code)"
        }
    }

    func advice(_ error: any Error) -> String {
        if let code = (error as? PSQLError)?.serverInfo?[.sqlState] {
            // Classes 28 (authorization) and 3D (no such database): the URL's part to fix.
            if code.hasPrefix("28") { return "check the user and password of --store" }
            if code.hasPrefix("3D") { return "create the database (createdb), or name another in --store" }
            if code == "53100" { return "free some space on the database server" }
        }
        return "check that the PostgreSQL server of --store is running and reachable"
    }

    // MARK: Retrying

    /// Runs `body`, again while the server cannot be reached, for three times the connect timeout.
    private func retrying<T>(_ body: () async throws -> T) async throws -> T {
        let deadline = ContinuousClock.now + server.connectTimeout * 3
        var wait: Duration = .milliseconds(50)
        while true {
            do {
                try await migrateOnce()
                return try await body()
            } catch let error as PSQLError where Self.isTransient(error) && .now + wait < deadline {
                logger.debug("the store \(location) did not answer (\(reason(error))); asking again in \(wait)")
                try await Task.sleep(for: wait)
                wait = min(wait * 2, .seconds(1))
            }
        }
    }

    /// Whether `error` says the server could not be reached, rather than that it refused a statement.
    static func isTransient(_ error: PSQLError) -> Bool {
        if let state = error.serverInfo?[.sqlState] {
            // 57P01-57P03: the server shut down or is starting; 08: the connection failed.
            return state.hasPrefix("57P") || state.hasPrefix("08")
        }
        return [.connectionError, .serverClosedConnection, .uncleanShutdown].contains(error.code)
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

/// One connection to the server, made on first use and again once it broke. An exclusive slot
/// lends it to one user at a time (a transaction must not interleave with another); a shared
/// one to all at once (PostgreSQL answers their statements in turn).
actor PostgreSQLConnectionSlot {
    private let connect: @Sendable () async throws -> PostgresConnection
    private let exclusive: Bool
    private var connection: PostgresConnection?
    /// A connection being made: everyone who needs one meanwhile waits for it.
    private var connecting: Task<PostgresConnection, any Error>?
    private var busy = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    init(connect: @escaping @Sendable () async throws -> PostgresConnection, exclusive: Bool) {
        self.connect = connect
        self.exclusive = exclusive
    }

    func use<T: Sendable>(_ body: @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        if exclusive {
            while busy { await withCheckedContinuation { waiters.append($0) } }
            busy = true
        }
        defer {
            if exclusive {
                busy = false
                if !waiters.isEmpty { waiters.removeFirst().resume() }
            }
        }
        let connection = try await current()
        do { return try await body(connection) } catch {
            // A connection that broke is let go; the next use makes another.
            if connection.isClosed || (error as? PSQLError).map(PostgreSQLStoreDatabase.isTransient) == true {
                if self.connection === connection { self.connection = nil }
                try? await connection.close()
            }
            throw error
        }
    }

    private func current() async throws -> PostgresConnection {
        if let connection, !connection.isClosed { return connection }
        connection = nil
        if let connecting { return try await connecting.value }
        let task = Task { try await connect() }
        connecting = task
        defer { connecting = nil }
        let made = try await task.value
        connection = made
        return made
    }

    func close() async {
        if let connection { try? await connection.close() }
        connection = nil
    }
}
