import Foundation
import Logging

/// Runs one attempt of one download to the end: first contact, pick and lock the
/// destination, transfer with retries, verify, commit. One value per attempt.
struct DownloadRunner: Sendable {
    /// What to fetch; a run whose first source fails at the first contact goes on without it.
    var request: DownloadRequest
    /// The download's row in the store.
    let id: DownloadID
    /// The download completed before: ask the server whether it changed (one conditional
    /// request) instead of downloading it again.
    let revalidate: Bool
    let store: Store
    let committer: FileCommitter
    let folders: FolderListings
    let openFolders: DownloadFolders
    let transport: HTTPTransport
    let stallTimeout: Duration
    let clock: any Clock<Duration>
    let random: @Sendable () -> Double
    /// Rate limits this download's bytes flow through (global, then its own).
    let limiters: [RateLimiter]
    /// The host's connection slots, when a ``DownloadManager`` runs this download.
    let lease: (any ConnectionLease)?
    let logger: Logger
    /// Told of each retry and of the bytes written (``EngineObserver``).
    let observer: EngineObserver
    let events: RunEvents
    /// The request was checked when it was added (a manager's); else the run checks it.
    var validated = false
    /// How many of its owner's downloads may be waiting at once for their files to be put in
    /// place (a manager's bound): the committer writes a batch that holds that many at once.
    var committingAtMost = Int.max

    /// Callbacks from a run to whoever owns it.
    struct RunEvents: Sendable {
        var progress: @Sendable (DownloadProgress) -> Void = { _ in }
        /// A passing condition worth showing (a retry, a wait for a lock).
        var note: @Sendable (String) -> Void = { _ in }
        /// The destination is known and its part file exists and is locked.
        var resolved: @Sendable (_ destination: String) -> Void = { _ in }
        /// Every byte is in the part file; only putting it at its final name is left. A manager
        /// lets another download start from here (the commit waits for that much).
        var transferred: @Sendable () async -> Void = {}
    }

    func run() async throws(DownloadError) -> DownloadResult {
        if !validated { try request.validate() }
        var retry = RetryPolicy(maxTries: request.maxTries, baseWait: request.retryWait)
        if revalidate, let result = try await revalidated(&retry) { return result }
        // A download with several sources does not fail with its first: a source that fails
        // the first contact is dropped for this run (and said so), and the next one is asked.
        var runner = self
        // A slot on each later first source's host, held while this run uses it (the manager's
        // slot for the download stays on the first URL's host).
        var borrowed: [String] = []
        defer { for host in borrowed { lease?.release(1, host: host) } }
        while true {
            var failed: DownloadError?
            if let result = try await runner.fromFirstSource(&retry, failed: &failed) { return result }
            guard let failed, failed.kind != .cancelled else { throw failed ?? .cancelled }
            let source = runner.request.sources.removeFirst()
            logger.debug("source dropped", metadata: ["source": "\(source.displayURI)", "reason": "\(failed.message)"])
            events.note("dropped source \(source.displayURI): \(failed.message)")
            retry = RetryPolicy(maxTries: request.maxTries, baseWait: request.retryWait)
            let host = HTTPURL.connectionHost(of: runner.request.url)
            if lease?.acquire(upTo: 1, host: host) == 1 { borrowed.append(host) }
        }
    }

    /// The run from the first contact on, with the first source. With other sources left, a
    /// first contact that fails is not retried: `failed` tells why, and nil is returned.
    private mutating func fromFirstSource(_ retry: inout RetryPolicy, failed: inout DownloadError?) async throws(DownloadError) -> DownloadResult? {
        // The name the URL gives a file saved into a folder, worked out once.
        let urlName: String? = if case .directory = request.destination { DestinationResolver.name(of: request.url) } else { nil }
        var streamFirst = true
        // A bounded number of passes: waiting for another process's lock may end with its
        // file complete, which changes what the destination should be.
        for _ in 0..<3 {
            let first: FirstContact
            if request.sources.count > 1 {
                do {
                    first = try await firstContact(streamFirst: streamFirst, urlName: urlName)
                } catch {
                    failed = error
                    return nil
                }
            } else {
                first = try await retrying(&retry) { () async throws(DownloadError) in
                    try await self.firstContact(streamFirst: streamFirst, urlName: urlName)
                }
            }
            if request.followMetalink { follow(first.probe) }
            var resolver = DestinationResolver(overwrite: request.overwrite, url: request.url)
            let wanted = try resolver.path(
                for: request.destination, suggestedName: first.probe.suggestedName, url: first.probe.url,
                urlName: first.probe.url == request.url ? .some(urlName) : nil)
            // A streaming answer means the first contact found nothing where the URL's name
            // leads (a server-given name may lead elsewhere).
            var lookedAt = first.answer != nil && wanted == wantedFromURL(urlName)
            let folder = try openFolder(of: wanted)
            var outcome = try resolver.resolve(wanted, remoteLength: first.probe.totalLength, seenFree: lookedAt, folderReady: folder != nil)
            if lookedAt, outcome == .download(wanted), !nothingOnDisk(urlName: urlName) {
                // Another download of this run put its file there since the first contact
                // looked (it held the name until then; now this one does, so nothing more can
                // land there): resolved as any file found at the name.
                PathClaims.release(wanted)
                lookedAt = false
                outcome = try resolver.resolve(wanted, remoteLength: first.probe.totalLength, folderReady: true)
            }
            // A file of the remote's size is this download's unless the store knows it as
            // another's: two URLs of a list whose files share a name and a size (signatures,
            // checksum files) each keep their own. Bounded: each pass rules out one more path.
            while case .alreadyComplete(let path, _) = outcome, try await isOthersFile(path) {
                resolver.othersFiles.insert(path)
                outcome = try resolver.resolve(wanted, remoteLength: first.probe.totalLength, folderReady: true)
            }
            switch outcome {
            case .alreadyComplete(let path, let bytes):
                logger.debug("already complete", metadata: ["path": "\(path)"])
                return DownloadResult(path: path, bytes: bytes, bytesFetched: 0, wasAlreadyComplete: true)
            case .download(let path):
                // Claimed by the resolver until the file is in place (or not).
                defer { PathClaims.release(path) }
                if let answer = first.answer {
                    // The answer is already streaming: go on only if nothing is in the way.
                    guard lookedAt || !DestinationResolver.exists(path + ".part"),
                        let part = try partNow(of: path, in: folder, length: first.probe.totalLength)
                    else {
                        streamFirst = false
                        continue
                    }
                    events.resolved(path)
                    return try await transfer(to: path, part: part, probe: first.probe, first: answer, replacing: false, retry: &retry)
                }
                guard let part = try await lock(partOf: path, in: folder) else { continue }
                // From here on the part file exists: a cancel must know where to delete it.
                events.resolved(path)
                return try await transfer(to: path, part: part, probe: first.probe, first: nil, replacing: false, retry: &retry)
            }
        }
        throw .io("another process keeps replacing \(request.url)'s destination; try again")
    }

