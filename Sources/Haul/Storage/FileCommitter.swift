import CHaulSystem
import Foundation
import NIOPosix
import Synchronization

/// Puts finished files at their final names, durably, in batches: every file that finished
/// while the last batch was being written goes into the next, which costs one `syncfs` for
/// all of them, then a rename (or a link) each, then one `fsync` per folder.
///
/// A file at its final name is complete and on disk before its rename is; a crash or power
/// loss leaves either the complete file or the part file, never a partial at the final name.
/// `fdatasync` of each of 10,000 small files would cost seconds; one flush per batch costs
/// a few milliseconds.
final class FileCommitter: Sendable {
    private struct Entry {
        let part: PartFile
        let destination: String
        /// Whether a file that appeared at the destination meanwhile may be replaced.
        let replacing: Bool
        let done: CheckedContinuation<Result<Committed, DownloadError>, Never>
    }

    private struct State {
        var pending: [Entry] = []
        var working = false
        /// The fewest files that the callers of the pending ones can have waiting here at once
        /// (``commit(_:to:replacing:waitingAtMost:)``): a batch that holds that many waits for
        /// no more, since no other file of theirs can come until some of these are in place.
        var full = Int.max
        /// The committer's thread is waiting for company; the file that fills the batch wakes it.
        var lingering = false
    }

    /// How a wait for company ended (``init(linger:lingered:)``).
    enum LingerEnd: Sendable, Equatable {
        /// The batch held as many files as could come.
        case full
        /// ``linger`` went by.
        case timedOut
    }

    private let state = Mutex(State())
    /// Signalled by the file that fills a batch while the committer's thread lingers.
    private let company = DispatchSemaphore(value: 0)
    private let lingerTime: Duration
    /// Told how each wait for company ended (a test watches).
    private let lingered: @Sendable (LingerEnd) -> Void

    init(linger: Duration = FileCommitter.linger, lingered: @escaping @Sendable (LingerEnd) -> Void = { _ in }) {
        self.lingerTime = linger
        self.lingered = lingered
    }

    /// Where a finished file ended up, and its modification time (to recognise it later as
    /// Haul's own).
    struct Committed: Sendable {
        var path: String
        var modified: Double
    }

