import Logging
import PostgresNIO
import Synchronization

/// A statement the store runs over and over (the writer's batches, claims, the lease's renewal), run
/// prepared: the server parses and plans it once on each connection, not at every run. A fleet's
/// PostgreSQL spent about a quarter of its CPU parsing and planning the same few texts again.
///
/// PostgresNIO names and prepares a statement by its type's static `name` and `sql`, read as the
/// statement is sent, in the sending task (``PostgresConnection/execute(_:logger:file:line:)``);
/// the store's texts are made at run time (a batch's set of updated columns), so this type reads
/// them from the task (``PostgresConnection/prepared(_:logger:)`` sets them).
struct PreparedSQL: PostgresPreparedStatement {
    typealias Row = PostgresRow

    @TaskLocal static var current = (name: "", sql: "")
    static var name: String { current.name }
    static var sql: String { current.sql }

    let binds: PostgresBindings

    func makeBindings() -> PostgresBindings { binds }
    func decodeRow(_ row: PostgresRow) -> PostgresRow { row }

    /// Each text's name, the same on every connection (`haul_` and the order in which this
    /// process first ran it); nil once ``limit`` texts are named (a text that varies would
    /// otherwise keep one more statement on the server at every run).
    static func name(of sql: String) -> String? {
        names.withLock { names in
            if let name = names[sql] { return name }
            guard names.count < limit else { return nil }
            let name = "haul_\(names.count + 1)"
            names[sql] = name
            return name
        }
    }

    /// How many texts are run prepared at most.
    static let limit = 256
    private static let names = Mutex<[String: String]>([:])
}

extension PostgresConnection {
    /// Runs `query` as a statement prepared on this connection the first time it runs there
    /// (``PreparedSQL``). The server takes each placeholder's type from the first run's values
    /// and keeps it: a placeholder that may be NULL needs a cast in the text (`$1::text`), or a
    /// NULL first would leave its type to the server's guess. The shape of its result is kept too:
    /// a result of every column of a table (`RETURNING *`) would fail once a column is added to
    /// the table, so such a statement names its columns.
    func prepared(_ query: PostgresQuery, logger: Logger) async throws -> AsyncThrowingMapSequence<PostgresRowSequence, PostgresRow> {
        guard let name = PreparedSQL.name(of: query.sql) else {
            return try await self.query(query, logger: logger).map { (row: PostgresRow) throws -> PostgresRow in row }
        }
        return try await PreparedSQL.$current.withValue((name, query.sql)) {
            try await execute(PreparedSQL(binds: query.binds), logger: logger)
        }
    }
}
