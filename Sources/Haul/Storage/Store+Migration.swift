import Foundation
import GRDB

extension Store {
    /// The schema's history. v1 and v2 are how earlier versions left a state folder; v3 folds
    /// their two rows per download into one, so a folder written by any of them continues.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        // v1: the engine's record of each file, keyed by its path.
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
        // v2: the manager's queue beside it, the request mirrored field by field.
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
        migrator.registerMigration("v3") { db in
            try db.rename(table: "download", to: "download_v2")
            try db.create(table: "download") { t in
                t.primaryKey("id", .integer)
                t.column("queue", .text)
                t.column("url", .text).notNull()
                t.column("destinationKind", .integer).notNull()
                t.column("destination", .text).notNull()
                t.column("request", .text).notNull()
                t.column("priority", .integer).notNull().defaults(to: 0)
                t.column("position", .integer).notNull().defaults(to: 0)
                t.column("dependencies", .text).notNull().defaults(to: "")
                t.column("status", .integer).notNull()
                t.column("finishOrder", .integer)
                t.column("path", .text)
                t.column("totalLength", .integer)
                t.column("etag", .text)
                t.column("lastModified", .text)
                t.column("acceptsRanges", .boolean).notNull().defaults(to: false)
                t.column("ranges", .text).notNull().defaults(to: "")
                t.column("resultBytes", .integer)
                t.column("fileModified", .double)
                t.column("errorKind", .integer)
                t.column("lastError", .text)
                t.column("createdAt", .double).notNull()
                t.column("updatedAt", .double).notNull()
                // Since v4, v6, v7 and v9; here too because the rows below are written with every column.
                t.column("errorReason", .text)
                t.column("sources", .text).notNull().defaults(to: "")
                t.column("unsynced", .text)
                t.column("sourceValidators", .text).notNull().defaults(to: "")
            }
            try migrateToOneRow(db)
            try db.drop(table: "job")
            try db.drop(table: "download_v2")
            // What is looked up in the store: a queue's rows (restore), a batch's destinations
            // (dedupe against an earlier process), a file's progress (the engine). The order of
            // the queue and of the finished downloads lives in memory (DownloadQueue); an index
            // on the status would be rewritten by every change for nothing.
            try db.create(index: "download_queue_destination", on: "download", columns: ["queue", "destination"])
            try createPathIndex(db)
        }
        migrator.registerMigration("v4") { db in
            // The reason of an error (stalled, disk full, …), which daemons map to aria2's codes.
            // A store migrated from v2 just now has the column already.
            if try !db.columns(in: "download").contains(where: { $0.name == "errorReason" }) {
                try db.alter(table: "download") { t in t.add(column: "errorReason", .text) }
            }
        }
        migrator.registerMigration("v5") { db in
            // Daemon-wide options changed over RPC (changeGlobalOption), per queue, kept so a
            // restart does not lose them: aria2 users expect what --save-session keeps.
            try db.create(table: "setting") { t in
                t.column("queue", .text).notNull()
                t.column("name", .text).notNull()
                t.column("value", .text).notNull()
                t.primaryKey(["queue", "name"])
            }
        }
        migrator.registerMigration("v6") { db in
            // A download's sources besides its URL (mirrors): empty for a download from one URL,
            // which every row written before is. A store migrated from v2 just now has it already.
            if try !db.columns(in: "download").contains(where: { $0.name == "sources" }) {
                try db.alter(table: "download") { t in t.add(column: "sources", .text).notNull().defaults(to: "") }
            }
        }
        migrator.registerMigration("v7") { db in
            // Bytes written but not yet flushed, with the boot that wrote them: after a killed
            // process (not a system crash) they are still in the file (DownloadRow.unsynced).
            // A store migrated from v2 just now has it already.
            if try !db.columns(in: "download").contains(where: { $0.name == "unsynced" }) {
                try db.alter(table: "download") { t in t.add(column: "unsynced", .text) }
            }
        }
        migrator.registerMigration("v8") { db in
            // Uploads: one row for each file and target URL, so that a rerun finds the tus
            // upload it began and the file it began with (UploadRow). No offset: the server's is
            // the one that counts, and a rerun asks for it.
            try db.create(table: "upload") { t in
                t.column("file", .text).notNull()
                t.column("url", .text).notNull()
                t.column("protocol", .text).notNull()
                t.column("location", .text)
                t.column("length", .integer).notNull()
                t.column("modified", .double).notNull()
                t.column("sample", .text).notNull()
                t.column("createdAt", .double).notNull()
                t.column("updatedAt", .double).notNull()
                t.primaryKey(["file", "url"])
            }
        }
        migrator.registerMigration("v9") { db in
            // Each mirror's validators (DownloadRow.sourceValidators): empty for every row written
            // before. A store migrated from v2 just now has the column already.
            if try !db.columns(in: "download").contains(where: { $0.name == "sourceValidators" }) {
                try db.alter(table: "download") { t in t.add(column: "sourceValidators", .text).notNull().defaults(to: "") }
            }
        }
        migrator.registerMigration("v10") { db in
            // The interop version of the IETF draft an upload began with (UploadRow): NULL for
            // every row written before, which spoke 6.
            if try !db.columns(in: "upload").contains(where: { $0.name == "ietfInteropVersion" }) {
                try db.alter(table: "upload") { t in t.add(column: "ietfInteropVersion", .integer) }
            }
        }
        migrator.registerMigration("v11") { db in
            // A manager's queued uploads (UploadJobRow): the request, its place in the queue and
            // how it ended. What the server holds stays the `upload` table's.
            try db.create(table: "uploadJob") { t in
                t.column("id", .integer).primaryKey()
                t.column("queue", .text).notNull()
                t.column("file", .text).notNull()
                t.column("url", .text).notNull()
                t.column("request", .text).notNull()
                t.column("status", .integer).notNull()
                t.column("priority", .integer).notNull()
                t.column("position", .integer).notNull()
                t.column("finishOrder", .integer)
                t.column("result", .text)
                t.column("errorKind", .integer)
                t.column("errorReason", .text)
                t.column("lastError", .text)
                t.column("updatedAt", .double).notNull()
            }
            try db.create(index: "uploadJob_queue", on: "uploadJob", columns: ["queue", "file", "url"])
        }
        migrator.registerMigration("v12") { db in
            // The path index holds the rows that have a path: a row is inserted without one (its
            // file is named once the server answered), so each insert wrote an entry for no path
            // and the engine's first record moved it. Looked up by `path = ?` only. A store made
            // since has it so from v3.
            let made = try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE name = 'download_path'")
            guard made?.contains("WHERE") != true else { return }
            try db.execute(sql: "DROP INDEX IF EXISTS download_path")
            try createPathIndex(db)
        }
        return migrator
    }

    /// The engine's index of the rows by path: of the rows that have one only (v3 on a store
    /// made since v12; v12 made an earlier store's so).
    private static func createPathIndex(_ db: Database) throws {
        try db.create(index: "download_path", on: "download", columns: ["path"], condition: Column("path") != nil)
    }

    /// v2 → v3: each job with the engine record of its file becomes one row; an engine record
    /// no job refers to (a library download) becomes a row of no queue.
    private static func migrateToOneRow(_ db: Database) throws {
        var engine: [String: Row] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT * FROM download_v2") {
            engine[row["destination"]] = row
        }
        var claimed = Set<String>()
        var finishOrder: Int64 = 0
        let jobs = try Row.fetchAll(db, sql: "SELECT * FROM job ORDER BY updatedAt")
        for job in jobs {
            guard let id = DownloadID(job["id"] as String) else { continue }
            let kind: String = job["destinationKind"]
            let destination: String = job["destinationPath"]
            var request =
                kind == "file"
                ? DownloadRequest(url: job["url"], file: destination) : DownloadRequest(url: job["url"], directory: destination)
            // Options that do not read (a checksum among them) are not dropped: the download
            // would go on without them, and could finish unverified.
            var unreadable: String?
            do {
                try JSONDecoder().decode(LegacyOptions.self, from: Data((job["options"] as String? ?? "").utf8)).apply(to: &request)
            } catch {
                unreadable = "options"
            }
            var row = DownloadRow(id: id, queue: job["queue"], request: request)
            row.priority = job["priority"]
            row.position = job["position"]
            row.dependencies = (job["dependencies"] as String).split(separator: ",").compactMap { DownloadID(String($0)) }
            row.status = DownloadStatus(rawValue: job["status"]) ?? .queued
            row.path = job["resolvedPath"]
            row.resultBytes = job["resultBytes"]
            row.errorKind = (job["errorKind"] as String?).map { name in
                DownloadError.Kind.all.first { $0.description == name } ?? .io
            }
            row.lastError = job["lastError"]
            row.createdAt = job["createdAt"]
            if let unreadable, row.status != .completed { unusable(&row, unreadable) }
            if row.status == .completed || row.status == .failed {
                finishOrder += 1
                row.finishOrder = finishOrder
            }
            if let file = row.path ?? (kind == "file" ? destination : nil), let record = engine[file] {
                claimed.insert(file)
                row.path = file
                copyEngine(record, into: &row)
            }
            try row.insert(db)
        }
        for (file, record) in engine where !claimed.contains(file) {
            var row = DownloadRow(id: .next(), queue: nil, request: DownloadRequest(url: record["url"], file: file))
            row.path = file
            row.status = DownloadStatus(rawValue: record["status"]) ?? .paused
            row.lastError = record["lastError"]
            row.createdAt = record["createdAt"]
            if let checksum = record["checksum"] as String? {
                if let parsed = try? Checksum(parsing: checksum) {
                    row.request.checksum = parsed
                } else if row.status != .completed {
                    unusable(&row, "checksum")
                }
            }
            copyEngine(record, into: &row)
            try row.insert(db)
        }
    }

    /// An unfinished download whose `what` the upgrade cannot read fails, saying so, instead of
    /// going on without it; its part file stays, for the same download added again.
    private static func unusable(_ row: inout DownloadRow, _ what: String) {
        row.status = .failed
        row.errorKind = .invalidRequest
        row.lastError = "its \(what) could not be read when the state folder was upgraded; add the download again with them"
    }

    private static func copyEngine(_ record: Row, into row: inout DownloadRow) {
        row.totalLength = record["totalLength"]
        row.validators = Validators(etag: record["etag"], lastModified: record["lastModified"])
        row.acceptsRanges = record["acceptsRanges"]
        row.ranges = ByteRanges(parsing: record["ranges"] as String? ?? "") ?? ByteRanges()
    }

    /// The request options as v2 kept them in one JSON column.
    private struct LegacyOptions: Decodable {
        struct Header: Decodable {
            var name: String
            var value: String
        }

        var headers: [Header]
        var checksum: Checksum?
        var maxTries: Int
        var retryWaitMilliseconds: Int64
        var overwrite: Bool
        var connections: Int
        var minimumSplitSize: Int64
        var rateLimit: Int64?

        func apply(to request: inout DownloadRequest) {
            request.headers = headers.map { DownloadRequest.Header(name: $0.name, value: $0.value) }
            request.checksum = checksum
            request.maxTries = maxTries
            request.retryWait = .milliseconds(retryWaitMilliseconds)
            request.overwrite = overwrite
            request.connections = connections
            request.minimumSplitSize = minimumSplitSize
            request.rateLimit = rateLimit
        }
    }
}
