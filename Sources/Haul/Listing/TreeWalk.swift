import Foundation

/// Walks a served folder tree by its listings, a bounded number of listings at a time, and
/// hands on its files a listing at a time, so downloads start while the walk goes on.
///
/// Only folders below the start URL are read (``DirectoryListing`` keeps only a page's direct
/// children), each at most once, to at most ``maxDepth`` levels. A folder whose listing holds
/// the same entries as one of its ancestors is a link loop on the server (`a/loop -> a`) and is
/// not read further.
package struct TreeWalk: Sendable {
    /// A file found in the tree.
    package struct File: Sendable, Hashable {
        package var url: String
        /// Its path below the start folder: sanitised names joined by `/`.
        package var path: String
    }

    /// What a walk met besides files.
    package struct Report: Sendable {
        package var listingsRead = 0
        /// Links left out by the listings (outside the folder, queries, unusable names).
        package var leftOut = 0
        /// Folders not read: a loop, deeper than the limit, or a name taken locally.
        package var skipped: [String] = []
        /// Listings that could not be read, with why: their files are unknown, so nothing
        /// missing from them may be taken as gone.
        package var failures: [(url: String, error: DownloadError)] = []
    }

    /// The folder to start from (a final `/` is added).
    package var start: String
    /// The request each listing is read with (its headers, network options and retries).
    package var template: DownloadRequest
    /// Folder levels below the start read (0: the start folder only).
    package var maxDepth = 50
    /// Listings read at once.
    package var parallelListings = 8
    /// The largest listing page read.
    package var maxListingBytes = 64 << 20
    /// Whether a file or folder (its path, a folder's ending with `/`) is kept.
    package var accepts: @Sendable (_ path: String, _ isDirectory: Bool) -> Bool = { _, _ in true }
    /// Whether the walk should end: no listing is started, and no file handed on, once it says so.
    package var isStopped: @Sendable () -> Bool = { false }

    package init(start: String, template: DownloadRequest) {
        self.start = start.hasSuffix("/") ? start : start + "/"
        self.template = template
    }

    private struct Folder: Sendable {
        var url: String
        var path: String
        var depth: Int
        /// The entry signatures of its ancestors, for loop detection.
        var ancestors: [Int]
    }

    private struct Listed: Sendable {
        var folder: Folder
        var result: Result<DirectoryListing, DownloadError>
    }

    /// Walks the tree; `found` gets each listing's files (in listing order) as it is read.
    package func run(
        with downloader: Downloader, found: @Sendable ([File]) async -> Void
    ) async -> Report {
        var report = Report()
        var pending: [Folder] = [Folder(url: start, path: "", depth: 0, ancestors: [])]
        var seen: Set<String> = [start]
        await withTaskGroup(of: Listed.self) { group in
            var running = 0
            while running > 0 || !pending.isEmpty {
                if isStopped() { pending.removeAll() }
                while running < max(1, parallelListings), let folder = pending.popLast() {
                    running += 1
                    group.addTask { Listed(folder: folder, result: await read(folder.url, with: downloader)) }
                }
                guard let listed = await group.next() else { break }
                running -= 1
                let folder = listed.folder
                let listing: DirectoryListing
                switch listed.result {
                case .failure(let error):
                    report.failures.append((folder.url, error))
                    continue
                case .success(let read): listing = read
                }
                report.listingsRead += 1
                report.leftOut += listing.leftOut
                let signature = Self.signature(of: listing)
                if !listing.entries.isEmpty, folder.ancestors.contains(signature) {
                    report.skipped.append(folder.url + " (the same entries as a folder above it: a link loop)")
                    continue
                }
                var files: [File] = []
                // Names taken in this folder locally: two links whose names sanitise alike
                // would write one file.
                var names = Set<String>()
                for entry in listing.entries {
                    let path = folder.path + entry.name
                    guard accepts(path + (entry.isDirectory ? "/" : ""), entry.isDirectory) else { continue }
                    guard names.insert(entry.name).inserted else {
                        report.skipped.append(entry.url + " (its local name \(path) is taken by another entry)")
                        continue
                    }
                    if entry.isDirectory {
                        guard folder.depth < maxDepth else {
                            report.skipped.append(entry.url + " (deeper than \(maxDepth) levels)")
                            continue
                        }
                        if seen.insert(entry.url).inserted {
                            pending.append(
                                Folder(url: entry.url, path: path + "/", depth: folder.depth + 1, ancestors: folder.ancestors + [signature]))
                        }
                    } else {
                        files.append(File(url: entry.url, path: path))
                    }
                }
                if !files.isEmpty, !isStopped() { await found(files) }
            }
        }
        return report
    }

    private func read(_ url: String, with downloader: Downloader) async -> Result<DirectoryListing, DownloadError> {
        var request = template
        request.url = url
        // Caddy answers JSON when asked; the others send HTML (or their configured format).
        request.headers.append(.init(name: "Accept", value: "application/json, text/html;q=0.9, */*;q=0.8"))
        do throws(DownloadError) {
            let page = try await downloader.page(request, maxBytes: maxListingBytes)
            // A redirect elsewhere than a folder below the start (or to another host) is not
            // followed into: its links are read against the URL asked for.
            let base = page.url.hasPrefix(start) ? page.url : url
            let listing = DirectoryListing.read(page.body, contentType: page.contentType, url: base)
            if listing.unreadable { return .failure(.invalidRequest("\(URLRedaction.redact(url)) is not a listing Haul can read")) }
            return .success(listing)
        } catch {
            return .failure(error)
        }
    }

    /// A folder's entries, names and kinds, independent of where it sits.
    static func signature(of listing: DirectoryListing) -> Int {
        var hasher = Hasher()
        for entry in listing.entries {
            hasher.combine(entry.name)
            hasher.combine(entry.isDirectory)
        }
        return hasher.finalize()
    }
}
