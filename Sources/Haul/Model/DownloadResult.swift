/// A finished download.
public struct DownloadResult: Sendable, Hashable {
    /// Absolute path of the complete file.
    public var path: String
    /// Its size in bytes.
    public var bytes: Int64
    /// Bytes fetched by this run (less than ``bytes`` when it continued an earlier one).
    public var bytesFetched: Int64
    /// True when the file was already there and complete, so nothing was downloaded.
    public var wasAlreadyComplete: Bool

    /// A result with these fields (for tests and for callers that report a result of their own).
    public init(path: String, bytes: Int64, bytesFetched: Int64, wasAlreadyComplete: Bool) {
        self.path = path
        self.bytes = bytes
        self.bytesFetched = bytesFetched
        self.wasAlreadyComplete = wasAlreadyComplete
    }
}
