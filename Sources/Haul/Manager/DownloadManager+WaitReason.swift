import Foundation

extension DownloadManager {
    /// Why a download that is not running waits, as the manager's indexes tell it.
    public enum WaitReason: Sendable, Hashable {
        /// Paused: it waits for someone to resume it.
        case paused
        /// Every one of the `limit` slots (`-j`) is taken by a running download.
        case slot(running: Int, limit: Int)
        /// `pending` downloads have all their bytes and wait for their files to be flushed and
        /// put in place; past `limit` of them no new download starts (a disk slower than the
        /// network).
        case writing(pending: Int, limit: Int)
        /// Its host has all of its `limit` connections open (`--max-connections-per-host`).
        case host(String, limit: Int)
        /// A download it depends on has not completed yet.
        case dependency(ID)
        /// Nothing holds it back: it starts at the manager's next step.
        case starting
    }

    /// Why `id` waits, or nil when it is not waiting (running, finished, unknown).
    ///
    /// O(log n) at most, whatever the queue's length: the ready download's host is looked up
    /// in the queue's list of blocked downloads for that host, a dependency among the download's own.
    public func waitReason(of id: ID) -> WaitReason? {
        guard let entry = book.entries[id] else { return nil }
        switch entry.lifecycle.status {
        case .paused: return .paused
        case .queued: break
        default: return nil
        }
        if entry.unmet > 0,
            let dependency = entry.dependencies.first(where: { book.entries[$0]?.lifecycle.status != .completed })
        {
            return .dependency(dependency)
        }
        if book.index.blocked[entry.host]?.contains(entry.key) == true {
            return .host(entry.host, limit: hosts.limit)
        }
        let running = book.transferring + uploadBook.running
        if running >= maxConcurrent { return .slot(running: running, limit: maxConcurrent) }
        if book.committing >= maxCommitting { return .writing(pending: book.committing, limit: maxCommitting) }
        if hosts.available(entry.host) == 0 { return .host(entry.host, limit: hosts.limit) }
        return .starting
    }

    /// ``waitReason(of:)`` of several downloads in one call (a page of a list).
    public func waitReasons(of ids: [ID]) -> [ID: WaitReason] {
        var reasons: [ID: WaitReason] = [:]
        for id in ids { reasons[id] = waitReason(of: id) }
        return reasons
    }

    /// The byte ranges of `id` the store has committed (what a restart would keep: a range is
    /// recorded only after its bytes were flushed to disk), or nil for an unknown download.
    /// One read of one row; changes still on their way to the store are not waited for.
    ///
    /// - Throws: ``DownloadError`` when the store cannot be read.
    public func durableRanges(of id: ID) async throws(DownloadError) -> ByteRanges? {
        try await store.committedRow(id)?.ranges
    }
}
