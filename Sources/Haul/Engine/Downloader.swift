import AsyncHTTPClient
import Foundation
import Logging
import NIOPosix
import Synchronization

/// The engine's entry point: the HTTP clients, the cookies and the store, shared by the downloads it starts.
///
/// ```swift
/// try await Downloader.withDownloader(.init()) { downloader in
///     let task = try await downloader.download(DownloadRequest(url: "https://example.com/f.iso", directory: "."))
///     for await progress in task.progress { print(progress.bytesDone) }
///     let result = try await task.result()
///     print(result.path)
/// }
/// ```
///
/// A downloader keeps the tasks it started until they end; ``shutdown()`` pauses the ones
/// still running (every byte they wrote recorded) and ends every wait on them.
public final class Downloader: Sendable {
    /// Settings shared by every download of one ``Downloader``.
    ///
    /// `Configuration()` uses the default state folder (``Downloader/defaultStateDirectory``);
    /// `Configuration(stateDirectory: path)` another one, made if missing. Two downloaders (in
    /// one process or two) may share a state folder: the store is SQLite in WAL mode.
    public struct Configuration: Sendable {
        /// The folder holding the store (`state.sqlite`), made if missing.
        public var stateDirectory: String
        /// Where the records are kept: `state.sqlite` in ``stateDirectory`` (the default), or a
        /// PostgreSQL server (``StoreLocation/init(parsing:)``).
        public var store = StoreLocation.stateDirectory
        /// No bytes for this long aborts an attempt, which is then retried from where it was.
        public var stallTimeout: Duration = .seconds(30)
        /// Where the engine logs (`.debug` and `.trace` only; it never prints).
        public var logger = Logger(label: "haul")
        /// Drives retry waits and lock polling; tests inject a fast one.
        public var clock: any Clock<Duration> = ContinuousClock()
        /// A rate limit in bytes per second shared by every connection of every download;
        /// ``Downloader/setRateLimit(_:)`` changes it later.
        public var rateLimit: Int64?
        /// Jitter for retry backoff, a number in `0..<1`.
        public var random: @Sendable () -> Double = { Double.random(in: 0..<1) }
        /// Where ``Downloader/shutdown()`` writes every cookie it holds (loaded from cookie
        /// files and set by servers), in the Netscape format (aria2's `--save-cookies`).
        public var saveCookies: String?
        /// Told of retries, bytes written and the store's transactions, for a program that keeps
        /// figures (the daemon's `/metrics`); by default nobody is.
        public var observer = EngineObserver()

        /// Settings with the state folder `stateDirectory` (default: ``Downloader/defaultStateDirectory``).
        public init(stateDirectory: String = Downloader.defaultStateDirectory) {
            self.stateDirectory = stateDirectory
        }
    }

    /// `$HAUL_STATE_DIR`, else `$XDG_STATE_HOME/haul`, else `~/.local/state/haul`.
    public static var defaultStateDirectory: String {
        let environment = ProcessInfo.processInfo.environment
        if let explicit = environment["HAUL_STATE_DIR"], !explicit.isEmpty { return explicit }
        if let xdg = environment["XDG_STATE_HOME"], xdg.hasPrefix("/") {
            return (xdg as NSString).appendingPathComponent("haul")
        }
        return FilePaths.home + "/.local/state/haul"
    }

    let configuration: Configuration
    let store: Store
    /// Puts finished files in place, a batch at a time.
    let committer = FileCommitter()
    /// The names in the folders downloads go to, for the look before the first request.
    let folders = FolderListings()
    /// The confined downloads' folders, held open.
    let openFolders = DownloadFolders()
    /// Internal, not private: tests read which client carried their requests.
    let clients: HTTPClients
    /// Every download's cookies, as one store.
    let cookies = CookieStore()
    private let credentials = CredentialSource()
    /// Shared by every download; without a limit it lets everything through at the cost of
    /// one atomic load per read.
    private let globalLimiter: RateLimiter
    /// The tasks started here that have not ended, which ``shutdown()`` stops; nil once it has.
    private let tasks = Mutex<[DownloadID: DownloadTask]?>([:])

