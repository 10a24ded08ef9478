import Foundation
import Synchronization

/// One run of a ``Mirror``: queues the files the walk finds, then tells what became of them
/// and removes what is gone.
final class MirrorRun: Sendable {
    private let configuration: Mirror.Configuration
    private var root: String { configuration.directory }
    /// The rows of the mirror's downloads from earlier runs, by file: for a completed one, what
    /// was saved and the validators to ask with.
    private let earlier: [String: DownloadRow.File]
    private let events: @Sendable (Mirror.Event) -> Void
    /// Files copied before, each to be asked about with one conditional request (``check(with:manager:limit:isStopped:)``),
    /// a listing's at a time.
    private let checks: AsyncStream<[Check]>
    private let checksContinuation: AsyncStream<[Check]>.Continuation
    /// The template with its confinement: every file's request starts as a copy of it and
    /// shares its options (one copy of them, checked once), instead of a copy of its own made
    /// when each file was confined.
    private let fileTemplate: DownloadRequest

    /// A file copied before, unchanged on disk since, to ask the server about.
    struct Check: Sendable {
        var request: DownloadRequest
        var row: DownloadRow.File
        var listed: Bool
    }

    private struct State {
        /// Files the listings hold now.
        var seen = Set<String>()
        /// This run's downloads, and whether each file was copied before (an update, if fetched).
        var queued: [(id: DownloadManager.ID, copiedBefore: Bool, listed: Bool)] = []
        var summary = Mirror.Summary()
        /// Listed names matched by a file's name alone, and the path that matched each: a
        /// second file of the same name is ambiguous.
        var matchedByName: [String: String] = [:]
        /// Problems told that are told once: the store's failure, whichever batch meets it.
        var toldOnce = Set<String>()
    }
    private let state = Mutex(State())
    /// Whether the server answers pipelined `HEAD`s: false once a pipeline left most of its
    /// requests unanswered (a server that closes after each answer, or one that drops what
    /// follows the first request and leaves it to the stall timeout); each file is then asked
    /// alone, so that one such wave is all the run loses.
    private let pipelining = Atomic<Bool>(true)

    init(
        configuration: Mirror.Configuration, earlier: [DownloadRow.File], events: @escaping @Sendable (Mirror.Event) -> Void
    ) {
        self.configuration = configuration
        var byFile: [String: DownloadRow.File] = [:]
        byFile.reserveCapacity(earlier.count)
        for row in earlier { byFile[row.destination] = row }
        self.earlier = byFile
        self.events = events
        (checks, checksContinuation) = AsyncStream.makeStream()
        var template = configuration.template
        template.confinement = configuration.template.confinement ?? configuration.directory
        fileTemplate = template
    }

    /// Queues one listing's files into the manager (or, dry, says what would be fetched).
    func queue(_ files: [TreeWalk.File], manager: DownloadManager) async {
        let dryRun = configuration.dryRun
        var requests: [DownloadRequest] = []
        var copiedBefore: [Bool] = []
        var listed: [Bool] = []
        var checks: [Check] = []
        let folders = FolderLookup()
        for file in files {
            let path = root + "/" + file.path
            let fresh = state.withLock { $0.seen.insert(path).inserted }
            guard fresh else { continue }
            let before = earlier[path]
            let info = folders.info(path)
            if before == nil, info != nil {
                // Not this mirror's file: never overwritten, never deleted.
                events(.problem("skipped \(path): a file this mirror did not write is in the way"))
                state.withLock { $0.summary.skipped += 1 }
                continue
            }
            let checksum = listedChecksum(file.path)
            if let checksums = configuration.checksums, checksum == nil {
                state.withLock { $0.summary.unlisted += 1 }
                if configuration.requiresChecksum, !dryRun {
                    let error = checksums.notListed(file.path)
                    events(.problem(error.message))
                    state.withLock { state in
                        state.summary.failed += 1
                        state.summary.errors.append(error)
                    }
                    continue
                }
            }
            if dryRun {
                if before?.status != .completed {
                    events(.wouldFetch(file.path))
                    state.withLock { $0.summary.new += 1 }
                } else {
                    state.withLock { $0.summary.toCheck += 1 }
                }
                continue
            }
            // The tree stays inside DIR, whatever links are planted there while it runs (or
            // inside the folder the template is held to, such as a daemon's, which DIR is in).
            var request = fileTemplate
            request.url = file.url
            request.destination = .file(path)
            request.checksum = checksum
            // Only a file copied from this URL: another URL's file is fetched, not compared.
            if let row = before, row.status == .completed, row.url == request.url, !row.validators.isEmpty, let info, row.isAsWritten(info) {
                // Copied before and untouched since: one conditional HEAD, off the manager,
                // says whether it changed.
                checks.append(Check(request: request, row: row, listed: checksum != nil))
                continue
            }
            requests.append(request)
            copiedBefore.append(before?.status == .completed)
            listed.append(checksum != nil)
        }
        if !checks.isEmpty { checksContinuation.yield(checks) }
        await add(requests, copiedBefore: copiedBefore, listed: listed, manager: manager)
    }

