/// Hooks the engine calls as it works, for a program that keeps figures about it (the
/// daemon's `/metrics`): set ``Downloader/Configuration/observer``.
///
/// Each hook is called on the engine's own tasks and must return at once (count, do not
/// wait). None is called for every buffer: bytes are handed over in sums, at most every
/// 100 ms per transfer. A later version may add hooks; each defaults to doing nothing.
public struct EngineObserver: Sendable {
    /// A try failed with this error and another follows after a wait (the error is retryable
    /// and the download's tries are not spent). Not called for the try that gives up.
    public var retrying: @Sendable (DownloadError) -> Void = { _ in }
    /// Body bytes written to downloads' files since the transfer's last call: a running
    /// transfer reports every 100 ms or so, and once more when its request ends. Bytes only
    /// read into memory (folder listings) or streamed to a caller are not counted.
    public var fetched: @Sendable (Int64) -> Void = { _ in }
    /// The store wrote one transaction (a group commit of `rows` downloads' changes) in
    /// `duration`, whether it succeeded or failed.
    public var storeCommitted: @Sendable (_ duration: Duration, _ rows: Int) -> Void = { _, _ in }

    /// An observer whose hooks do nothing; set the ones wanted.
    public init() {}
}
