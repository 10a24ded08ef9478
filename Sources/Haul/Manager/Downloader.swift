import AsyncHTTPClient
import Foundation
import Logging

/// The engine's entry point: an HTTP client and the store, shared by the downloads it starts.
///
/// ```swift
/// try await Downloader.withDownloader(.init()) { downloader in
///     let task = downloader.download(DownloadRequest(url: "https://example.com/f.iso", directory: "."))
///     for await progress in task.progress { print(progress.bytesDone) }
///     let result = try await task.result()
///     print(result.path)
/// }
/// ```
public final class Downloader: Sendable {
    /// Settings shared by every download of one ``Downloader``.
    public struct Configuration: Sendable {
        /// The folder holding the store (`state.sqlite`).
        public var stateDirectory: String
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
        return (NSHomeDirectory() as NSString).appendingPathComponent(".local/state/haul")
    }

    let configuration: Configuration
    let store: Store
    private let client: HTTPClient
    /// Shared by every download; without a limit it lets everything through at the cost of
    /// one atomic load per read.
    private let globalLimiter: RateLimiter

    /// Opens the store. Call ``shutdown()`` when done, or use ``withDownloader(_:_:)``.
    ///
    /// - Throws: ``DownloadError`` when the state folder or the store cannot be opened.
    public init(_ configuration: Configuration) throws(DownloadError) {
        self.configuration = configuration
        store = try Store(directory: configuration.stateDirectory)
        client = HTTPTransport.makeClient(stallTimeout: configuration.stallTimeout, rateLimit: configuration.rateLimit)
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

    /// Closes the HTTP client. Downloads still running fail.
    public func shutdown() async throws {
        try await client.shutdown()
    }

    /// Runs `body` with a downloader and shuts it down afterwards, whatever happens.
    public static func withDownloader<Result: Sendable>(
        _ configuration: Configuration, _ body: (Downloader) async throws -> Result
    ) async throws -> Result {
        let downloader = try Downloader(configuration)
        do {
            let result = try await body(downloader)
            try await downloader.shutdown()
            return result
        } catch {
            try? await downloader.shutdown()
            throw error
        }
    }

    /// Starts downloading. The task runs until it completes, fails, or is paused or cancelled.
    public func download(_ request: DownloadRequest) -> DownloadTask {
        download(request, lease: nil)
    }

    /// Starts downloading, taking extra connections from `lease` (a manager's per-host limit).
    func download(_ request: DownloadRequest, lease: HostLease?) -> DownloadTask {
        let task = DownloadTask(store: store) { [self] events in
            var logger = configuration.logger
            logger[metadataKey: "url"] = "\(request.url)"
            let limiters = [globalLimiter, request.rateLimit.map { RateLimiter(bytesPerSecond: $0, clock: configuration.clock) }]
            return DownloadRunner(request: request, store: store, transport: HTTPTransport(client: client),
                                  stallTimeout: configuration.stallTimeout, clock: configuration.clock,
                                  random: configuration.random, limiters: limiters.compactMap { $0 },
                                  lease: lease, logger: logger, events: events)
        }
        task.start()
        return task
    }

    /// Continues a download described by a token from another process (or this one).
    ///
    /// The token's ranges are trusted only as far as the part file still holds them.
    /// - Throws: ``DownloadError`` when the token is of an unknown version or the store fails.
    public func download(resuming token: ResumeToken, configure: (inout DownloadRequest) -> Void = { _ in }) async throws(DownloadError) -> DownloadTask {
        guard token.version == 1 else { throw .invalidRequest("resume token version \(token.version) is not supported") }
        let now = Date()
        let existing = try? await store.record(destination: token.destination)
        let record = DownloadRecord(
            id: existing?.id ?? token.id, destination: token.destination, url: token.url,
            totalLength: token.totalLength, etag: token.validators.etag, lastModified: token.validators.lastModified,
            acceptsRanges: true, ranges: token.ranges, status: .paused, lastError: nil,
            checksum: token.checksum?.description, createdAt: existing?.createdAt ?? now, updatedAt: now)
        do { try await store.save(record) } catch { throw .io("cannot use the store \(store.path): \(error)") }
        var request = DownloadRequest(url: token.url, file: token.destination)
        request.checksum = token.checksum
        configure(&request)
        return download(request)
    }
}