    /// Whether the file at `path` (not a link) is still the one a completed row says the
    /// mirror wrote (``DownloadRow/isAsWritten(_:)``).
    static func isAsWritten(_ row: DownloadRow.File, path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && row.isAsWritten(info)
    }

    /// Asks the server about each file copied before as the walk finds it (one conditional
    /// `HEAD`), a few files of a listing at a time pipelined on one connection
    /// (``Downloader/areUnchanged(_:)``), at most `limit` connections at once and each on a
    /// connection slot of the manager's hosts: an unchanged one (`304`) costs nothing more,
    /// and its row is not written; a changed one (or one the server cannot answer for, or whose
    /// HEAD it refuses) goes to the manager, which asks again with a conditional GET and
    /// fetches it (its old copy stays until the new one is complete). No body is sent only to
    /// be dropped.
    /// Returns once ``finishChecks()`` was called and every file was asked about.
    func check(with downloader: Downloader, manager: DownloadManager, limit: Int, isStopped: @escaping @Sendable () -> Bool) async {
        // Through a proxy (or over HTTP/2) each file is asked alone, as many at once as before.
        let pipelinable = downloader.pipelinesHEADs(fileTemplate)
        await withTaskGroup(of: Void.self) { group in
            var running = 0
            for await batch in checks {
                var start = batch.startIndex
                while start < batch.endIndex, !isStopped() {
                    if running >= limit {
                        await group.next()
                        running -= 1
                    }
                    // Cut once a slot is free: a pipeline that just failed has had its say.
                    let depth = pipelinable && pipelining.load(ordering: .relaxed) ? Self.pipelineDepth : 1
                    // A pipeline's files are of one host (a mirror allowed elsewhere has others).
                    let host = HostConnections.host(of: batch[start].request.url)
                    var end = start + 1
                    while end < batch.endIndex, end - start < depth, HostConnections.host(of: batch[end].request.url) == host {
                        end += 1
                    }
                    let files = Array(batch[start..<end])
                    start = end
                    running += 1
                    group.addTask {
                        await self.ask(about: files, host: host, with: downloader, manager: manager, isStopped: isStopped)
                    }
                }
            }
        }
    }

    /// How many files' `HEAD`s go pipelined on one connection: a listing's, most often. On the
    /// benchmark's tree (listings of 25 files), an unchanged resync took 340 ms with 4, 302 ms
    /// with 8, 282 ms with 16 and 248 ms with 32 (404 ms one at a time).
    static let pipelineDepth = 32

    /// Asks about `files` (of `host`) on one connection slot: pipelined, then alone for those the
    /// pipeline did not settle.
    private func ask(
        about files: [Check], host: String, with downloader: Downloader, manager: DownloadManager, isStopped: @escaping @Sendable () -> Bool
    ) async {
        guard await Self.slot(on: manager.hosts, host: host, isStopped: isStopped) else { return }
        var unchanged: [Bool?]
        do throws(DownloadError) {
            unchanged =
                files.count == 1
                ? [nil]
                : try await downloader.areUnchanged(files.map { ($0.request, $0.row.validators, $0.row.resultBytes ?? -1) })
        } catch {
            // The manager asks again (with its retries) and reports what fails.
            unchanged = Array(repeating: false, count: files.count)
        }
        if files.count > 1, unchanged.count(where: { $0 == nil }) * 2 > files.count { pipelining.store(false, ordering: .relaxed) }
        for (index, check) in files.enumerated() where unchanged[index] == nil && !isStopped() {
            do throws(DownloadError) {
                unchanged[index] = try await downloader.isUnchanged(
                    check.request, since: check.row.validators, bytes: check.row.resultBytes ?? -1)
            } catch {
                unchanged[index] = false
            }
        }
        // Given back before anything is added, and said to the manager when it has a
        // download set aside while the checks held the host's slots: it starts now.
        if manager.hosts.release(1, host: host) { await manager.hostSlotsFreed() }
        guard !isStopped() else { return }
        let changed = files.indices.filter { unchanged[$0] != true }
        state.withLock { $0.summary.unchanged += files.count - changed.count }
        guard !changed.isEmpty else { return }
        await add(changed.map { files[$0].request }, copiedBefore: changed.map { _ in true }, listed: changed.map { files[$0].listed }, manager: manager)
    }

