import Foundation

extension DownloadManager {
    // MARK: Controlling

    /// Pauses a download: a running one stops (its partial and ranges are kept), a queued one
    /// waits until ``resume(_:)``. Returns once it has stopped.
    public func pause(_ id: ID) async {
        guard let job = jobs[id] else { return }
        switch job.record.status {
        case .queued:
            try? update(id) { $0.record.status = .paused }
            emit(.paused(id))
            schedule()
        case .running:
            await stop(id, .pause)
        default:
            break
        }
    }

    /// Queues a paused or failed download again (a failed one starts a new attempt), or a
    /// completed one whose file is gone. See ``requeue(_:)`` to check a completed one anyway.
    public func resume(_ id: ID) {
        guard let job = jobs[id] else { return }
        if job.stopping != nil {
            jobs[id]?.resumeAfterStop = true
            return
        }
        switch job.record.status {
        case .paused, .failed:
            try? update(id) { job in
                job.record.status = .queued
                job.error = nil
            }
        case .completed:
            try? requeueIfFileGone(id)
        default:
            break
        }
        schedule()
    }

    /// Like ``resume(_:)``, and a completed download is queued for a new attempt too: the
    /// engine asks the server again and keeps the file if it is still the same (one HEAD), or
    /// saves the new version as `name.1.ext`. What `haul get` does when run again.
    public func requeue(_ id: ID) {
        guard let job = jobs[id] else { return }
        if job.record.status == .completed, job.stopping == nil {
            try? update(id) { job in
                job.record.status = .queued
                job.result = nil
            }
        }
        resume(id)
    }

    /// Stops a download and deletes its partial file; it stays listed as failed (cancelled).
    public func cancel(_ id: ID) async {
        guard let job = jobs[id] else { return }
        switch job.record.status {
        case .running:
            await stop(id, .cancel)
        case .queued, .paused:
            await discardPartial(of: job.record)
            record(.failure(.cancelled), for: id)
            schedule()
        default:
            break
        }
    }

    /// Forgets a download. An unfinished one is stopped and its partial file deleted; a
    /// completed one's file is kept.
    public func remove(_ id: ID) async {
        guard let job = jobs[id] else { return }
        if job.record.status == .running {
            await stop(id, .remove)
            return
        }
        if job.record.status != .completed { await discardPartial(of: job.record) }
        forget(id)
        schedule()
    }

    /// Pauses every queued and running download.
    public func pauseAll() async {
        await forEach(jobs.values.filter { $0.record.status == .queued || $0.record.status == .running }) { await $0.pause($1) }
    }

    /// Queues every paused download again.
    public func resumeAll() {
        for job in jobs.values.sorted(by: { $0.record.position < $1.record.position }) where job.record.status == .paused {
            resume(job.record.id)
        }
    }

    /// Cancels every unfinished download.
    public func cancelAll() async {
        let unfinished = jobs.values.filter { [.queued, .running, .paused].contains($0.record.status) }
        await forEach(unfinished) { await $0.cancel($1) }
    }

    /// Removes every download, finished or not.
    public func removeAll() async {
        await forEach(Array(jobs.values)) { await $0.remove($1) }
    }

    func forEach(_ selected: [Job], _ action: @escaping @Sendable (DownloadManager, ID) async -> Void) async {
        await withTaskGroup(of: Void.self) { group in
            for job in selected {
                let id = job.record.id
                group.addTask { await action(self, id) }
            }
        }
    }

    /// Moves a download that has not started (queued or paused) to `index` among those,
    /// 0 being the front. Priorities still come first. Returns the index it landed at, or nil
    /// when the download is not waiting.
    @discardableResult
    public func move(_ id: ID, to index: Int) -> Int? {
        let waiting = jobs.values
            .filter { $0.record.status == .queued || $0.record.status == .paused }
            .sorted { $0.record.position < $1.record.position }
        guard let from = waiting.firstIndex(where: { $0.record.id == id }) else { return nil }
        let slots = waiting.map(\.record.position)
        var order = waiting.map(\.record.id)
        order.remove(at: from)
        let landed = min(max(0, index), order.count)
        order.insert(id, at: landed)
        var changed: [JobRecord] = []
        for (slot, movedID) in zip(slots, order) where jobs[movedID]?.record.position != slot {
            jobs[movedID]?.record.position = slot
            if let record = jobs[movedID]?.record { changed.append(record) }
        }
        try? persist(changed)
        schedule()
        return landed
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
        let running = jobs.values.filter { $0.record.status == .running }
        let work = Task {
            await forEach(running) { await $0.stop($1, .shutdown) }
            for subscriber in subscribers.values { subscriber.finish() }
            subscribers = [:]
            wakeIdleWaiters()
        }
        shuttingDown = work
        await work.value
    }
}
