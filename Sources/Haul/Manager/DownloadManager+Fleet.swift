import Foundation

/// A queue shared by a fleet of daemons (a store on PostgreSQL): each member's manager holds
/// and runs the downloads and uploads it owns, and takes over those of members that are gone.
extension DownloadManager {
    /// How often a member looks for rows to take over: a daemon killed on this machine is
    /// taken over within about this long, one whose machine died once its lease has run out.
    static let fleetWatchInterval: Duration = .seconds(1)

    /// Starts looking for rows to take over, on a store that others may share; once.
    func watchFleet() {
        guard store.database.isShared, fleetWatch == nil, !isShutDown else { return }
        fleetWatch = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: Self.fleetWatchInterval)
                guard !Task.isCancelled, let self else { return }
                await self.takeOver()
            }
        }
    }

    /// Takes over the rows of the queue no live member holds, and runs them as ``restore()``
    /// would: running ones continue from their recorded ranges (when their part files are
    /// where this daemon can see them), queued ones queue, finished ones are remembered.
    func takeOver() async {
        guard !isShutDown, storeFailure == nil else { return }
        do throws(DownloadError) {
            let taken = try await store.takeOver(queue)
            guard taken > 0, !isShutDown else { return }
            let rows = try await store.heldRows(queue: queue)
            guard !isShutDown else { return }
            let inserted = insertRestored(rows)
            linkDependencies(of: inserted)
            let uploads = try await takeOverUploads()
            downloader.configuration.logger.notice(
                "took over \(inserted.count) download(s) and \(uploads) upload(s) of the queue \(queue) from a daemon that is gone")
            schedule()
        } catch {
            if let lost = store.database.lostMembership {
                // Another member took this one's downloads over: none of them may be written, or
                // run, here any more. They stop now, before a transfer writes on.
                halt(store.writer.fail(lost))
                return
            }
            // The store says why at its next write, if it failed for good; a takeover missed
            // now is tried again at the next look.
            downloader.configuration.logger.warning("cannot take over the downloads of gone daemons now: \(error.message)")
        }
    }

    /// Stops looking for rows to take over.
    func stopWatchingFleet() {
        fleetWatch?.cancel()
        fleetWatch = nil
    }
}
