import Foundation

/// Everything another process needs to continue a download: NSURLSession's `resumeData`,
/// but plain, versioned JSON that survives the URL changing.
///
/// ```swift
/// let data = try JSONEncoder().encode(try await task.resumeToken())
/// // … in another process, with the same part file on disk:
/// let task = downloader.download(resuming: try JSONDecoder().decode(ResumeToken.self, from: data))
/// ```
public struct ResumeToken: Codable, Sendable, Hashable {
    /// Format version; a reader refuses versions it does not know.
    public var version: Int = 1
    public var id: String
    public var url: String
    /// Absolute path of the final file; the partial is `destination + ".part"`.
    public var destination: String
    public var totalLength: Int64?
    public var validators: Validators
    /// Byte ranges of the partial that were flushed to disk.
    public var ranges: ByteRanges
    public var checksum: Checksum?

    init(_ record: DownloadRecord) {
        id = record.id
        url = record.url
        destination = record.destination
        totalLength = record.totalLength
        validators = record.validators
        ranges = record.ranges
        checksum = try? record.checksum.map(Checksum.init(parsing:))
    }

    /// The path of the partial file.
    public var partPath: String { destination + ".part" }
}
