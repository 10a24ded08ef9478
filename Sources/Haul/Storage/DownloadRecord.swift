import Foundation
import GRDB

/// Where a download stands, as kept in the store.
public enum DownloadStatus: String, Sendable, Codable, Hashable {
    case queued, running, paused, completed, failed
}

/// One row of the `download` table: everything needed to continue a download in
/// another process. Progress is a set of durable byte ranges, never a single offset.
struct DownloadRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "download"

    var id: String
    /// Absolute path of the final file; the identity of a download (DESIGN: not the URL).
    var destination: String
    var url: String
    var totalLength: Int64?
    var etag: String?
    var lastModified: String?
    var acceptsRanges: Bool
    /// Bytes flushed to disk before this row said so.
    var ranges: ByteRanges
    var status: DownloadStatus
    var lastError: String?
    var checksum: String?
    var createdAt: Date
    var updatedAt: Date

    var validators: Validators {
        get { Validators(etag: etag, lastModified: lastModified) }
        set { etag = newValue.etag; lastModified = newValue.lastModified }
    }

    var partPath: String { destination + ".part" }
}

extension ByteRanges: DatabaseValueConvertible {
    public var databaseValue: DatabaseValue { description.databaseValue }

    public static func fromDatabaseValue(_ dbValue: DatabaseValue) -> ByteRanges? {
        String.fromDatabaseValue(dbValue).flatMap(ByteRanges.init(parsing:))
    }
}