    /// Makes the state folder ready for the store. Call ``shutdown()`` when done, or use
    /// ``withDownloader(_:_:)-316xf``.
    ///
    /// The store itself is opened (SQLite) or connected to (PostgreSQL) at its first use, so a
    /// run that keeps no record (a plain `PUT`) never opens it.
    ///
    /// - Throws: ``DownloadError`` when the state folder cannot be made or written to. A store
    ///   that cannot be opened fails its first use, with the same error.
    public convenience init(_ configuration: Configuration) throws(DownloadError) {
        Self.startThreadsAhead()
        let store: Store
        switch configuration.store.kind {
        case .stateDirectory: store = try Store(directory: configuration.stateDirectory, observer: configuration.observer)
        case .postgreSQL(let server):
            store = Store(database: PostgreSQLStoreDatabase(server, logger: configuration.logger), observer: configuration.observer)
        }
        self.init(configuration, store: store)
    }

    /// Starts NIO's event loops and its pool for blocking file work, once a process, on a
    /// thread of their own. Each waits for its threads to be up before it returns: made on
    /// first use, they cost a short run milliseconds before its first connection and its first
    /// file read; made here, they start while the store opens.
    static func startThreadsAhead() { threadsStarted }

    private static let threadsStarted: Void = Thread.detachNewThread {
        _ = MultiThreadedEventLoopGroup.singleton
        _ = NIOThreadPool.singleton
    }

    /// A downloader on a given store (tests use one in memory).
    init(_ configuration: Configuration, store: Store) {
        self.configuration = configuration
        self.store = store
        clients = HTTPClients(stallTimeout: configuration.stallTimeout, rateLimit: configuration.rateLimit)
        globalLimiter = RateLimiter(bytesPerSecond: configuration.rateLimit ?? 0, clock: configuration.clock)
    }

    /// The rate limit shared by every connection of every download, in bytes per second.
    public var rateLimit: Int64? {
        let rate = globalLimiter.bytesPerSecond
        return rate > 0 ? rate : nil
    }

    /// Changes the shared rate limit for every byte from now on, running downloads included;
    /// nil or 0 removes it. Reads stay the size the client was made with, so a limit set here
    /// paces in coarser steps than one given in ``Configuration/rateLimit``.
    public func setRateLimit(_ bytesPerSecond: Int64?) {
        globalLimiter.setRate(bytesPerSecond)
    }

    /// Pauses every task still running (each returns once its bytes are recorded), ends every
    /// wait on the tasks started here with a ``DownloadError/Kind/paused`` error, writes what
    /// is left to the store (and the cookies, with ``Configuration/saveCookies``) and closes
    /// the HTTP clients. A second call does nothing more.
    ///
    /// - Throws: ``DownloadError`` when the store or the cookie file cannot be written.
    public func shutdown() async throws(DownloadError) {
        let open = tasks.withLock { tasks in
            defer { tasks = nil }
            return tasks.map { Array($0.values) } ?? []
        }
        // Each pause waits for its own attempt to stop and be recorded, so together they cost
        // the slowest one.
        await withTaskGroup(of: Void.self) { group in
            for task in open { group.addTask { await task.close() } }
        }
        var failure: DownloadError?
        do throws(DownloadError) { try await store.close() } catch { failure = error }
        if let path = configuration.saveCookies {
            do throws(DownloadError) { try cookies.save(to: path) } catch { failure = failure ?? error }
        }
        do { try await clients.shutdown() } catch {
            failure = failure ?? .io("cannot close the HTTP clients: \(error)")
        }
        if let failure { throw failure }
    }

    /// Runs `body` with a downloader and shuts it down afterwards, whatever happens; a body
    /// that throws only ``DownloadError`` keeps that type.
    ///
    /// Write the closure's thrown type to keep it: the caller's `catch` then gets a
    /// ``DownloadError`` (Swift infers `any Error` for a closure that does not say).
    ///
    /// ```swift
    /// do {
    ///     try await Downloader.withDownloader(.init()) { downloader throws(DownloadError) in
    ///         _ = try await downloader.download(request).result()
    ///     }
    /// } catch {
    ///     print(error.kind, error.path ?? "")  // error is a DownloadError
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - configuration: the state folder and shared settings.
    ///   - body: the work; the downloader shuts down when it returns or throws.
    /// - Returns: what `body` returns.
    /// - Throws: ``DownloadError``: the body's error, or the downloader's own when the store
    ///   cannot be opened or, after a body that succeeded, cannot be written at shutdown.
    public static func withDownloader<Result>(
        _ configuration: Configuration, _ body: (Downloader) async throws(DownloadError) -> Result
    ) async throws(DownloadError) -> Result {
        let downloader = try Downloader(configuration)
        let result: Swift.Result<Result, DownloadError>
        do throws(DownloadError) { result = .success(try await body(downloader)) } catch { result = .failure(error) }
        return try await downloader.close(after: result).get()
    }