    /// No more files to ask about: ``check(with:manager:limit:isStopped:)`` returns once the
    /// ones given are answered.
    func finishChecks() { checksContinuation.finish() }

    /// Waits for a free connection slot of `host`, which the caller then holds until it
    /// releases it; false (no slot) once the run is stopped.
    private static func slot(on hosts: HostConnections, host: String, isStopped: @Sendable () -> Bool) async -> Bool {
        while hosts.acquire(upTo: 1, host: host) == 0 {
            if isStopped() { return false }
            try? await Task.sleep(for: .milliseconds(2))
        }
        if isStopped() {
            hosts.release(1, host: host)
            return false
        }
        return true
    }

    /// Queues files on the manager; `copiedBefore` and `listed` go with each.
    private func add(_ requests: [DownloadRequest], copiedBefore: [Bool], listed: [Bool], manager: DownloadManager) async {
        guard !requests.isEmpty else { return }
        do throws(DownloadError) {
            // Copied before: one conditional request says whether it changed.
            let added = try await manager.add(contentsOf: requests, replacing: true, requeueExisting: true)
            state.withLock { state in
                for (index, result) in added.enumerated() {
                    switch result {
                    case .success(let id): state.queued.append((id, copiedBefore[index], listed[index]))
                    case .failure(let error):
                        events(.problem("\(URLRedaction.redact(requests[index].url)): \(error.message)"))
                        state.summary.failed += 1
                        state.summary.errors.append(error)
                    }
                }
            }
        } catch {
            if state.withLock({ $0.toldOnce.insert(error.description).inserted }) { events(.problem(error.description)) }
            state.withLock { state in
                state.summary.failed += requests.count
                state.summary.errors.append(error)
            }
        }
    }

    /// The digest `--checksum-file` lists for the file at `path` (below the start URL): the one
    /// under that path, else the one under its name alone when the list names no other file so
    /// and no other file of the tree took it (the file of that name in URL's own folder, whose
    /// listing is read first, or the first one found below).
    private func listedChecksum(_ path: String) -> Checksum? {
        guard let file = configuration.checksums, let checksum = file.checksum(forPath: path) else { return nil }
        let byNameOnly = file.matchesByBaseNameOnly(path)
        // A name listed without a folder that matches exactly: a file of URL's own folder.
        guard byNameOnly || !path.contains("/") else { return checksum }
        let name = ChecksumFile.baseName(path)
        let first = state.withLock { state in
            if let claimed = state.matchedByName[name] { return claimed }
            state.matchedByName[name] = path
            return path
        }
        guard first == path || !byNameOnly else {
            events(.problem("\(path) is not verified: the checksum file lists \(name) alone, and \(first) matched it first"))
            return nil
        }
        return checksum
    }

    /// What became of this run's downloads.
    /// (After a stop, `interrupted`: a file that did not finish is not a failure, and is not
    /// reported; the next run continues it.)
    ///
    /// A failure every file meets alike is told a few times, then counted: a full disk or a
    /// read-only folder fails thousands of files, and the store's failure fails them all; that
    /// one is told once.
    func summarize(manager: DownloadManager, interrupted: Bool = false) async -> Mirror.Summary {
        let (queued, partial) = state.withLock { ($0.queued, $0.summary) }
        var summary = partial
        let storeFailure = await manager.failure
        var tally = DownloadError.Reason.Tally()
        for (id, copiedBefore, listed) in queued {
            guard let download = await manager.download(id) else { continue }
            if download.status == .completed, let result = download.result {
                if result.bytesFetched == 0 && result.wasAlreadyComplete {
                    summary.unchanged += 1
                } else {
                    if copiedBefore { summary.updated += 1 } else { summary.new += 1 }
                    // Hashed before it got its name; an unchanged file is not hashed again.
                    if listed { summary.verified += 1 }
                }
                summary.bytesFetched += result.bytesFetched
            } else if download.status == .failed || !interrupted {
                summary.failed += 1
                let error = download.error ?? .io("\(download.url) did not finish")
                summary.errors.append(error)
                guard storeFailure == nil, tally.tells(error) else { continue }
                events(.problem("\(URLRedaction.redact(download.url)): \(error.message)"))
            }
        }
        for line in tally.countedLines { events(.problem(line)) }
        if let storeFailure, state.withLock({ $0.toldOnce.insert(storeFailure.description).inserted }) {
            events(.problem(storeFailure.description))
        }
        return summary
    }

