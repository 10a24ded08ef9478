import Foundation
import GRDB

/// What the store keeps of one upload (a file to a URL) between runs: the upload the server
/// made for it and the file as it was when the upload began.
struct UploadRow: Sendable, Hashable {
    /// The file's absolute path.
    var file: String
    /// The target URL as given (a tus creation endpoint, the IETF draft's target, a `PUT` target).
    var url: String
    /// The protocol the upload began with.
    var `protocol`: UploadProtocol
    /// The resumable upload's URL (the creation's `Location`), nil until the server made one.
    var location: String?
    /// The interop version of the IETF draft the upload began with, which a rerun speaks too;
    /// nil for tus, and for an upload a store before v10 recorded (``ietfVersion``).
    var ietfInteropVersion: Int?
    /// The file as it was when the upload began.
    var identity: UploadFile.Identity
    var createdAt: Date
    var updatedAt: Date

    /// The interop version a rerun continues the IETF draft's upload in: the one it began with,
    /// 6 for an upload recorded before the version was (6 was the only one spoken then).
    var ietfVersion: Int { ietfInteropVersion ?? 6 }
}

extension UploadRow: FetchableRecord, PersistableRecord {
    static let databaseTableName = "upload"

    init(row: Row) throws {
        file = row["file"]
        url = row["url"]
        `protocol` = UploadProtocol(rawValue: row["protocol"] as String) ?? .put
        location = row["location"]
        ietfInteropVersion = row["ietfInteropVersion"]
        identity = UploadFile.Identity(length: row["length"], modified: row["modified"], sample: row["sample"])
        createdAt = Date(timeIntervalSince1970: row["createdAt"])
        updatedAt = Date(timeIntervalSince1970: row["updatedAt"])
    }

    func encode(to container: inout PersistenceContainer) throws {
        container["file"] = file
        container["url"] = url
        container["protocol"] = `protocol`.rawValue
        container["location"] = location
        container["ietfInteropVersion"] = ietfInteropVersion
        container["length"] = identity.length
        container["modified"] = identity.modified
        container["sample"] = identity.sample
        container["createdAt"] = createdAt.timeIntervalSince1970
        container["updatedAt"] = updatedAt.timeIntervalSince1970
    }
}

extension Store {
    /// The upload of `file` to `url` an earlier run left, if any.
    func upload(file: String, url: String) async throws(DownloadError) -> UploadRow? {
        try await read { db in
            try UploadRow.fetchOne(db, sql: "SELECT * FROM upload WHERE file = ? AND url = ?", arguments: [file, url])
        }
    }

    /// Records `row` (replacing the one of the same file and URL), committed before it returns:
    /// a resumable upload's URL must be on disk before its first byte is sent, or a `kill -9` then
    /// would leave an upload no rerun can find.
    func saveUpload(_ row: UploadRow) async throws(DownloadError) {
        try await write { db in try row.save(db) }
    }

    /// Forgets the upload of `file` to `url` (it completed, or begins anew).
    func deleteUpload(file: String, url: String) async throws(DownloadError) {
        try await write { db in
            try db.execute(sql: "DELETE FROM upload WHERE file = ? AND url = ?", arguments: [file, url])
        }
    }
}