    /// Runs `body` with a downloader and shuts it down afterwards, whatever happens.
    ///
    /// The overload for a body that throws other errors too (or does not say what it throws).
    ///
    /// - Parameters:
    ///   - configuration: the state folder and shared settings.
    ///   - body: the work; the downloader shuts down when it returns or throws.
    /// - Returns: what `body` returns.
    /// - Throws: the body's error, or a ``DownloadError`` when the store cannot be opened or,
    ///   after a body that succeeded, cannot be written at shutdown.
    public static func withDownloader<Result>(
        _ configuration: Configuration, _ body: (Downloader) async throws -> Result
    ) async throws -> Result {
        let downloader = try Downloader(configuration)
        let result: Swift.Result<Result, any Error>
        do { result = .success(try await body(downloader)) } catch { result = .failure(error) }
        return try await downloader.close(after: result).get()
    }

    /// Shuts down after a body ended with `result`: the body's error says what went wrong
    /// first; a store that also cannot write what is left fails the same way on the next use,
    /// where it is reported.
    private func close<Success, Failure>(after result: Swift.Result<Success, Failure>) async -> Swift.Result<Success, Failure> {
        do throws(DownloadError) {
            try await shutdown()
        } catch {
            guard case .failure = result else {
                // Failure is DownloadError or any Error: both hold a DownloadError.
                if let failure = error as? Failure { return .failure(failure) }
                configuration.logger.debug("shutting down: \(error)")
                return result
            }
            configuration.logger.debug("shutting down after a failure: \(error)")
        }
        return result
    }

    /// Starts downloading. The task runs until it completes, fails, is cancelled or paused,
    /// or this downloader shuts down.
    ///
    /// The download gets a row of its own in the store; a later download of the same
    /// destination (in this process or another) continues from what it saved.
    ///
    /// - Parameter request: what to download and where; see ``DownloadRequest`` for its defaults.
    /// - Returns: the running task.
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/invalidRequest`` when the
    ///   request is unusable (``DownloadRequest/validate()``) or the downloader has shut down.
    public func download(_ request: DownloadRequest) async throws(DownloadError) -> DownloadTask {
        try request.validate()
        let request = request.absolutized
        return try start(DownloadRow(id: .next(), queue: nil, request: request), request: request)
    }

    /// Sends `request`'s body to `sink` as it arrives, without a part file or a record (no
    /// resume): for a pipe such as standard output. Its destination is not used.
    ///
    /// - Returns: the number of bytes sent to `sink`.
    /// - Throws: ``DownloadError``; an error `sink` throws ends the download with it (as an
    ///   ``DownloadError/Kind/io`` error).
    public func stream(
        _ request: DownloadRequest,
        into sink: @escaping @Sendable (UnsafeRawBufferPointer) throws -> Void
    ) async throws(DownloadError) -> Int64 {
        try await runner(request, id: .next(), events: .init()).stream { buffer in
            do { try buffer.withUnsafeReadableBytes { try sink($0) } } catch let error as DownloadError { throw error } catch {
                throw DownloadError.io("cannot write the download: \(error)")
            }
        }
    }

    /// The limit every connection of every download (and upload) shares.
    var sharedLimiter: RateLimiter { globalLimiter }

    /// The network side of one download: its proxy, TLS, credentials and the shared cookies.
    /// A rate limiter of `bytesPerSecond` (0: none) on the downloader's clock.
    func limiter(_ bytesPerSecond: Int64?) -> RateLimiter {
        RateLimiter(bytesPerSecond: bytesPerSecond ?? 0, clock: configuration.clock)
    }

    func transport(for request: DownloadRequest) -> HTTPTransport {
        HTTPTransport(
            clients: clients, cookies: cookies, credentials: credentials, network: request.network, origin: request.url,
            separateConnections: request.connections > 1)
    }

