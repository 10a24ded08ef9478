/// Everything another process needs to continue a resumable upload (tus, the IETF draft): the
/// upload's URL on the server and the file as it was when the upload began. Plain, versioned
/// JSON, as ``ResumeToken`` is for downloads.
///
/// ``UploadTask/pause()`` returns one; ``Downloader/upload(resuming:configure:)`` continues from
/// it, in this process or another, with a store of its own: it asks the server for its offset
/// and sends only the rest, unless the file changed since (then a new upload begins, and
/// ``UploadResult/restartReason`` says why).
///
/// ```swift
/// let data = try JSONEncoder().encode(await task.pause())
/// // … in another process, with the same file on disk:
/// let task = try await downloader.upload(resuming: try JSONDecoder().decode(UploadResumeToken.self, from: data))
/// ```
///
/// Its JSON (version 1):
///
/// ```json
/// {
///   "version": 1,
///   "file": "/home/me/video.mp4",
///   "url": "https://uploads.example/files",
///   "protocol": "tus",
///   "location": "https://uploads.example/files/24e533e0",
///   "length": 104857600,
///   "modified": 1795689563.25,
///   "sample": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
/// }
/// ```
///
/// An IETF-draft upload adds `"ietfInteropVersion"` (3, 5 or 6):
///
/// ```json
/// {"version": 1, "protocol": "ietf", "ietfInteropVersion": 5, …}
/// ```
///
/// `sample` is the hex SHA-256 of a bounded sample of the file's bytes (at most 64 blocks of
/// 64 KiB, spread over it): with `length` and `modified` it tells the file as it was from one
/// changed since. The token holds no offset: the server's is the one that counts.
public struct UploadResumeToken: Codable, Sendable, Hashable {
    /// The version this library writes.
    public static let currentVersion = 1
    /// The versions this library reads.
    public static let readableVersions = 1...1

    /// Format version; a reader refuses versions it does not know.
    public var version: Int = UploadResumeToken.currentVersion
    /// Absolute path of the file sent.
    public var file: String
    /// The URL the upload was asked of (a tus creation endpoint, the IETF draft's target).
    public var url: String
    /// The protocol the upload began with: ``UploadProtocol/tus`` or ``UploadProtocol/ietf``.
    public var `protocol`: UploadProtocol
    /// The upload's URL on the server (the creation's `Location`), with its user information if
    /// it had any.
    public var location: String
    /// The file's length when the upload began.
    public var length: Int64
    /// The file's modification time then, in seconds since 1970.
    public var modified: Double
    /// The hex SHA-256 of a sample of the file's bytes then.
    public var sample: String
    /// The IETF draft's interop version the upload began in (3, 5 or 6; nil for tus): the
    /// server made the upload in it, so it is continued in it.
    public var ietfInteropVersion: Int?
}