    /// Removes the files earlier runs wrote that the listings no longer hold, each only while it
    /// is still the file this mirror wrote (its size and time as written); returns how many.
    func deleteGone(manager: DownloadManager) async -> Int {
        let dryRun = configuration.dryRun
        let seen = state.withLock { $0.seen }
        var deleted = 0
        for (path, row) in earlier.sorted(by: { $0.key < $1.key }) where !seen.contains(path) {
            let relative = String(path.dropFirst(root.count + 1))
            if row.status == .completed {
                guard Self.isAsWritten(row, path: path) else {
                    // Changed or replaced since the mirror wrote it: not the mirror's any more.
                    if Self.exists(path) { events(.problem("kept \(path): it changed since this mirror wrote it")) }
                    if !dryRun { await manager.remove(row.id) }
                    continue
                }
                if dryRun {
                    events(.wouldDelete(relative))
                    deleted += 1
                    continue
                }
                do throws(DownloadError) {
                    try deleteConfined(path, row: row)
                    events(.deleted(relative))
                    deleted += 1
                    await manager.remove(row.id)
                    removeEmptyFolders(above: path)
                } catch {
                    events(.problem("\(relative) not deleted: \(error.message)"))
                }
            } else if !dryRun {
                // An unfinished copy of a file that is gone: its part file goes with it.
                await manager.remove(row.id)
            }
        }
        return deleted
    }

    /// Removes the folders above a deleted file that it leaves empty, up to (not including)
    /// the mirror's root: a folder gone from the server goes with its last file. `rmdir` only
    /// removes an empty folder, so a folder holding anything else, a user's file say, stays.
    private func removeEmptyFolders(above path: String) {
        var folder = (path as NSString).deletingLastPathComponent
        while folder.count > root.count, folder.hasPrefix(root + "/") {
            let parent = (folder as NSString).deletingLastPathComponent
            guard let opened = try? DownloadFolder(parent, beneath: confinement),
                unlinkat(opened.descriptor, (folder as NSString).lastPathComponent, AT_REMOVEDIR) == 0
            else { return }
            folder = parent
        }
    }

    /// The folder every file of the run stays inside: the template's (a daemon's download
    /// folder, which DIR is in), else DIR.
    private var confinement: String { fileTemplate.confinement ?? root }

    /// Deletes the file at `path` through its folder opened beneath ``confinement``, once it is
    /// found there still as the mirror wrote it: a folder on the way swapped for a link (to
    /// anywhere) is refused, never followed. A file already gone is fine.
    private func deleteConfined(_ path: String, row: DownloadRow.File) throws(DownloadError) {
        let folder = try DownloadFolder((path as NSString).deletingLastPathComponent, beneath: confinement)
        let name = (path as NSString).lastPathComponent
        var info = stat()
        if fstatat(folder.descriptor, name, &info, AT_SYMLINK_NOFOLLOW) != 0 {
            if errno == ENOENT { return }
            throw .io("look at", path: path, errno: errno)
        }
        guard row.isAsWritten(info) else { throw .io("it changed since this mirror wrote it") }
        guard unlinkat(folder.descriptor, name, 0) == 0 || errno == ENOENT else { throw .io("delete", path: path, errno: errno) }
    }

    static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }
}

/// A listing's files looked at (`lstat`) through their folder, opened once: each file's name
/// looked up there instead of its whole path each time (a resync's 5,000 paths, walked
/// component by component, cost the kernel 2 µs a file).
private final class FolderLookup {
    private var folder: String?
    private var descriptor: Int32 = -1

    deinit { if descriptor >= 0 { close(descriptor) } }

    /// The `lstat` of the file at `path` (absolute), or nil when there is none.
    func info(_ path: String) -> stat? {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return Self.info(path) }
        // A listing's files share their folder: its name is copied once, when it changes.
        let parent = path[..<slash]
        if folder.map({ $0 != parent }) ?? true {
            if descriptor >= 0 { close(descriptor) }
            let name = String(parent)
            folder = name
            // As `lstat` of the whole path would: links on the way followed, the file's own not.
            descriptor = open(name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        }
        // No folder there (a first copy), or one that may be searched but not read: the path.
        guard descriptor >= 0 else { return Self.info(path) }
        var info = stat()
        return fstatat(descriptor, String(path[path.index(after: slash)...]), &info, AT_SYMLINK_NOFOLLOW) == 0 ? info : nil
    }

    private static func info(_ path: String) -> stat? {
        var info = stat()
        return lstat(path, &info) == 0 ? info : nil
    }
}
