import CHaulSystem
import Foundation
import NIOPosix
import Synchronization

/// Puts finished files at their final names, durably, in batches: every file that finished
/// while the last batch was being written goes into the next, which costs one `syncfs` for
/// all of them, then a rename each, then one `fsync` per folder.
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
        let done: CheckedContinuation<Result<Double, DownloadError>, Never>
    }

    private struct State {
        var pending: [Entry] = []
        var working = false
    }

    private let state = Mutex(State())

    /// Renames `part` to `destination` once its bytes are on disk. Returns the file's
    /// modification time (to recognise it later as Haul's own).
    ///
    /// - Throws: ``DownloadError`` (``DownloadError/Kind/io``) when the flush or the rename
    ///   fails, or when a file appeared at `destination` meanwhile and `replacing` is false
    ///   (the download then stays in the part file).
    func commit(_ part: PartFile, to destination: String, replacing: Bool) async throws(DownloadError) -> Double {
        // Not cancellable: once asked, the rename happens or fails; a pause cannot leave it half done.
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Double, DownloadError>, Never>) in
            let start: Bool = state.withLock { state in
                state.pending.append(Entry(part: part, destination: destination, replacing: replacing, done: continuation))
                guard !state.working else { return false }
                state.working = true
                return true
            }
            // Blocking calls: on a thread of the I/O pool, not one of the few the tasks run on.
            if start { NIOThreadPool.singleton.submit { _ in self.drain() } }
        }
        return try result.get()
    }

    /// How long a batch waits for more files to join it: a flush costs about as much for one
    /// file as for fifty.
    static let linger: Duration = .milliseconds(5)

    /// Writes batches until nothing is pending.
    private func drain() {
        while true {
            // Let the files finishing right now join this batch.
            usleep(UInt32(Self.linger.components.attoseconds / 1_000_000_000_000))
            let batch: [Entry] = state.withLock { state in
                guard !state.pending.isEmpty else {
                    state.working = false
                    return []
                }
                defer { state.pending = [] }
                return state.pending
            }
            if batch.isEmpty { return }
            write(batch)
        }
    }

    private func write(_ batch: [Entry]) {
        // One flush per filesystem the batch touches; the file's time comes from the same look.
        var flushed: [UInt64: Int32] = [:]
        var outcomes: [Result<Double, DownloadError>] = []
        var folders = Set<String>()
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
            if let failure = Self.putInPlace(entry) {
                outcomes.append(.failure(failure))
                continue
            }
            folders.insert(FilePaths.folder(of: entry.destination))
            outcomes.append(.success(Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9))
        }
        // The renames themselves survive a crash once their folders are flushed.
        for folder in folders { PartFile.syncDirectory(folder) }
        for (entry, outcome) in zip(batch, outcomes) { entry.done.resume(returning: outcome) }
    }

    /// Renames the part file into place; without `replacing`, never over a file that appeared
    /// at the destination meanwhile (the check and the rename are one step where the system
    /// allows it).
    private static func putInPlace(_ entry: Entry) -> DownloadError? {
        if entry.replacing {
            return rename(entry.part.path, entry.destination) == 0 ? nil
                : .io("rename \(entry.part.path) to", path: entry.destination, errno: errno)
        }
        if haul_rename_noreplace(entry.part.path, entry.destination) == 0 { return nil }
        switch errno {
        case EEXIST:
            return .io("\(entry.destination) appeared while downloading; the download is kept in \(entry.part.path)")
        case EINVAL, ENOSYS, ENOTSUP:
            // No atomic way here: look, then rename.
            if DestinationResolver.regularFileSize(entry.destination) != nil {
                return .io("\(entry.destination) appeared while downloading; the download is kept in \(entry.part.path)")
            }
            return rename(entry.part.path, entry.destination) == 0 ? nil
                : .io("rename \(entry.part.path) to", path: entry.destination, errno: errno)
        case let code:
            return .io("rename \(entry.part.path) to", path: entry.destination, errno: code)
        }
    }

    /// The modification time of the file at `path`, as ``commit(_:to:replacing:)`` reports it.
    static func modified(_ path: String) -> Double? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
    }
}
