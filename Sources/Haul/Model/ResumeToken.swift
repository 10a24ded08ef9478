import Foundation

/// Everything another process needs to continue a download: NSURLSession's `resumeData`,
/// but plain, versioned JSON that survives the URL changing.
///
/// ``DownloadTask/pause()`` returns one that covers every byte on disk; so does the
/// ``DownloadError/resumeToken`` of a paused task's ``DownloadTask/result()``.
///
/// ```swift
/// let data = try JSONEncoder().encode(await task.pause())
/// // … in another process, with the same part file on disk:
/// let task = try await downloader.download(resuming: try JSONDecoder().decode(ResumeToken.self, from: data))
/// ```
///
/// Its JSON (version 2):
///
/// ```json
/// {
///   "version": 2,
///   "id": "5f1c02a000000001",
///   "url": "https://example.com/big.iso",
///   "destination": "/home/me/big.iso",
///   "totalLength": 21037004,
///   "validators": {"etag": "\"5d2-61a\"", "lastModified": "Tue, 03 Mar 2026 10:00:00 GMT"},
///   "ranges": [{"offset": 0, "length": 19136512}],
///   "checksum": {"algorithm": "sha-256", "hex": "…"}
/// }
/// ```
///
/// A download from several sources adds `"sources"` (each `{"uri": …, "priority": …,
/// "location": …}`, the first one's URI being `url`) and `"sourceValidators"` (each source's
/// validators by URI, as far as known), and one with piece digests adds `"pieces"`
/// (`{"algorithm": "sha-256", "length": 1048576, "hashes": […]}`); readers that do not know
/// them ignore them and continue from `url` alone.
///
/// `ranges` lists the durable bytes of `destination + ".part"`, each as its first byte and
/// its size. Version 1 tokens wrote them as text, `"0-19136512"`, meaning bytes 0 up to but
/// not including 19136512; they are still read.
public struct ResumeToken: Codable, Sendable, Hashable {
    /// The version this library writes.
    public static let currentVersion = 2
    /// The versions this library reads.
    public static let readableVersions = 1...2

    /// Format version; a reader refuses versions it does not know.
    public var version: Int = ResumeToken.currentVersion
    /// The ``DownloadID`` the download had in the store it came from (16 hex digits); the
    /// download continued from the token gets an id of its own.
    public var id: String
    /// The URL to continue from (with its user information, if it had any); set another
    /// with `download(resuming:configure:)` when the link expired.
    public var url: String
    /// Absolute path of the final file; the partial is `destination + ".part"`.
    public var destination: String
    /// The file's length as the server gave it, when it did.
    public var totalLength: Int64?
    /// The server's `ETag` and `Last-Modified`, sent back as `If-Range`: a file that changed
    /// meanwhile is downloaded again from the start, never mixed.
    public var validators: Validators
    /// Byte ranges of the partial that were flushed to disk (and are trusted only as far as
    /// the part file still holds them).
    public var ranges: ByteRanges
    /// The digest the finished file must match, when one was asked for.
    public var checksum: Checksum?
    /// Every source of a download from several (its mirrors), the first being ``url``; nil for
    /// a download from its one URL.
    public var sources: [DownloadRequest.Source]?
    /// Each source's `ETag` and `Last-Modified` by URI, for a download from several: a mirror
    /// whose file changed meanwhile is dropped, never mixed in. Nil for a download from one URL.
    public var sourceValidators: [String: Validators]?
    /// The digests of the file's pieces, when the download had them.
    public var pieces: PieceChecksums?

    /// The path of the partial file.
    public var partPath: String { destination + ".part" }
}
