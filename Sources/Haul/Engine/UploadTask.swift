import Synchronization

/// A running upload, from ``Downloader/upload(_:)``: its progress, its result, and a way to
/// stop it.
///
/// ```swift
/// let task = try await downloader.upload(UploadRequest(file: "video.mp4", url: "https://uploads.example/files"))
/// for await progress in task.progress { print(progress.bytesSent, "of", progress.totalBytes) }
/// let result = try await task.result()
/// print(result.location, result.protocol)
/// ```
///
/// Cancelling stops the transfer; a resumable upload stays on the server and in the store, so the
/// same request later continues it. ``pause()`` stops it too, and returns a token that continues
/// it in another process (``Downloader/upload(resuming:configure:)``).
public final class UploadTask: Sendable {
    /// Snapshots while the upload runs; the stream ends when it does. One reader.
    public let progress: AsyncStream<UploadProgress>
    private let work: Task<Result<UploadResult, DownloadError>, Never>
    /// The token of the upload as the store records it now.
    private let token: @Sendable () async -> UploadResumeToken?

    init(
        token: @escaping @Sendable () async -> UploadResumeToken? = { nil },
        runner: @escaping @Sendable (@escaping @Sendable (UploadProgress) -> Void) async throws(DownloadError) -> UploadResult
    ) {
        self.token = token
        // The newest snapshot matters, not every one: a slow reader never holds memory.
        let (stream, continuation) = AsyncStream.makeStream(of: UploadProgress.self, bufferingPolicy: .bufferingNewest(1))
        progress = stream
        work = Task {
            defer { continuation.finish() }
            do throws(DownloadError) {
                return .success(try await runner { continuation.yield($0) })
            } catch {
                return .failure(error)
            }
        }
    }

    /// Waits for the upload to end.
    ///
    /// - Returns: the result, once the server holds every byte.
    /// - Throws: ``DownloadError``: why it failed, or ``DownloadError/Kind/cancelled`` after ``cancel()``.
    public func result() async throws(DownloadError) -> UploadResult {
        try await work.value.get()
    }

    /// Stops the upload. A resumable upload (tus, the IETF draft) can be continued later with the same request.
    public func cancel() {
        work.cancel()
    }

    /// Stops the upload, waits until it has stopped, and returns what continues it.
    ///
    /// ```swift
    /// if let token = await task.pause() {
    ///     try JSONEncoder().encode(token).write(to: saved)
    /// }
    /// ```
    ///
    /// - Returns: a token for ``Downloader/upload(resuming:configure:)``; nil when there is
    ///   nothing to continue: a plain `PUT` (it starts over), an upload the server had not made
    ///   yet, or one that had completed (its ``result()`` says so); also when the store cannot be
    ///   read, which the downloader's logger says.
    public func pause() async -> UploadResumeToken? {
        work.cancel()
        _ = await work.value
        return await token()
    }
}
