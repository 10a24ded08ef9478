extension Downloader {
    /// Starts uploading `request`'s file, with the downloader's clients, cookies, state folder
    /// and shared rate limit.
    ///
    /// A resumable upload (tus, the IETF draft) is recorded in the store before its first byte
    /// is sent: the same request later (in this process or another, after a crash or a
    /// `kill -9`) asks the server what it holds and sends the rest, unless the file changed
    /// since.
    ///
    /// ```swift
    /// try await Downloader.withDownloader(.init()) { downloader throws(DownloadError) in
    ///     let task = try await downloader.upload(UploadRequest(file: "video.mp4", url: "https://uploads.example/files"))
    ///     let result = try await task.result()
    ///     print("\(result.bytes) bytes at \(result.location)")
    /// }
    /// ```
    ///
    /// Uploads are not yet a ``DownloadManager``'s: no queue, priorities or `-j`, and
    /// ``shutdown()`` does not stop them. Await ``UploadTask/result()`` (or cancel the task)
    /// before shutting the downloader down.
    ///
    /// - Parameter request: the file, the URL, the protocol and the network options.
    /// - Returns: the running task.
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/invalidRequest`` when the
    ///   request is unusable (``UploadRequest/validate()``).
    public func upload(_ request: UploadRequest) async throws(DownloadError) -> UploadTask {
        try request.validate()
        var request = request
        request.file = DownloadRequest.absolutePath(request.file)
        let runner = uploadRunner(request)
        let url = request.url
        return UploadTask { report throws(DownloadError) in
            do throws(DownloadError) {
                return try await runner(report).run()
            } catch {
                // The network's errors name the host at most: the line says which upload.
                guard [DownloadError.Kind.network, .http, .protocolViolation].contains(error.kind) else { throw error }
                throw error.with(url: url)
            }
        }
    }

    /// The engine for one upload, waiting for its progress callback.
    func uploadRunner(_ request: UploadRequest) -> @Sendable (@escaping @Sendable (UploadProgress) -> Void) -> UploadRunner {
        var download = DownloadRequest(url: request.url, file: request.file)
        download.network = request.network
        let transport = transport(for: download)
        let limiters = [sharedLimiter, request.rateLimit.map { limiter($0) }].compactMap { $0 }
        let (store, stallTimeout, clock, random) = (store, configuration.stallTimeout, configuration.clock, configuration.random)
        return { report in
            UploadRunner(
                request: request, store: store, transport: transport, limiters: limiters, stallTimeout: stallTimeout, clock: clock,
                random: random, report: report)
        }
    }
}
