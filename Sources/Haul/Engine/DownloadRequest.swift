/// What to download, where to, and how hard to try.
///
/// ```swift
/// var request = DownloadRequest(url: "https://example.com/big.iso", directory: "/tmp")
/// request.checksum = try Checksum(parsing: "sha-256=…")
/// ```
public struct DownloadRequest: Sendable {
    /// Where the file goes.
    public enum Destination: Sendable, Hashable {
        /// Exactly this path.
        case file(String)
        /// This folder, under the name the server suggests (Content-Disposition) or the URL's last segment.
        case directory(String)
    }

    /// The `http` or `https` URL.
    public var url: String
    /// Where the file goes.
    public var destination: Destination
    /// Extra request headers (`Authorization`, `Cookie`, …), sent on every request.
    public var headers: [(name: String, value: String)] = []
    /// A digest the finished file must match.
    public var checksum: Checksum?
    /// Tries in a row that may fail before giving up; a try that made progress resets the count.
    public var maxTries: Int = 5
    /// The first retry wait; it doubles on each further failure (with jitter).
    public var retryWait: Duration = .seconds(1)
    /// Replace a different file already at the destination instead of saving as `name.1.ext`.
    public var overwrite: Bool = false
    /// Connections for one download when the server serves ranges of a file of known length
    /// (aria2's `-x`); 1 disables segmenting.
    public var connections: Int = 1
    /// A segment is never split below this size (aria2's `--min-split-size`).
    public var minimumSplitSize: Int64 = 1 << 20
    /// This download's own rate limit in bytes per second, on top of the downloader's global one.
    public var rateLimit: Int64?

    /// A request for `url` saved into `directory`.
    public init(url: String, directory: String) {
        self.url = url
        self.destination = .directory(directory)
    }

    /// A request for `url` saved at `path`.
    public init(url: String, file path: String) {
        self.url = url
        self.destination = .file(path)
    }

    /// `path` as destinations are stored: `~` expanded, made absolute against the current
    /// folder, and standardized.
    public static func absolutePath(_ path: String) -> String {
        DestinationResolver.absolute(path)
    }
}

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
}
