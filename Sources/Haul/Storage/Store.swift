import Foundation
import GRDB

/// The SQLite store (WAL mode) shared by every Haul process that uses the same state folder.
///
/// Each write is one transaction; several processes may use it at once.
final class Store: Sendable {
    private let pool: DatabasePool
    let path: String

    /// Opens (creating if needed) `state.sqlite` in `directory`.
    init(directory: String) throws(DownloadError) {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw DownloadError.io("cannot create state folder \(directory): \((error as NSError).localizedDescription)")
        }
        path = (directory as NSString).appendingPathComponent("state.sqlite")
        var configuration = Configuration()
        // Another `haul` may be checkpointing at the same moment; wait rather than fail.
        configuration.busyMode = .timeout(10)
        configuration.label = "haul.store"
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
            try Self.migrator.migrate(pool)
        } catch {
            throw DownloadError.io("cannot open the store \(path): \(error)")
        }
    }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "download") { t in
                t.primaryKey("id", .text)
                t.column("destination", .text).notNull().unique()
                t.column("url", .text).notNull()
                t.column("totalLength", .integer)
                t.column("etag", .text)
                t.column("lastModified", .text)
                t.column("acceptsRanges", .boolean).notNull().defaults(to: false)
                t.column("ranges", .text).notNull().defaults(to: "")
                t.column("status", .text).notNull()
                t.column("lastError", .text)
                t.column("checksum", .text)
                t.column("createdAt", .datetime).notNull()
                t.column("updatedAt", .datetime).notNull()
            }
        }
        // Additive: a store from before the manager keeps its downloads.
        migrator.registerMigration("v2") { db in
            try db.create(table: "job") { t in
                t.primaryKey("id", .text)
                t.column("queue", .text).notNull()
                t.column("url", .text).notNull()
                t.column("destinationKind", .text).notNull()
                t.column("destinationPath", .text).notNull()
                t.column("resolvedPath", .text)
                t.column("options", .text).notNull()
                t.column("priority", .integer).notNull().defaults(to: 0)
                t.column("position", .integer).notNull()
                t.column("dependencies", .text).notNull().defaults(to: "")
                t.column("status", .text).notNull()
                t.column("resultBytes", .integer)
                t.column("errorKind", .text)
                t.column("lastError", .text)
                t.column("createdAt", .datetime).notNull()
                t.column("updatedAt", .datetime).notNull()
            }
            try db.create(index: "job_destination", on: "job", columns: ["queue", "destinationPath"])
        }
        return migrator
    }

    func record(destination: String) async throws -> DownloadRecord? {
        try await pool.read { db in
            try DownloadRecord.filter(Column("destination") == destination).fetchOne(db)
        }
    }

    /// Inserts or replaces the row, stamping `updatedAt`.
    func save(_ record: DownloadRecord) async throws {
        var stamped = record
        stamped.updatedAt = Date()
        let row = stamped
        try await pool.write { db in try row.save(db) }
    }

    /// Records durable progress. Called only after the bytes were flushed.
    func checkpoint(id: String, ranges: ByteRanges) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "UPDATE download SET ranges = ?, updatedAt = ? WHERE id = ?",
                arguments: [ranges, Date(), id])
        }
    }

    func delete(id: String) async throws {
        _ = try await pool.write { db in try DownloadRecord.deleteOne(db, key: id) }
    }

    func delete(destination: String) async throws {
        _ = try await pool.write { db in
            try DownloadRecord.filter(Column("destination") == destination).deleteAll(db)
        }
    }

    // MARK: Jobs (the manager's queue)
    //
    // These block the calling thread for one short transaction: the manager's state
    // changes must reach the store in the order they happen.

    func jobs(queue: String) throws -> [JobRecord] {
        try pool.read { db in try JobRecord.filter(Column("queue") == queue).order(Column("position")).fetchAll(db) }
    }

    /// The jobs of `queue` for `path` that are either for `url` or for that exact file: the
    /// ones adding `url` there could be the same as, or collide with. (Not every download into
    /// the same folder: decoding those made each add slower the longer the queue.)
    func jobs(queue: String, destinationPath path: String, url: String) throws -> [JobRecord] {
        try pool.read { db in
            try JobRecord.filter(Column("queue") == queue && Column("destinationPath") == path
                                 && (Column("url") == url || Column("destinationKind") == "file")).fetchAll(db)
        }
    }

    func maxJobPosition() throws -> Int? {
        try pool.read { db in try Int.fetchOne(db, sql: "SELECT MAX(position) FROM job") }
    }

    /// Saves the jobs (inserting or replacing), stamping `updatedAt`, in one transaction.
    func save(jobs: [JobRecord]) throws {
        let now = Date()
        try pool.write { db in
            for var job in jobs {
                job.updatedAt = now
                try job.save(db)
            }
        }
    }

    func deleteJob(id: String) throws {
        _ = try pool.write { db in try JobRecord.deleteOne(db, key: id) }
    }
}
