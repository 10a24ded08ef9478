import Foundation

extension DownloadManager {
    // MARK: Controlling

    /// Pauses a download: a running one stops (its partial and ranges are kept), a queued one
    /// waits until ``resume(_:)``. Returns once it has stopped.
    public func pause(_ id: ID) async {
        if uploadBook.entries[id] != nil { return await pauseUpload(id) }
        transition(id) { $0.pause() }
        await stopped(id)
        schedule()
    }

    /// Queues a paused or failed download again (a failed one starts a new attempt), or a
    /// completed one whose file is gone. See ``requeue(_:)`` to check a completed one anyway.
    public func resume(_ id: ID) {
        if uploadBook.entries[id] != nil { return resumeUpload(id) }
        guard let entry = book.entries[id] else { return }
        if entry.lifecycle.isFinished, entry.lifecycle.error == nil {
            requeueIfFileGone(id)
        } else {
            transition(id) { $0.resume() }
            failIfADependencyFailed(id)
        }
        schedule()
    }

    /// Like ``resume(_:)``, and a completed download is queued for a new attempt too: the
    /// engine asks the server whether the file changed (one conditional request), keeps it if
    /// not, and replaces it with the new version if so. What `haul get` does when run again.
    public func requeue(_ id: ID) {
        if uploadBook.entries[id] != nil { return resumeUpload(id) }
        guard let entry = book.entries[id] else { return }
        if entry.lifecycle.result != nil { book.entries[id]?.revalidate = true }
        transition(id) { $0.requeue() }
        failIfADependencyFailed(id)
        schedule()
    }

    /// Stops a download and deletes its partial file; it stays listed as failed (cancelled).
    public func cancel(_ id: ID) async {
        if uploadBook.entries[id] != nil { return await cancelUpload(id) }
        transition(id) { $0.cancel() }
        await stopped(id)
        schedule()
    }

    /// Forgets a download. An unfinished one is stopped and its partial file deleted; a
    /// completed one's file is kept.
    public func remove(_ id: ID) async {
        if uploadBook.entries[id] != nil { return await removeUpload(id) }
        transition(id) { $0.remove() }
        await stopped(id)
        schedule()
    }

    /// Waits until the attempt of `id`, if one runs, has ended (it reports its end itself).
    func stopped(_ id: ID) async {
        guard let task = book.entries[id]?.live?.task else { return }
        await task.wait()
    }

    /// A resumed download whose dependency failed while it was paused fails now.
    private func failIfADependencyFailed(_ id: ID) {
        guard let entry = book.entries[id], entry.lifecycle.isQueued else { return }
        for dependency in entry.dependencies {
            guard let other = book.entries[dependency] else {
                dependencyFailed(id, dependency: dependency, reason: "it was removed")
                return
            }
            if let error = other.lifecycle.error {
                dependencyFailed(id, dependency: dependency, reason: error.message)
                return
            }
        }
    }

    /// Pauses every queued and running download.
    public func pauseAll() async {
        pausesOfAll += 1
        let waiting = book.index.waiting.elements(from: 0, limit: book.index.waiting.count).map(\.id)
        for id in waiting { transition(id) { $0.pause() } }
        let running = book.index.active
        for id in running { transition(id) { $0.pause() } }
        // The waiting first (no wait): a running one that stops would start them otherwise.
        for id in uploadIDs([.queued]) { await pauseUpload(id) }
        for id in uploadIDs([.running]) { await pauseUpload(id) }
        for id in running { await stopped(id) }
        schedule()
        // In a fleet, what this member was putting into the pool is there when this returns:
        // the daemon's pauseAll claims the pool again once every member has paused.
        await settleOffers()
    }

    /// Queues every paused download again, in queue order.
    public func resumeAll() {
        for key in book.index.waiting.elements(from: 0, limit: book.index.waiting.count) where book.entries[key.id]?.lifecycle.status == .paused {
            transition(key.id) { $0.resume() }
            failIfADependencyFailed(key.id)
        }
        for id in uploadIDs([.paused]) { resumeUpload(id) }
        schedule()
    }

    /// Cancels every unfinished download.
    public func cancelAll() async {
        let running = book.index.active
        for id in running + book.index.waiting.elements(from: 0, limit: book.index.waiting.count).map(\.id) {
            transition(id) { $0.cancel() }
        }
        for id in uploadIDs([.queued, .paused]) { await cancelUpload(id) }
        for id in uploadIDs([.running]) { await cancelUpload(id) }
        for id in running { await stopped(id) }
        schedule()
    }

