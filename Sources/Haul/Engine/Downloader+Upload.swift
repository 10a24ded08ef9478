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
    /// An upload started here is the caller's: ``shutdown()`` does not stop it, so await
    /// ``UploadTask/result()`` (or cancel the task) before shutting the downloader down. For a
    /// queue (priorities, `-j`, a restart that continues it), use
    /// ``DownloadManager/addUpload(_:priority:paused:)``.
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
        let (url, file, store, logger) = (request.url, request.file, store, configuration.logger)
        let token = { @Sendable () async -> UploadResumeToken? in
            do throws(DownloadError) {
                return try await store.upload(file: file, url: url).flatMap(UploadResumeToken.init)
            } catch {
                logger.error("no resume token for the upload of \(file): its record cannot be read: \(error.message)")
                return nil
            }
        }
        return UploadTask(token: token) { report throws(DownloadError) in
            do throws(DownloadError) {
                return try await runner(report).run()
            } catch {
                // The network's errors name the host at most: the line says which upload.
                guard [DownloadError.Kind.network, .http, .protocolViolation].contains(error.kind) else { throw error }
                throw error.with(url: url)
            }
        }
    }

    /// Continues the resumable upload `token` describes (from ``UploadTask/pause()``, perhaps in
    /// another process): the server is asked for its offset and only the rest is sent, unless
    /// the file changed since the upload began (then a new one begins, and
    /// ``UploadResult/restartReason`` says why) or the server no longer has it.
    ///
    /// ```swift
    /// let token = try JSONDecoder().decode(UploadResumeToken.self, from: saved)
    /// let task = try await downloader.upload(resuming: token) { $0.rateLimit = 1 << 20 }
    /// ```
    ///
    /// - Parameters:
    ///   - token: where the upload is and what the file was.
    ///   - configure: changes the request made from the token (headers, credentials, a rate
    ///     limit); its file and URL must stay the token's.
    /// - Returns: the running task.
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/invalidRequest`` when the
    ///   token is of an unknown version or not of a resumable upload, or the request is unusable;
    ///   of kind ``DownloadError/Kind/io`` when the store cannot record it.
    public func upload(
        resuming token: UploadResumeToken, configure: (inout UploadRequest) -> Void = { _ in }
    ) async throws(DownloadError) -> UploadTask {
        guard UploadResumeToken.readableVersions.contains(token.version) else {
            throw .invalidRequest(
                "upload resume token version \(token.version) is not supported (this Haul reads \(UploadResumeToken.readableVersions))")
        }
        guard token.protocol == .tus || token.protocol == .ietf else {
            throw .invalidRequest("an upload resume token is of a tus or IETF-draft upload, not \(token.protocol.rawValue)")
        }
        guard let location = HTTPURL(token.location), location.scheme == "http" || location.scheme == "https" else {
            throw .invalidRequest("the upload resume token's location is not an http(s) URL: \(URLRedaction.redact(token.location))")
        }
        if let version = token.ietfInteropVersion, !UploadRequest.ietfInteropVersions.contains(version) {
            throw .invalidRequest("the upload resume token's interop version must be 3, 5 or 6, not \(version)")
        }
        var request = UploadRequest(file: token.file, url: token.url)
        request.protocol = token.protocol
        configure(&request)
        guard request.file == token.file, request.url == token.url else {
            throw .invalidRequest("a request resumed from a token keeps the token's file and URL")
        }
        try request.validate()
        var row = UploadRow(token)
        row.file = DownloadRequest.absolutePath(token.file)
        try await store.saveUpload(row)
        return try await upload(request)
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
