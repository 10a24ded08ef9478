import Foundation

/// A snapshot of a running download, delivered on ``DownloadTask/progress``.
public struct DownloadProgress: Sendable, Hashable {
    /// The destination path, once known (after the first answer from the server).
    public var destination: String?
    /// Bytes on disk so far, from the start of the file.
    public var bytesDone: Int64
    /// The file's length, when the server said.
    public var totalBytes: Int64?
    /// Smoothed transfer rate in bytes per second.
    public var bytesPerSecond: Double
    /// Connections reading at the moment of the snapshot (more than 1 for a segmented download).
    public var connections: Int = 1
    /// A passing condition worth showing: "retrying in 2 s: 503 Service Unavailable".
    public var note: String?
    /// How each source of a download from several does, in the request's order; empty for a
    /// download from one URL.
    public var sources: [SourceProgress] = []

    /// One source of a download from several, as it does now.
    public struct SourceProgress: Sendable, Hashable {
        /// Its URI, without the credentials it may carry.
        public var uri: String
        /// Smoothed bytes per second from it (0 once it is dropped).
        public var bytesPerSecond: Double
        /// Why it is no longer used; nil while it is.
        public var dropped: String?

        /// A source's snapshot.
        public init(uri: String, bytesPerSecond: Double, dropped: String? = nil) {
            self.uri = uri
            self.bytesPerSecond = bytesPerSecond
            self.dropped = dropped
        }
    }

    /// The fraction done in `0...1`, when the length is known.
    public var fraction: Double? {
        guard let totalBytes, totalBytes > 0 else { return nil }
        return min(1, Double(bytesDone) / Double(totalBytes))
    }

    /// Time left at the current rate, when the length is known and bytes are flowing.
    public var eta: Duration? {
        guard let totalBytes, bytesPerSecond > 1 else { return nil }
        let seconds = Double(max(0, totalBytes - bytesDone)) / bytesPerSecond
        return .milliseconds(Int64(seconds * 1000))
    }
}

/// An exponentially weighted rate: steady enough to read, quick enough to follow a change.
struct SpeedMeter: Sendable {
    /// How much of the old rate survives one second (e^(-1/3): a ~3 s time constant).
    static let decayPerSecond = 0.7165
    private(set) var bytesPerSecond: Double = 0
    /// The last sample (its time a ``ProcessTime``: a transfer holds a meter).
    private var last: (at: Duration, bytes: Int64)?

    mutating func sample(bytes: Int64, at instant: ContinuousClock.Instant) {
        let at = ProcessTime.since(instant)
        guard let last else {
            self.last = (at, bytes)
            return
        }
        let elapsed = at - last.at
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        guard seconds > 0 else { return }
        let instantRate = Double(max(0, bytes - last.bytes)) / seconds
        let keep = bytesPerSecond == 0 ? 0 : Foundation.pow(Self.decayPerSecond, seconds)
        bytesPerSecond = keep * bytesPerSecond + (1 - keep) * instantRate
        self.last = (at, bytes)
    }
}
