import Foundation
import Haul
import Synchronization

/// One run of `haul mirror`: queues the files the walk finds, then tells what became of them
/// and removes what is gone.
final class MirrorRun: Sendable {
    private let root: String
    /// The mirror's downloads from earlier runs, by file.
    private let earlier: [String: DownloadManager.Download]
    private let dryRun: Bool
    /// Whether a dry run lists each file on standard output (not with --json).
    private let listsChanges: Bool
    /// `--checksum-file`: the digests files are verified against.
    private let checksums: Checksums?

    /// `--checksum-file` and `--require-checksum`.
    struct Checksums: Sendable {
        var file: ChecksumFile
        /// Whether a file the list does not name fails.
        var required: Bool
    }

    private struct State {
        /// Files the listings hold now.
        var seen = Set<String>()
        /// This run's downloads, and whether each file was copied before (an update, if fetched).
        var queued: [(id: DownloadManager.ID, copiedBefore: Bool, listed: Bool)] = []
        var summary = MirrorSummary()
        /// Listed names matched by a file's name alone, and the path that matched each: a
        /// second file of the same name is ambiguous.
        var matchedByName: [String: String] = [:]
    }
    private let state = Mutex(State())

    init(root: String, earlier: [String: DownloadManager.Download], dryRun: Bool, listsChanges: Bool, checksums: Checksums? = nil) {
        self.root = root
        self.earlier = earlier
        self.dryRun = dryRun
        self.listsChanges = listsChanges
        self.checksums = checksums
        state.withLock { $0.summary.checksFiles = checksums != nil }
    }

    /// Queues one listing's files into the manager (or, dry, says what would be fetched).
    func queue(_ files: [TreeWalk.File], template: DownloadRequest, manager: DownloadManager) async {
        var requests: [DownloadRequest] = []
        var copiedBefore: [Bool] = []
        var listed: [Bool] = []
        for file in files {
            let path = root + "/" + file.path
            let fresh = state.withLock { $0.seen.insert(path).inserted }
            guard fresh else { continue }
            let before = earlier[path]
            if before == nil, Self.exists(path) {
                // Not this mirror's file: never overwritten, never deleted.
                Terminal.error("skipped \(path): a file this mirror did not write is in the way")
                state.withLock { $0.summary.skipped += 1 }
                continue
            }
            let checksum = listedChecksum(file.path)
            if checksums != nil, checksum == nil {
                state.withLock { $0.summary.unlisted += 1 }
                if let checksums, checksums.required, !dryRun {
                    let error = checksums.file.notListed(file.path)
                    Terminal.error(error.message)
                    state.withLock { state in
                        state.summary.failed += 1
                        state.summary.errors.append(error)
                    }
                    continue
                }
            }
            if dryRun {
                if before?.status != .completed {
                    if listsChanges { print("new \(file.path)") }
                    state.withLock { $0.summary.new += 1 }
                } else {
                    state.withLock { $0.summary.toCheck += 1 }
                }
                continue
            }
            var request = template
            request.url = file.url
            request.destination = .file(path)
            // The tree stays inside DIR, whatever links are planted there while it runs.
            request.confinement = root
            request.checksum = checksum
            requests.append(request)
            copiedBefore.append(before?.status == .completed)
            listed.append(checksum != nil)
        }
        guard !requests.isEmpty else { return }
        do throws(DownloadError) {
            // Copied before: one conditional request says whether it changed.
            let added = try await manager.add(contentsOf: requests, replacing: true, requeueExisting: true)
            state.withLock { state in
                for (index, result) in added.enumerated() {
                    switch result {
                    case .success(let id): state.queued.append((id, copiedBefore[index], listed[index]))
                    case .failure(let error):
                        Terminal.error("\(URLRedaction.redact(requests[index].url)): \(error.message)")
                        state.summary.failed += 1
                        state.summary.errors.append(error)
                    }
                }
            }
        } catch {
            Terminal.error(error.description)
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
        guard let file = checksums?.file, let checksum = file.checksum(forPath: path) else { return nil }
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
            Terminal.error("\(path) is not verified: the checksum file lists \(name) alone, and \(first) matched it first")
            return nil
        }
        return checksum
    }

    /// What became of this run's downloads.
    func summarize(manager: DownloadManager) async -> MirrorSummary {
        let (queued, partial) = state.withLock { ($0.queued, $0.summary) }
        var summary = partial
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
            } else {
                summary.failed += 1
                let error = download.error ?? .io("\(download.url) did not finish")
                Terminal.error("\(download.url): \(error.message)")
                summary.errors.append(error)
            }
        }
        return summary
    }

    /// Removes the files earlier runs wrote that the listings no longer hold, each only while it
    /// is still the file this mirror wrote (its size as written); returns how many.
    func deleteGone(manager: DownloadManager, quiet: Bool) async -> Int {
        let seen = state.withLock { $0.seen }
        var deleted = 0
        for (path, download) in earlier.sorted(by: { $0.key < $1.key }) where !seen.contains(path) {
            let relative = String(path.dropFirst(root.count + 1))
            if download.status == .completed, let result = download.result {
                guard Self.regularFileSize(path) == result.bytes else {
                    // Changed or replaced since the mirror wrote it: not the mirror's any more.
                    if Self.exists(path) { Terminal.error("kept \(path): it changed since this mirror wrote it") }
                    if !dryRun { await manager.remove(download.id) }
                    continue
                }
                if dryRun {
                    if listsChanges { print("delete \(relative)") }
                    deleted += 1
                    continue
                }
                if unlink(path) == 0 || errno == ENOENT {
                    if !quiet { Terminal.write("deleted \(relative)\n") }
                    deleted += 1
                    await manager.remove(download.id)
                    removeEmptyFolders(above: path)
                } else {
                    Terminal.error("cannot delete \(path): \(String(cString: strerror(errno)))")
                }
            } else if !dryRun {
                // An unfinished copy of a file that is gone: its part file goes with it.
                await manager.remove(download.id)
            }
        }
        return deleted
    }

    /// Removes the folders above a deleted file that it leaves empty, up to (not including)
    /// the mirror's root: a folder gone from the server goes with its last file. `rmdir` only
    /// removes an empty folder, so a folder holding anything else, a user's file say, stays.
    private func removeEmptyFolders(above path: String) {
        var folder = (path as NSString).deletingLastPathComponent
        while folder.count > root.count, folder.hasPrefix(root + "/"), rmdir(folder) == 0 {
            folder = (folder as NSString).deletingLastPathComponent
        }
    }

    static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    static func regularFileSize(_ path: String) -> Int64? {
        var info = stat()
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(info.st_size)
    }
}
