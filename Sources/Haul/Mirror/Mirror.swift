import Foundation
import Synchronization

/// Copies a folder tree served over HTTP (its directory listings) into a local folder, and
/// keeps it in sync: what `haul mirror` and the daemon's mirrors run.
///
/// A run walks the listings below ``Configuration/url`` (never above it, nor to another host)
/// and queues each file on the mirror's own ``manager``, whose queue in the store is named for
/// the URL and the folder. Its rows are the files the mirror wrote:
/// - a file copied before costs one conditional request, and is fetched again only when the
///   server says it changed (its old version stays until the new one is complete);
/// - an interrupted run (a crash, `kill -9`, ``stop()``) continues where it was at the next;
/// - ``Configuration/deletesGone`` removes the files it wrote that the listings no longer
///   hold, and never a file it did not write.
///
/// ```swift
/// let downloader = try Downloader(.init())
/// let mirror = Mirror(
///     .init(url: "https://example.com/pub/", directory: "/srv/pub"), downloader: downloader)
/// let summary = try await mirror.run { event in print(event) }
/// print("\(summary.new) new, \(summary.updated) updated, \(summary.unchanged) unchanged")
/// ```
///
/// One `Mirror` runs once; make another for the next run. It does not shut `downloader` down.
public final class Mirror: Sendable {
    /// What to copy, where, and how.
    public struct Configuration: Sendable {
        /// The folder URL to copy (`http://` or `https://`; a final `/` is added, a query dropped).
        public var url: String
        /// The local folder it is copied into (made if missing), absolute.
        public var directory: String
        /// The request every listing and file is fetched with: its headers, network options,
        /// retries, rate limit and checksum mode (its URL and destination are set per file).
        public var template: DownloadRequest
        /// Folder levels below ``url`` copied (0: only its own files).
        public var maxDepth = 50
        /// Shell globs: only files whose path below ``url`` (or name) matches one are copied,
        /// when any is given.
        public var include: [String] = []
        /// Shell globs: files and folders whose path below ``url`` (or name) matches one are left out.
        public var exclude: [String] = []
        /// Removes the files earlier runs wrote that are gone from the server, and the folders
        /// that leaves empty; never a file the mirror did not write. Nothing is removed when a
        /// listing could not be read.
        public var deletesGone = false
        /// Changes nothing: tells (``Event/wouldFetch(_:)``, ``Event/wouldDelete(_:)``) and counts.
        public var dryRun = false
        /// Listings read at once.
        public var parallelListings = 8
        /// Files downloaded at once.
        public var maxConcurrentDownloads = 16
        /// Connections open to one host at once, across the files.
        public var maxConnectionsPerHost = 16
        /// A checksum file (`SHA256SUMS`) whose digests the files it lists are verified against.
        public var checksums: ChecksumFile?
        /// Where to read ``checksums`` from at the start of each run, when they are not given:
        /// a path, or an `http(s)` URL fetched with ``template``'s network options. A mirror run
        /// again and again (the daemon's) verifies against the list as it stands at each run. A
        /// list that cannot be read fails the run: nothing is fetched unverified.
        public var checksumFile: String?
        /// With ``checksums`` (or ``checksumFile``): a file the list does not name fails, and
        /// nothing is saved for it.
        public var requiresChecksum = false

        /// The tree at `url` into `directory` (made absolute against the current folder).
        public init(url: String, directory: String, template: DownloadRequest? = nil) {
            self.url = Self.folder(url)
            self.directory = FilePaths.absolute(directory)
            var request = template ?? DownloadRequest(url: self.url, directory: self.directory)
            request.url = self.url
            request.destination = .directory(self.directory)
            self.template = request
        }

        /// Whether `url` can be mirrored: an absolute `http://` or `https://` URL with a host.
        public static func isFolderURL(_ url: String) -> Bool {
            let lower = url.lowercased()
            for scheme in ["http://", "https://"] where lower.hasPrefix(scheme) {
                let rest = lower.dropFirst(scheme.count)
                return !rest.isEmpty && !rest.hasPrefix("/")
            }
            return false
        }

        /// The folder URL: without query or fragment, ending with `/`.
        static func folder(_ url: String) -> String {
            var folder = url
            if let end = folder.firstIndex(where: { $0 == "?" || $0 == "#" }) { folder = String(folder[..<end]) }
            return folder.hasSuffix("/") ? folder : folder + "/"
        }

        /// The name of the mirror's queue in the store: one per URL and folder.
        public var queue: String { MirrorQueue.name(url: url, directory: directory) }
    }

    /// What a run meets as it goes, each one line when printed (`description`).
    public enum Event: Sendable, Equatable, CustomStringConvertible {
        /// Dry run: a file a real run would fetch (its path below the URL).
        case wouldFetch(String)
        /// Dry run: a file a real run would delete.
        case wouldDelete(String)
        /// A file removed because it is gone from the server (its path below the URL).
        case deleted(String)
        /// A folder or link the walk did not follow, and why.
        case skipped(String)
        /// Something that went wrong or was refused: a file, a listing, a deletion.
        case problem(String)

        public var description: String {
            switch self {
            case .wouldFetch(let path): "new \(path)"
            case .wouldDelete(let path): "delete \(path)"
            case .deleted(let path): "deleted \(path)"
            case .skipped(let what): "skipped \(what)"
            case .problem(let message): message
            }
        }
    }

    /// The mirror's configuration.
    public let configuration: Configuration
    /// The mirror's own queue: its downloads, their progress and events, and a way to pause them.
    public let manager: DownloadManager
    private let downloader: Downloader
    private let stopped = Mutex(false)
    /// The run's conditional requests, which ``stop()`` cancels.
    private let checking = Mutex<Task<Void, Never>?>(nil)