    /// The engine for one attempt of a download whose row is `id`.
    ///
    /// - Parameters:
    ///   - revalidate: it completed before: ask the server whether it changed.
    ///   - lease: the host's connection slots (a manager's per-host limit).
    ///   - validated: the request was checked already (a manager checks it when it is added).
    ///   - limiter: the download's own rate limit, for a caller that changes it while the
    ///     attempt runs; by default one made from the request's ``DownloadRequest/rateLimit``.
    ///   - committingAtMost: how many of the caller's downloads may be waiting at once for
    ///     their files to be put in place (a manager's bound).
    func runner(
        _ request: DownloadRequest, id: DownloadID, revalidate: Bool = false, lease: (any ConnectionLease)? = nil,
        validated: Bool = false, limiter: RateLimiter? = nil, committingAtMost: Int = .max, events: DownloadRunner.RunEvents
    ) -> DownloadRunner {
        var logger = configuration.logger
        // Only where something is logged: setting metadata copies the logger's dictionary.
        if logger.logLevel <= .debug { logger[metadataKey: "download"] = .stringConvertible(id) }
        let limiters = [globalLimiter, limiter ?? request.rateLimit.map { RateLimiter(bytesPerSecond: $0, clock: configuration.clock) }]
        var runner = DownloadRunner(
            request: request, id: id, revalidate: revalidate, store: store, committer: committer, folders: folders, openFolders: openFolders,
            transport: transport(for: request), stallTimeout: configuration.stallTimeout,
            clock: configuration.clock, random: configuration.random,
            limiters: limiters.compactMap { $0 }, lease: lease, logger: logger, observer: configuration.observer, events: events)
        runner.validated = validated
        runner.committingAtMost = committingAtMost
        return runner
    }

    /// Continues a download described by a token from another process (or this one).
    ///
    /// The token's ranges are trusted only as far as the part file still holds them, and
    /// only while the server's validators still match (else the file is fetched again).
    ///
    /// ```swift
    /// let token = try JSONDecoder().decode(ResumeToken.self, from: saved)
    /// let task = try await downloader.download(resuming: token) { $0.connections = 4 }
    /// ```
    ///
    /// - Parameters:
    ///   - token: from ``DownloadTask/pause()``, ``DownloadTask/resumeToken()`` or a
    ///     ``DownloadError/resumeToken``, possibly decoded from JSON.
    ///   - configure: changes the request made from the token (a new URL, headers,
    ///     connections); its destination must stay the token's.
    /// - Returns: the running task.
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/invalidRequest`` when the
    ///   token is of an unknown version, the request is unusable, or the downloader has shut down.
    public func download(
        resuming token: ResumeToken, configure: (inout DownloadRequest) -> Void = { _ in }
    ) async throws(DownloadError) -> DownloadTask {
        guard ResumeToken.readableVersions.contains(token.version) else {
            throw .invalidRequest("resume token version \(token.version) is not supported (this Haul reads \(ResumeToken.readableVersions))")
        }
        var request = DownloadRequest(url: token.url, file: token.destination)
        // The mirrors as they were, unless the token's URL was changed meanwhile.
        if let sources = token.sources, sources.first?.uri == token.url { request.sources = sources }
        request.checksum = token.checksum
        request.pieces = token.pieces
        configure(&request)
        try request.validate()
        let resumed = request.absolutized
        var row = DownloadRow(id: .next(), queue: nil, request: resumed)
        row.status = .paused
        row.path = token.destination
        row.totalLength = token.totalLength
        row.validators = token.validators
        row.sourceValidators = token.sourceValidators ?? [:]
        row.acceptsRanges = true
        row.ranges = token.ranges
        return try start(row, request: resumed)
    }

    /// Records `row` and starts its task, kept until it ends or the downloader shuts down.
    private func start(_ row: DownloadRow, request: DownloadRequest) throws(DownloadError) -> DownloadTask {
        let id = row.id
        let task = DownloadTask(
            store: store, id: id,
            makeRunner: { [self] events in runner(request, id: id, validated: true, events: events) },
            ended: { [weak self] id in _ = self?.tasks.withLock { $0?.removeValue(forKey: id) } })
        let open = tasks.withLock { tasks in
            guard tasks != nil else { return false }
            tasks?[id] = task
            return true
        }
        guard open else { throw .invalidRequest("the downloader has shut down: make a new one") }
        store.writer.insert(row)
        task.start()
        return task
    }
}
