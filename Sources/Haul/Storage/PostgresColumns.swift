import GRDB
import PostgresNIO

/// A PostgreSQL row as ``DownloadRow`` reads it, integers and floats as either: what GRDB's
/// `Row` would give for the same values.
struct PostgresColumns: StoredColumns {
    let row: PostgresRandomAccessRow

    init(_ row: PostgresRow) { self.row = row.makeRandomAccess() }

    /// The columns' names, in order.
    var names: [String] { row.map(\.columnName) }

    func int64(at index: Int) throws -> Int64? {
        let cell = row[index]
        guard cell.bytes != nil else { return nil }
        switch cell.dataType {
        case .float4, .float8:
            let number = try cell.decode(Double.self)
            guard let exact = Int64(exactly: number) else { throw DatabaseError(message: "\(cell.columnName) holds \(number), not an integer") }
            return exact
        default: return try cell.decode(Int64.self)
        }
    }

    func double(at index: Int) throws -> Double? {
        let cell = row[index]
        guard cell.bytes != nil else { return nil }
        switch cell.dataType {
        case .int2, .int4, .int8: return Double(try cell.decode(Int64.self))
        default: return try cell.decode(Double.self)
        }
    }

    func text(at index: Int) throws -> String? {
        let cell = row[index]
        guard cell.bytes != nil else { return nil }
        return try cell.decode(String.self)
    }

    /// The download rows of one result (every column of `download`), their columns found once.
    static func downloads<Rows: AsyncSequence>(_ rows: Rows) async throws -> [DownloadRow] where Rows.Element == PostgresRow {
        var decoded: [DownloadRow] = []
        var indexes: DownloadRow.ColumnIndexes?
        for try await row in rows {
            let columns = PostgresColumns(row)
            let found = try indexes ?? DownloadRow.ColumnIndexes(names: columns.names)
            indexes = found
            decoded.append(try DownloadRow(columns, at: found))
        }
        return decoded
    }
}