    /// Whether the store knows the file at `path` as another download's: a row there, none of
    /// them this download's or of one of its URLs. (A file no row knows is the user's, rule 4.)
    private func isOthersFile(_ path: String) async throws(DownloadError) -> Bool {
        let rows = try await store.rows(path: path)
        if rows.isEmpty { return false }
        let urls = Set([request.url] + request.sources.map(\.uri))
        return !rows.contains { $0.id == id || urls.contains($0.url) }
    }

    /// Takes the mirrors a first answer names in `Link: <…>; rel=duplicate` headers as more
    /// sources of this run (after the request's own), and its `Digest` as the checksum when the
    /// request has none (RFC 6249).
    private mutating func follow(_ probe: ProbeResult) {
        let named = MetalinkHTTP.duplicates(inLinkHeaders: probe.links, base: probe.url)
        let known = Set(request.sources.map(\.uri))
        let more = named.filter { !known.contains($0.uri) }.prefix(DownloadRequest.maxSources - request.sources.count)
        if !more.isEmpty {
            request.sources += more
            events.note("the server names \(more.count) mirror\(more.count == 1 ? "" : "s")")
        }
        if request.checksum == nil, let digest = MetalinkHTTP.checksum(inDigestHeaders: probe.digests) { request.checksum = digest }
    }

    /// Where the download goes by the URL alone (what ``nothingOnDisk(urlName:)`` looked at).
    func wantedFromURL(_ urlName: String?) -> String? {
        switch request.destination {
        case .file(let path): FilePaths.absolute(path)
        case .directory(let directory): urlName.map { FilePaths.absolute(directory) + "/" + $0 }
        }
    }

    /// The folder of `path` held open beneath the request's confinement, made if missing; nil
    /// for a download that is not confined.
    ///
    /// - Throws: ``DownloadError`` when the folder leads outside the confinement (a link
    ///   planted since the download was added) or cannot be made.
    func openFolder(of path: String) throws(DownloadError) -> DownloadFolder? {
        guard let root = request.confinement else { return nil }
        return try openFolders.folder(FilePaths.folder(of: path), beneath: root)
    }

    /// Opens and locks `path.part`, waiting while another process holds it. Returns nil
    /// when the file it waited for was renamed away (that process finished).
    func lock(partOf path: String, in folder: DownloadFolder?) async throws(DownloadError) -> PartFile? {
        let part = try PartFile(path: path + ".part", in: folder)
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

    /// Bodies announced smaller than this start in a part file without a name: at most speeds
    /// they are complete before the first checkpoint would name it, and go straight to their
    /// final name (one directory entry instead of two).
    static let unnamedPartLimit: Int64 = 1 << 20

    /// The part file for a body of `length` bytes that is already arriving: without a name if
    /// the body is small and the system can make one, else `path.part` locked if nobody holds
    /// it; nil when somebody does.
    func partNow(of path: String, in folder: DownloadFolder?, length: Int64?) throws(DownloadError) -> PartFile? {
        if let length, length < Self.unnamedPartLimit, let part = PartFile.unnamed(path: path + ".part", in: folder) { return part }
        return try lockNow(partOf: path, in: folder)
    }

    /// Opens and locks `path.part` if nobody holds it; nil otherwise.
    func lockNow(partOf path: String, in folder: DownloadFolder?) throws(DownloadError) -> PartFile? {
        let part = try PartFile(path: path + ".part", in: folder)
        return try part.tryLock() == nil ? part : nil
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
            throw error.with(url: request.displayURL)
        }
        observer.retrying(error)
        logger.debug("retrying", metadata: ["delay": "\(delay)", "error": "\(error)"])
        events.note("retrying in \(delay.formattedSeconds): \(error.message)")
        do { try await clock.sleep(for: delay) } catch { throw .cancelled }
    }
}

/// A claim on hosts' connection slots: a segmented transfer asks it for extra connections, on
/// its own host or on a mirror's.
protocol ConnectionLease: Sendable {
    /// Takes up to `wanted` more slots on `host`; returns how many it got (0 when none is free).
    func acquire(upTo wanted: Int, host: String) -> Int
    /// Takes one slot on `host` if one is free and no download waits for the host; `wanting`:
    /// how many more the transfer would take (in a fleet, what it asks the others for when refused).
    func acquireSpare(host: String, wanting: Int) -> Bool
    func release(_ count: Int, host: String)
}
