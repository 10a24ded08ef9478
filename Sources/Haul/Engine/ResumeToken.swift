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

    init(_ row: DownloadRow) {
        id = row.id.description
        url = row.url
        destination = row.path ?? row.request.destination.path
        totalLength = row.totalLength
        validators = row.validators
        ranges = row.ranges
        checksum = row.request.checksum
    }

    /// The path of the partial file.
    public var partPath: String { destination + ".part" }
}
