/// A snapshot of a running upload, delivered on ``UploadTask/progress``.
public struct UploadProgress: Sendable, Hashable {
    /// Bytes the server holds (its confirmed offset) plus those sent since on the way to it.
    public var bytesSent: Int64
    /// The file's length.
    public var totalBytes: Int64
    /// Smoothed rate in bytes per second.
    public var bytesPerSecond: Double
    /// The protocol chosen, once known (never ``UploadProtocol/auto``).
    public var `protocol`: UploadProtocol?
    /// A passing condition worth showing: "retrying in 2 s: the server closed the connection".
    public var note: String?
    /// Why an earlier upload of the file was not continued (the file changed, the server lost
    /// it), once that is known; nil when there was none or it is being continued.
    public var restartReason: String?

    /// A snapshot.
    public init(bytesSent: Int64, totalBytes: Int64, bytesPerSecond: Double = 0, protocol: UploadProtocol? = nil, note: String? = nil) {
        self.bytesSent = bytesSent
        self.totalBytes = totalBytes
        self.bytesPerSecond = bytesPerSecond
        self.protocol = `protocol`
        self.note = note
    }

    /// The fraction sent in `0...1` (1 for an empty file).
    public var fraction: Double {
        totalBytes > 0 ? min(1, Double(bytesSent) / Double(totalBytes)) : 1
    }

    /// Time left at the current rate, while bytes are flowing.
    public var eta: Duration? {
        guard bytesPerSecond > 1 else { return nil }
        return .milliseconds(Int64(Double(max(0, totalBytes - bytesSent)) / bytesPerSecond * 1000))
    }
}
