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

    /// Writes batches until nothing is pending.
    private func drain() {
        while true {
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
        // One flush per filesystem the batch touches.
        var flushed = Set<UInt64>()
        var flushFailure: [UInt64: Int32] = [:]
        var devices: [UInt64] = []
        for entry in batch {
            var info = stat()
            let device = fstat(entry.part.descriptor, &info) == 0 ? UInt64(info.st_dev) : 0
            devices.append(device)
            guard flushed.insert(device).inserted else { continue }
            if haul_syncfs(entry.part.descriptor) != 0 { flushFailure[device] = errno }
        }
        var folders = Set<String>()
        var outcomes: [Result<Double, DownloadError>] = []
        for (entry, device) in zip(batch, devices) {
            if let code = flushFailure[device] {
                outcomes.append(.failure(.io("flush", path: entry.part.path, errno: code)))
                continue
            }
            if !entry.replacing, DestinationResolver.regularFileSize(entry.destination) != nil {
                outcomes.append(.failure(.io("\(entry.destination) appeared while downloading; the download is kept in \(entry.part.path)")))
                continue
            }
            guard rename(entry.part.path, entry.destination) == 0 else {
                outcomes.append(.failure(.io("rename \(entry.part.path) to", path: entry.destination, errno: errno)))
                continue
            }
            folders.insert((entry.destination as NSString).deletingLastPathComponent)
            var info = stat()
            let modified = stat(entry.destination, &info) == 0
                ? Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9 : 0
            outcomes.append(.success(modified))
        }
        // The renames themselves survive a crash once their folders are flushed.
        for folder in folders { PartFile.syncDirectory(of: folder + "/x") }
        for (entry, outcome) in zip(batch, outcomes) { entry.done.resume(returning: outcome) }
    }

    /// The modification time of the file at `path`, as ``commit(_:to:replacing:)`` reports it.
    static func modified(_ path: String) -> Double? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
    }
}