    /// Puts `part` at `destination` (a rename, or a link for a part file without a name) once
    /// its bytes are on disk.
    ///
    /// A part file without a name never claimed `destination`: a file found there is treated
    /// as one found before the download started. The same bytes count as this download and
    /// stay as they are; different ones are stepped around (`name.1.ext`, as for rule 4).
    ///
    /// - Parameter waitingAtMost: how many files the caller can have waiting here at once,
    ///   this one included (a manager's bound on the downloads being put in place): a batch
    ///   that holds that many is written without waiting out the rest of ``linger``.
    /// - Throws: ``DownloadError`` (``DownloadError/Kind/io``) when the flush or the rename
    ///   fails, or when a file appeared at the destination of a named part file meanwhile and
    ///   `replacing` is false (the download then stays in the part file).
    func commit(_ part: PartFile, to destination: String, replacing: Bool, waitingAtMost: Int = .max) async throws(DownloadError) -> Committed {
        // Not cancellable: once asked, the rename happens or fails; a pause cannot leave it half done.
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Committed, DownloadError>, Never>) in
            let (start, wake): (Bool, Bool) = state.withLock { state in
                state.pending.append(Entry(part: part, destination: destination, replacing: replacing, done: continuation))
                state.full = min(state.full, max(1, waitingAtMost))
                let wake = state.lingering && state.pending.count >= state.full
                if wake { state.lingering = false }
                guard !state.working else { return (false, wake) }
                state.working = true
                return (true, wake)
            }
            if wake { company.signal() }
            // Blocking calls: on a thread of the I/O pool, not one of the few the tasks run on.
            if start { NIOThreadPool.singleton.submit { _ in self.drain() } }
        }
        return try result.get()
    }

    /// How long a batch waits for more files to join it while files keep coming: a flush costs
    /// about as much for one file as for fifty.
    static let linger: Duration = .milliseconds(5)

    /// Waits out ``linger``, or until the batch holds as many files as could come (a manager
    /// that bounds the downloads being put in place starts no other until some are: waiting
    /// longer would only hold them all up). Blocking, on the committer's thread.
    private func waitForCompany() {
        let waits = state.withLock { state in
            state.lingering = state.pending.count < state.full
            return state.lingering
        }
        guard waits else { return lingered(.full) }
        let nanoseconds = lingerTime.components.seconds * 1_000_000_000 + lingerTime.components.attoseconds / 1_000_000_000
        if company.wait(timeout: .now() + .nanoseconds(Int(nanoseconds))) == .success { return lingered(.full) }
        // Timed out; a file that filled the batch meanwhile has signalled, or is about to:
        // taken here, so that the next wait does not end at once.
        let signalled = state.withLock { state in
            defer { state.lingering = false }
            return !state.lingering
        }
        if signalled { company.wait() }
        lingered(signalled ? .full : .timedOut)
    }

    /// Writes batches until nothing is pending.
    ///
    /// The first batch is written at once: it comes after a quiet spell (the last drain ended
    /// when a linger brought nothing), most often a single download that would otherwise wait
    /// the linger out, a fifth of the time of `haul get` of a small file. The batches after it
    /// linger: files are then finishing one after another, and the next ones join.
    private func drain() {
        var lingers = false
        while true {
            // Let the files finishing right now join this batch.
            if lingers { waitForCompany() }
            lingers = true
            let batch: [Entry] = state.withLock { state in
                guard !state.pending.isEmpty else {
                    state.working = false
                    return []
                }
                defer { (state.pending, state.full) = ([], .max) }
                return state.pending
            }
            if batch.isEmpty { return }
            write(batch)
        }
    }

    private func write(_ batch: [Entry]) {
        // One flush per filesystem the batch touches; the file's time comes from the same look.
        var flushed: [UInt64: Int32] = [:]
        var outcomes: [Result<Committed, DownloadError>] = []
        // One part file of each folder the batch renamed into, to flush that folder with.
        var folders: [String: PartFile] = [:]
        for entry in batch {
            var info = stat()
            guard fstat(entry.part.descriptor, &info) == 0 else {
                outcomes.append(.failure(.io("read", path: entry.part.path, errno: errno)))
                continue
            }
            let device = UInt64(info.st_dev)
            if flushed[device] == nil { flushed[device] = haul_syncfs(entry.part.descriptor) == 0 ? 0 : errno }
            if let code = flushed[device], code != 0 {
                outcomes.append(.failure(.io("flush", path: entry.part.path, errno: code)))
                continue
            }
            switch Self.putInPlace(entry) {
            case .placed(let path):
                outcomes.append(.success(Committed(path: path, modified: Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9)))
            case .foundInPlace(let path, let modified):
                outcomes.append(.success(Committed(path: path, modified: modified)))
                continue
            case .failed(let failure):
                outcomes.append(.failure(failure))
                continue
            }
            folders[FilePaths.folder(of: entry.destination)] = entry.part
        }
        // The renames themselves survive a crash once their folders are flushed; until then a
        // file is not reported done (its folder's failure is each of its files').
        var unflushed: [String: DownloadError] = [:]
        for (folder, part) in folders {
            do throws(DownloadError) { try part.syncFolder() } catch { unflushed[folder] = error }
        }
        for (entry, outcome) in zip(batch, outcomes) {
            if case .success = outcome, let failure = unflushed[FilePaths.folder(of: entry.destination)] {
                entry.done.resume(returning: .failure(failure))
            } else {
                entry.done.resume(returning: outcome)
            }
        }
    }

    private enum Placement {
        case placed(at: String)
        /// The same bytes were at `at` already (another writer of the same file finished
        /// first); their modification time.
        case foundInPlace(at: String, modified: Double)
        case failed(DownloadError)
    }

    /// Puts the part file at its final name; without `replacing`, never over a file that
    /// appeared at the destination meanwhile (the check and the naming are one step where the
    /// system allows it).
    private static func putInPlace(_ entry: Entry) -> Placement {
        let part = entry.part
        // A file without a name is placed with its naming held: a checkpoint still under way
        // must not give it the part file's name as well.
        let unnamed = part.whileUnnamed { name -> (result: Placement, placed: Bool) in
            let placement = placeUnnamed(entry, name: name)
            if case .failed = placement { return (placement, false) }
            return (placement, true)
        }
        if let unnamed { return unnamed }
        if entry.replacing { return placed(rename(part, to: entry.destination), entry) }
        if haul_rename_noreplace(part.directory, part.localName, part.relativeName(entry.destination)) == 0 { return .placed(at: entry.destination) }
        switch errno {
        case EEXIST:
            return .failed(appeared(entry))
        case EINVAL, ENOSYS, ENOTSUP:
            // No atomic way here: look, then rename.
            var info = stat()
            if fstatat(part.directory, part.relativeName(entry.destination), &info, AT_SYMLINK_NOFOLLOW) == 0 { return .failed(appeared(entry)) }
            return placed(rename(part, to: entry.destination), entry)
        case let code:
            return .failed(.io("rename \(part.path) to", path: entry.destination, errno: code))
        }
    }

    /// Puts a part file without a name at the destination; `name` gives it the part file's
    /// name (to rename it over a file, which a link cannot replace).
    private static func placeUnnamed(_ entry: Entry, name: () throws(DownloadError) -> Bool) -> Placement {
        let part = entry.part
        guard entry.replacing else { return linkInPlace(entry) }
        // Nothing there: the link is all it takes. Over a file: only from a name of its own
        // (a rename replaces, a link does not).
        if haul_link_descriptor(part.descriptor, part.directory, part.relativeName(entry.destination)) == 0 {
            return .placed(at: entry.destination)
        }
        guard errno == EEXIST else { return .failed(.io("create", path: entry.destination, errno: errno)) }
        do {
            guard try name() else {
                return .failed(.io("\(part.path) belongs to another download of \(entry.destination); this one was not kept", path: part.path))
            }
        } catch {
            return .failed(error)
        }
        return placed(rename(part, to: entry.destination), entry)
    }

    /// Links a part file without a name at the destination. It never claimed that name, so a
    /// file found there is treated as one found before the download (rule 4 of the resume
    /// semantics): the same bytes are this download; different ones are stepped around to
    /// `name.1.ext`, `name.2.ext`, … (two downloads of one list with one name, as a crawl of
    /// `index.html` pages has).
    private static func linkInPlace(_ entry: Entry) -> Placement {
        if let placement = link(entry, at: entry.destination) { return placement }
        // Not a name another download of this process chose and is still downloading to.
        for candidate in FilePaths.candidates(beside: entry.destination) where !PathClaims.isClaimed(candidate) {
            if let placement = link(entry, at: candidate) { return placement }
        }
        return .failed(.io("cannot find a free name next to \(entry.destination): \(FilePaths.maxSuffix) copies exist", path: entry.destination))
    }

    /// One try of ``linkInPlace(_:)`` at `path`; nil when a different file is there.
    private static func link(_ entry: Entry, at path: String) -> Placement? {
        let part = entry.part
        if haul_link_descriptor(part.descriptor, part.directory, part.relativeName(path)) == 0 { return .placed(at: path) }
        guard errno == EEXIST else { return .failed(.io("create", path: path, errno: errno)) }
        if sameContent(part.descriptor, part.relativeName(path), in: part.directory),
            let modified = modified(part.relativeName(path), in: part.directory)
        {
            return .foundInPlace(at: path, modified: modified)
        }
        return nil
    }

    /// Renames the part file to `destination`, in its folder, replacing what is there.
    private static func rename(_ part: PartFile, to destination: String) -> Int32 {
        renameat(part.directory, part.localName, part.directory, part.relativeName(destination))
    }

    private static func placed(_ renamed: Int32, _ entry: Entry) -> Placement {
        renamed == 0 ? .placed(at: entry.destination) : .failed(.io("rename \(entry.part.path) to", path: entry.destination, errno: errno))
    }

    private static func appeared(_ entry: Entry) -> DownloadError {
        .io("\(entry.destination) appeared while downloading; the download is kept in \(entry.part.path)", path: entry.destination)
    }

    /// Whether the file at `path` (relative to the folder `directory`) holds exactly the bytes
    /// of the file open at `descriptor`. Anything but a regular file is not: a link is not
    /// followed, and a FIFO does not block.
    static func sameContent(_ descriptor: Int32, _ path: String, in directory: Int32 = AT_FDCWD) -> Bool {
        let other = openat(directory, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard other >= 0 else { return false }
        defer { close(other) }
        var mine = stat()
        var theirs = stat()
        guard fstat(descriptor, &mine) == 0, fstat(other, &theirs) == 0, mine.st_size == theirs.st_size,
            (theirs.st_mode & S_IFMT) == S_IFREG
        else { return false }
        let chunk = 64 << 10
        let buffers = UnsafeMutableRawBufferPointer.allocate(byteCount: 2 * chunk, alignment: 16)
        defer { buffers.deallocate() }
        var offset: off_t = 0
        while offset < mine.st_size {
            let wanted = min(chunk, Int(mine.st_size - offset))
            guard pread(descriptor, buffers.baseAddress!, wanted, offset) == wanted,
                pread(other, buffers.baseAddress! + chunk, wanted, offset) == wanted,
                memcmp(buffers.baseAddress!, buffers.baseAddress! + chunk, wanted) == 0
            else { return false }
            offset += off_t(wanted)
        }
        return true
    }

    /// The modification time of the file at `path` (relative to the folder `directory`), as
    /// ``commit(_:to:replacing:)`` reports it.
    static func modified(_ path: String, in directory: Int32 = AT_FDCWD) -> Double? {
        var info = stat()
        guard fstatat(directory, path, &info, 0) == 0 else { return nil }
        return modified(info)
    }

    /// A file's modification time as the store keeps it (``DownloadRow/fileModified``).
    static func modified(_ info: stat) -> Double {
        Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
    }
}
