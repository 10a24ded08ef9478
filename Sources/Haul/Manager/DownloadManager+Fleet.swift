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
            let look = try await store.takeOver(queue)
            fleetOthers = look.others
            if look.taken > 0, !isShutDown {
                let rows = try await store.heldRows(queue: queue)
                guard !isShutDown else { return }
                let inserted = insertRestored(rows)
                linkDependencies(of: inserted)
                let uploads = try await takeOverUploads()
                downloader.configuration.logger.notice(
                    "took over \(inserted.count) download(s) and \(uploads) upload(s) of the queue \(queue) from a daemon that is gone")
                schedule()
            }
            poolMayHaveRows = true
            await claimFromPool()
            try await offerSurplus()
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

    // MARK: Sharing the work

    /// A member keeps about this many queued downloads ready per download it may run at once
    /// (`-j`): it claims more from the pool below half of it, and offers what is past twice it.
    static let fleetReadyPerSlot = 4

    /// Claims queued downloads offered by the fleet while fewer than `2 × -j` are ready here,
    /// up to `4 × -j`; one claim at a time. The pool is asked again at once after a full batch
    /// (there may be more), else at the next look.
    func claimFromPool() async {
        let keep = maxConcurrent * Self.fleetReadyPerSlot
        guard store.database.isShared, restored, poolMayHaveRows, !claiming, !isShutDown, storeFailure == nil,
            book.index.ready.count < keep / 2
        else { return }
        claiming = true
        defer { claiming = false }
        let want = keep - book.index.ready.count
        do throws(DownloadError) {
            let rows = try await store.claim(queue: queue, limit: want)
            poolMayHaveRows = rows.count == want
            guard !rows.isEmpty, !isShutDown else { return }
            insertRestored(rows)
            claimedFromPool += rows.count
            schedule()
        } catch {
            poolMayHaveRows = false
            downloader.configuration.logger.warning("\(error.message)")
        }
    }

    /// Starts ``claimFromPool()`` when few downloads are ready here: after each step of the
    /// queue, not only at the next look.
    func claimFromPoolSoon() {
        guard store.database.isShared, poolMayHaveRows, !claiming, restored,
            book.index.ready.count < maxConcurrent * Self.fleetReadyPerSlot / 2
        else { return }
        Task { await self.claimFromPool() }
    }

    /// Offers the queued downloads past `8 × -j` ready here (the last in queue order) to the
    /// other live members: a list added through one daemon is run by all. Only downloads that
    /// never ran here and that no dependency ties to this member's others go
    /// (``DownloadBook/handOver(_:)``). Given back to the book if the store refuses.
    func offerSurplus() async throws(DownloadError) {
        let keep = maxConcurrent * Self.fleetReadyPerSlot
        let ready = book.index.ready.count
        guard fleetOthers > 0, ready > keep * 2, !isShutDown, storeFailure == nil else { return }
        var handed: [Entry] = []
        for key in book.index.ready.elements(from: keep, limit: ready - keep) where board.progress(of: key.id) == nil {
            if let entry = book.handOver(key.id) { handed.append(entry) }
        }
        guard !handed.isEmpty else { return }
        do {
            try await store.offer(handed.map(\.id))
            offeredToPool += handed.count
        } catch {
            for entry in handed where !book.entries.contains(entry.id) { book.insert(entry) }
            schedule()
            throw error
        }
    }

    /// Stops looking for rows to take over.
    func stopWatchingFleet() {
        fleetWatch?.cancel()
        fleetWatch = nil
    }
}
