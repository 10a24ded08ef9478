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

extension UploadJobRow: FetchableRecord {
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

    /// The columns of the `uploadJob` table a row is written with, in the order of ``storedValues()``.
    static let storedColumns = [
        "id", "queue", "file", "url", "request", "status", "priority", "position", "finishOrder", "result", "errorKind",
        "errorReason", "lastError", "updatedAt",
    ]

    func storedValues() throws -> [DatabaseValue] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return [
            id.storedValue.databaseValue, queue.databaseValue, request.file.databaseValue, request.url.databaseValue,
            String(decoding: try encoder.encode(request), as: UTF8.self).databaseValue, status.storedValue.databaseValue,
            priority.databaseValue, position.databaseValue, finishOrder.databaseValue,
            try result.map { String(decoding: try encoder.encode($0), as: UTF8.self) }.databaseValue,
            error?.kind.storedValue.databaseValue ?? .null, error?.reason?.description.databaseValue ?? .null,
            error?.message.databaseValue ?? .null, Date().timeIntervalSince1970.databaseValue,
        ]
    }
}

/// A queued upload whose record does not read, and why.
private struct UnreadableJob: Error {
    var id: DownloadID
    var reason: String
}

extension Store {
    /// The queued uploads of `queue` this store holds (``StoreDatabase/heldCondition``), in the
    /// order they were added, and those whose record
    /// cannot be read (a request this version cannot decode), with why: one bad row does not
    /// hide the others.
    func uploadJobs(queue: String) async throws(DownloadError) -> (jobs: [UploadJobRow], unreadable: [(DownloadID, String)]) {
        let held = database.heldCondition
        let rows = try await fetch(
            "SELECT * FROM uploadJob WHERE queue = ?\(held.sql) ORDER BY position", [queue.databaseValue] + held.values
        ) { row in
            do { return Result<UploadJobRow, UnreadableJob>.success(try UploadJobRow(row: row)) } catch {
                return .failure(UnreadableJob(id: DownloadID(stored: row["id"]), reason: "\(error)"))
            }
        }
        var jobs: [UploadJobRow] = []
        var unreadable: [(DownloadID, String)] = []
        for row in rows {
            switch row {
            case .success(let job): jobs.append(job)
            case .failure(let bad): unreadable.append((bad.id, bad.reason))
            }
        }
        return (jobs, unreadable)
    }

    /// The queued upload of `file` to `url` in `queue`, if there is one.
    func uploadJob(queue: String, file: String, url: String) async throws(DownloadError) -> UploadJobRow? {
        try await fetch(
            "SELECT * FROM uploadJob WHERE queue = ? AND file = ? AND url = ?", [queue.databaseValue, file.databaseValue, url.databaseValue]
        ) { try UploadJobRow(row: $0) }.first
    }

    /// Records `job` (replacing its earlier record).
    func saveUploadJob(_ job: UploadJobRow) async throws(DownloadError) {
        let sql = database.upsertSQL(table: "uploadJob", columns: UploadJobRow.storedColumns, key: ["id"])
        let values: [DatabaseValue]
        do { values = try job.storedValues() } catch {
            throw .io("cannot record the upload of \(job.request.file): \(error)")
        }
        try await write([StoreStatement(sql, values)])
    }

    /// Forgets the queued upload `id`.
    func deleteUploadJob(_ id: DownloadID) async throws(DownloadError) {
        try await write([StoreStatement("DELETE FROM uploadJob WHERE id = ?", [id.storedValue.databaseValue])])
    }
}
