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

extension UploadRow: FetchableRecord {
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

    /// The columns of the `upload` table a row is written with, in the order of ``storedValues``.
    static let storedColumns = [
        "file", "url", "protocol", "location", "ietfInteropVersion", "length", "modified", "sample", "createdAt", "updatedAt",
    ]

    var storedValues: [DatabaseValue] {
        [
            file.databaseValue, url.databaseValue, `protocol`.rawValue.databaseValue, location.databaseValue,
            ietfInteropVersion.databaseValue, identity.length.databaseValue, identity.modified.databaseValue,
            identity.sample.databaseValue, createdAt.timeIntervalSince1970.databaseValue, updatedAt.timeIntervalSince1970.databaseValue,
        ]
    }
}

extension Store {
    /// The upload of `file` to `url` an earlier run left, if any.
    func upload(file: String, url: String) async throws(DownloadError) -> UploadRow? {
        try await fetch("SELECT * FROM upload WHERE file = ? AND url = ?", [file.databaseValue, url.databaseValue]) {
            try UploadRow(row: $0)
        }.first
    }

    /// Records `row` (replacing the one of the same file and URL), committed before it returns:
    /// a resumable upload's URL must be on disk before its first byte is sent, or a `kill -9` then
    /// would leave an upload no rerun can find.
    func saveUpload(_ row: UploadRow) async throws(DownloadError) {
        let sql = database.upsertSQL(table: "upload", columns: UploadRow.storedColumns, key: ["file", "url"])
        try await write([StoreStatement(sql, row.storedValues)])
    }

    /// Forgets the upload of `file` to `url` (it completed, or begins anew).
    func deleteUpload(file: String, url: String) async throws(DownloadError) {
        try await write([StoreStatement("DELETE FROM upload WHERE file = ? AND url = ?", [file.databaseValue, url.databaseValue])])
    }
}
