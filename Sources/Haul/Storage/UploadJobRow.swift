import Foundation
import GRDB

/// A manager's queued upload (``DownloadManager/addUpload(_:priority:paused:)``) as the store
/// keeps it: the request, its place in the queue, and how it ended.
///
/// What the server holds of it is not here: that is the `upload` table's (`UploadRow`), which
/// the upload itself reads and writes, so a job restored after a crash continues from the
/// server's offset like any rerun.
struct UploadJobRow: Sendable, Equatable {
    var id: DownloadID
    var queue: String
    /// Its secrets are kept while it is unfinished (the next attempt needs them) and dropped
    /// once it completes.
    var request: UploadRequest
    var status: DownloadStatus
    var priority: Int
    var position: Int64
    /// Where it stands among the finished, in the order they ended.
    var finishOrder: Int64?
    var result: UploadResult?
    var error: DownloadError?
}

extension UploadJobRow: FetchableRecord, PersistableRecord {
    static let databaseTableName = "uploadJob"

    init(row: Row) throws {
        id = DownloadID(stored: row["id"])
        queue = row["queue"]
        let decoder = JSONDecoder()
        request = try decoder.decode(UploadRequest.self, from: Data((row["request"] as String).utf8))
        status = DownloadStatus(storedValue: row["status"]) ?? .queued
        priority = row["priority"]
        position = row["position"]
        finishOrder = row["finishOrder"]
        result = try (row["result"] as String?).map { try decoder.decode(UploadResult.self, from: Data($0.utf8)) }
        error = (row["errorKind"] as Int?).map { kind in
            DownloadError.stored(
                kind: DownloadError.Kind(storedValue: kind), message: row["lastError"] ?? "failed",
                reason: (row["errorReason"] as String?).flatMap(DownloadError.Reason.init(storedName:)))
        }
    }

    func encode(to container: inout PersistenceContainer) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        container["id"] = id.storedValue
        container["queue"] = queue
        container["file"] = request.file
        container["url"] = request.url
        container["request"] = String(decoding: try encoder.encode(request), as: UTF8.self)
        container["status"] = status.storedValue
        container["priority"] = priority
        container["position"] = position
        container["finishOrder"] = finishOrder
        container["result"] = try result.map { String(decoding: try encoder.encode($0), as: UTF8.self) }
        container["errorKind"] = error?.kind.storedValue
        container["errorReason"] = error?.reason?.description
        container["lastError"] = error?.message
        container["updatedAt"] = Date().timeIntervalSince1970
    }
}

extension Store {
    /// The queued uploads of `queue`, in the order they were added, and those whose record
    /// cannot be read (a request this version cannot decode), with why: one bad row does not
    /// hide the others.
    func uploadJobs(queue: String) async throws(DownloadError) -> (jobs: [UploadJobRow], unreadable: [(DownloadID, String)]) {
        try await read { db in
            var jobs: [UploadJobRow] = []
            var unreadable: [(DownloadID, String)] = []
            for row in try Row.fetchAll(db, sql: "SELECT * FROM uploadJob WHERE queue = ? ORDER BY position", arguments: [queue]) {
                do { jobs.append(try UploadJobRow(row: row)) } catch {
                    unreadable.append((DownloadID(stored: row["id"]), "\(error)"))
                }
            }
            return (jobs, unreadable)
        }
    }

    /// The queued upload of `file` to `url` in `queue`, if there is one.
    func uploadJob(queue: String, file: String, url: String) async throws(DownloadError) -> UploadJobRow? {
        try await read { db in
            try UploadJobRow.fetchOne(
                db, sql: "SELECT * FROM uploadJob WHERE queue = ? AND file = ? AND url = ?", arguments: [queue, file, url])
        }
    }

    /// Records `job` (replacing its earlier record).
    func saveUploadJob(_ job: UploadJobRow) async throws(DownloadError) {
        try await write { db in try job.save(db) }
    }

    /// Forgets the queued upload `id`.
    func deleteUploadJob(_ id: DownloadID) async throws(DownloadError) {
        try await write { db in
            try db.execute(sql: "DELETE FROM uploadJob WHERE id = ?", arguments: [id.storedValue])
        }
    }
}