    /// A mirror run with `downloader`, whose state folder keeps the mirror's records.
    public init(_ configuration: Configuration, downloader: Downloader) {
        self.configuration = configuration
        self.downloader = downloader
        manager = DownloadManager(
            downloader: downloader,
            configuration: .init(
                maxConcurrentDownloads: configuration.maxConcurrentDownloads,
                maxConnectionsPerHost: configuration.maxConnectionsPerHost, queue: configuration.queue))
    }

    /// Stops the run as a crash would: listings are no longer read, every transfer stops with
    /// its written bytes recorded, and ``run(_:)`` returns a summary with
    /// ``Summary/interrupted`` set. The next run continues.
    public func stop() async {
        stopped.withLock { $0 = true }
        checking.withLock { $0?.cancel() }
        await manager.shutdown()
    }

    /// Whether ``stop()`` was called.
    var isStopped: Bool { stopped.withLock { $0 } }

    /// Runs the mirror once: reads the listings, fetches what is new or changed, waits for the
    /// files, then (with ``Configuration/deletesGone``) removes what is gone.
    ///
    /// - Parameter events: told of each file fetched in a dry run, deleted, skipped or failed,
    ///   as it happens.
    /// - Returns: what became of the tree's files; their errors are in ``Summary/errors``.
    /// - Throws: a ``DownloadError`` when the mirror's records cannot be read (the store), or
    ///   its ``Configuration/checksumFile`` cannot be fetched or read.
    public func run(_ events: @escaping @Sendable (Event) -> Void = { _ in }) async throws(DownloadError) -> Summary {
        var configuration = configuration
        do throws(DownloadError) {
            if configuration.checksums == nil, let location = configuration.checksumFile {
                configuration.checksums = try await ChecksumFile.load(location, template: configuration.template, downloader: downloader)
            }
        } catch {
            await manager.shutdown()
            throw error
        }
        // What earlier runs wrote, a few columns of each file, is read while the first listings
        // are fetched: the checks wait for nothing else. The whole rows (5,000 in 18 ms) are
        // read once it is in (read beside it, they held it up from 6 ms to 16), and put in the
        // manager's book (9 ms more) while the first checks go out.
        let (downloader, manager, settled) = (downloader, manager, configuration)
        let failed = RecordsFailed()
        let prepared = Task { () async -> Result<MirrorRun, DownloadError> in
            do throws(DownloadError) {
                return .success(MirrorRun(configuration: settled, earlier: try await manager.storedFiles(), events: events))
            } catch {
                failed.set()
                return .failure(error)
            }
        }
        // Unfinished files of an earlier run continue now (not in a dry run, which changes
        // nothing). Adding a file meanwhile is safe: the manager then reads its row itself.
        let restored = Task { () async -> DownloadError? in
            guard !settled.dryRun, case .success = await prepared.value else { return nil }
            do throws(DownloadError) { try await manager.restore(rows: try await manager.storedRows()) } catch {
                failed.set()
                return error
            }
            return nil
        }
        var walk = TreeWalk(start: configuration.url, template: configuration.template)
        walk.maxDepth = configuration.maxDepth
        walk.parallelListings = configuration.parallelListings
        walk.accepts = { [include = configuration.include, exclude = configuration.exclude] path, isDirectory in
            Glob.accepts(path, isDirectory: isDirectory, include: include, exclude: exclude)
        }
        let stopped: @Sendable () -> Bool = { [weak self] in self?.isStopped ?? true }
        walk.isStopped = { stopped() || failed.isSet }
        let checks = Task {
            guard case .success(let run) = await prepared.value else { return }
            await run.check(
                with: downloader, manager: manager,
                limit: min(settled.maxConcurrentDownloads, settled.maxConnectionsPerHost), isStopped: stopped)
        }
        checking.withLock { $0 = checks }
        if isStopped { checks.cancel() }
        let report = await walk.run(with: downloader) { files in
            if case .success(let run) = await prepared.value { await run.queue(files, manager: manager) }
        }
        let ready = await prepared.value
        if case .success(let run) = ready { run.finishChecks() }
        await checks.value
        // A stop shuts the manager down, which may end its restore: the run is then interrupted, not failed.
        let restoring = await restored.value
        let run: MirrorRun
        do throws(DownloadError) {
            run = try ready.get()
            if let restoring, !isStopped { throw restoring }
        } catch {
            await manager.shutdown()
            throw error
        }
        for (listing, error) in report.failures {
            events(.problem("cannot read the listing \(URLRedaction.redact(listing)): \(error.message)"))
        }
        for skipped in report.skipped { events(.skipped(URLRedaction.redact(skipped))) }
        await manager.waitUntilIdle()
        var summary = await run.summarize(manager: manager, interrupted: isStopped)
        summary.listingsRead = report.listingsRead
        if isStopped {
            summary.interrupted = true
            return summary
        }
        if configuration.deletesGone {
            if report.failures.isEmpty {
                summary.deleted = await run.deleteGone(manager: manager)
            } else {
                events(.problem("nothing deleted: \(report.failures.count) listing(s) could not be read, so what is gone is not known"))
            }
        }
        summary.failed += report.failures.count
        summary.errors += report.failures.map(\.error)
        await manager.shutdown()
        return summary
    }
}

/// Set when the mirror's records could not be read or restored: its walk then stops.
private final class RecordsFailed: Sendable {
    private let flag = Atomic(false)
    var isSet: Bool { flag.load(ordering: .relaxed) }
    func set() { flag.store(true, ordering: .relaxed) }
}