    /// Forgets every completed and failed download (their files are kept).
    public func removeAllStopped() {
        for key in book.index.stopped.elements(from: 0, limit: book.index.stopped.count) {
            transition(key.id) { $0.remove() }
        }
        for id in uploadIDs([.completed, .failed]) { forgetUpload(id) }
        schedule()
    }

    /// Removes every download and upload, finished or not.
    public func removeAll() async {
        let running = book.index.active
        for id in Array(book.entries.keys) { transition(id) { $0.remove() } }
        for id in uploadIDs([.queued, .paused, .completed, .failed]) { await removeUpload(id) }
        for id in uploadIDs([.running]) { await removeUpload(id) }
        for id in running { await stopped(id) }
        schedule()
    }

    /// Moves a download that has not started (queued or paused) to `index` among those,
    /// 0 being the front. Priorities still come first. Returns the index it landed at, or nil
    /// when the download is not waiting. O(log n).
    @discardableResult
    public func move(_ id: ID, to target: Int) -> Int? {
        guard var entry = book.entries[id], DownloadBook.category(entry.lifecycle) == .waiting else { return nil }
        let waiting = book.index.waiting
        guard let current = waiting.rank(of: DownloadQueue.waitingKey(entry.key)) else { return nil }
        let target = min(max(0, target), waiting.count - 1)
        guard current != target else { return target }
        // The neighbours it lands between once it has left its place; only those of its own
        // priority bound its position (priorities still come first).
        func remaining(_ index: Int) -> DownloadQueue.Key { waiting[index < current ? index : index + 1] }
        let low = target > 0 ? remaining(target - 1) : nil
        let high = target < waiting.count - 1 ? remaining(target) : nil
        let position: Int64
        switch (
            low.flatMap { $0.priority == entry.priority ? $0.position : nil },
            high.flatMap { $0.priority == entry.priority ? $0.position : nil }
        ) {
        case let (low?, high?):
            guard high - low > 1 else {
                // No room between them: spread the waiting list out again (rare: every
                // download added leaves a gap of a million).
                renumberWaiting()
                return move(id, to: target)
            }
            position = low + (high - low) / 2
        case let (low?, nil): position = low + Self.positionStep
        case let (nil, high?): position = high - Self.positionStep
        case (nil, nil): position = entry.position
        }
        book.unindexState(entry, key: entry.key)
        entry.position = position
        book.entries[id] = entry
        book.indexState(entry)
        store.writer.update(id, .order(priority: entry.priority, position: position))
        schedule()
        return book.index.waiting.rank(of: DownloadQueue.waitingKey(entry.key)) ?? target
    }

    /// Gives every waiting download a fresh position, `positionStep` apart, in the same order.
    private func renumberWaiting() {
        let keys = book.index.waiting.elements(from: 0, limit: book.index.waiting.count)
        var position = book.nextPosition
        for key in keys {
            guard var entry = book.entries[key.id] else { continue }
            book.unindexState(entry, key: entry.key)
            entry.position = position
            book.entries[key.id] = entry
            book.indexState(entry)
            store.writer.update(key.id, .order(priority: entry.priority, position: position))
            position += Self.positionStep
        }
        book.nextPosition = position
    }

    /// Stops every running download, keeping its partial and leaving its row as a crash
    /// would (so a later ``restore()`` continues it), and ends the event streams. The
    /// ``Downloader`` stays open; shut it down afterwards.
    /// Calling it again (from a signal handler and the main code, say) waits for the same
    /// shutdown to finish.
    public func shutdown() async {
        if let shuttingDown {
            await shuttingDown.value
            return
        }
        isShutDown = true
        stopWatchingFleet()
        let running = book.index.active
        for id in running { transition(id) { $0.shutdown() } }
        let tasks = running.compactMap { book.entries[$0]?.live?.task }
        let work = Task {
            await shutDownUploads()
            for task in tasks { await task.wait() }
            // What the transfers recorded on their way out is written before anyone exits.
            // A failure here is the writer's, and read from it (``failure``).
            do throws(DownloadError) { try await store.flush() } catch {}
            hub.finish()
            wakeIdleWaiters()
        }
        shuttingDown = work
        await work.value
    }
}
