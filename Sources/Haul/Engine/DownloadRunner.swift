import Foundation
import Logging

/// Runs one download to the end: probe, pick and lock the destination, transfer with
/// retries, verify, commit. One value per run; ``DownloadTask`` starts one per resume.
struct DownloadRunner: Sendable {
    let request: DownloadRequest
    let store: Store
    let transport: HTTPTransport
    let stallTimeout: Duration
    let clock: any Clock<Duration>
    let random: @Sendable () -> Double
    /// Rate limits this download's bytes flow through (global, then its own).
    let limiters: [RateLimiter]
    /// The host's connection slots, when a ``DownloadManager`` runs this download.
    let lease: HostLease?
    let logger: Logger
    let events: RunEvents

    /// Callbacks from a run to the task that owns it.
    struct RunEvents: Sendable {
        var progress: @Sendable (DownloadProgress) -> Void
        /// A passing condition worth showing (a retry, a wait for a lock).
        var note: @Sendable (String) -> Void
        /// The destination and store id are known and the part file is locked.
        var resolved: @Sendable (_ destination: String) -> Void
    }

    func run() async throws(DownloadError) -> DownloadResult {
        guard let components = URLComponents(string: request.url),
              let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
              let host = components.host, !host.isEmpty else {
            throw .invalidRequest("malformed URL: expected http:// or https:// followed by a host")
        }
        var retry = RetryPolicy(maxTries: request.maxTries, baseWait: request.retryWait)
        // A bounded number of passes: waiting for another process's lock may end with its
        // file complete, which changes what the destination should be.
        for _ in 0..<3 {
            let probe = try await retrying(&retry) { () async throws(DownloadError) in try await self.probe() }
            let resolver = DestinationResolver(overwrite: request.overwrite)
            let wanted = try resolver.path(for: request.destination, suggestedName: probe.suggestedName, url: probe.url)
            switch try resolver.resolve(wanted, remoteLength: probe.totalLength) {
            case .alreadyComplete(let path, let bytes):
                logger.debug("already complete", metadata: ["path": "\(path)"])
                return DownloadResult(path: path, bytes: bytes, bytesFetched: 0, wasAlreadyComplete: true)
            case .download(let path):
                guard let part = try await lock(partOf: path) else { continue }
                // From here on the part file exists: a cancel must know where to delete it.
                events.resolved(path)
                return try await transfer(to: path, part: part, probe: probe, retry: &retry)
            }
        }
        throw .io("another process keeps replacing \(request.url)'s destination; try again")
    }

    /// Opens and locks `path.part`, waiting while another process holds it. Returns nil
    /// when the file it waited for was renamed away (that process finished).
    private func lock(partOf path: String) async throws(DownloadError) -> PartFile? {
        let part = try PartFile(path: path + ".part")
        var waited = false
        while let holder = try part.tryLock() {
            if !waited {
                logger.debug("waiting for lock", metadata: ["holder": "\(holder)"])
                events.note("waiting: process \(holder) is downloading \(path)")
            }
            waited = true
            do { try await clock.sleep(for: .milliseconds(200)) } catch { throw .cancelled }
        }
        return waited && !part.isStillAtPath() ? nil : part
    }

    /// Runs `operation` until it succeeds, fails for good, or the retry budget is spent.
    func retrying<T>(_ retry: inout RetryPolicy, _ operation: () async throws(DownloadError) -> T) async throws(DownloadError) -> T {
        while true {
            do {
                return try await operation()
            } catch {
                try await wait(&retry, after: error, madeProgress: false)
            }
        }
    }

    /// Waits until every rate limit lets `bytes` more through.
    func throttle(_ bytes: Int) async throws(DownloadError) {
        for limiter in limiters { try await limiter.acquire(bytes) }
    }

    /// Whether the byte loops need to call ``throttle(_:)`` at all; without a limit set they
    /// skip it (the shared limiter is always there, at rate 0 until someone sets one).
    var isThrottled: Bool { limiters.contains { $0.bytesPerSecond > 0 } }

    /// Sleeps before the next try, or rethrows when there is none.
    func wait(_ retry: inout RetryPolicy, after error: DownloadError, madeProgress: Bool) async throws(DownloadError) {
        if error.kind == .cancelled || Task.isCancelled { throw .cancelled }
        guard let delay = retry.delay(after: error, madeProgress: madeProgress, jitter: random()) else {
            throw error.with(url: request.url)
        }
        logger.debug("retrying", metadata: ["delay": "\(delay)", "error": "\(error)"])
        events.note("retrying in \(delay.formattedSeconds): \(error.message)")
        do { try await clock.sleep(for: delay) } catch { throw .cancelled }
    }
}
