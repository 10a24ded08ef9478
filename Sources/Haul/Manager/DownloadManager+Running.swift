import Foundation

extension DownloadManager {
    // MARK: Running

    /// Starts what the queue rules allow and fails what can never start.
    func schedule() {
        // Nothing waits to start (everything is paused, running or finished): nothing to decide.
        guard !isShutDown, jobs.values.contains(where: { $0.record.status == .queued && $0.stopping == nil }) else {
            if isIdle { wakeIdleWaiters() }
            return
        }
        let items = jobs.values.map { job in
            QueuePolicy.Item(id: job.record.id, host: job.host, priority: job.record.priority,
                             position: job.record.position, dependencies: job.record.dependencyIDs,
                             status: job.stopping == nil ? job.record.status : .running,
                             restoredRunning: job.restoredRunning, failure: job.error?.message)
        }
        for decision in policy.decide(items, connectionsInUse: hosts.snapshot()) {
            switch decision {
            case .start(let id):
                start(id)
            case .fail(let id, let dependency, let reason):
                record(.failure(.dependencyFailed(dependency, reason: reason)), for: id)
            }
        }
        if isIdle { wakeIdleWaiters() }
    }

    func start(_ id: ID) {
        guard var job = jobs[id] else { return }
        // The policy saw a free slot, but a segmented download may have taken it since.
        job.holdsHostSlot = hosts.acquire(upTo: 1, host: job.host) == 1
        var request = job.record.request
        // Once the server named the file, a restart goes to the same file (not `name.1.ext`
        // because a different file took the name meanwhile).
        if let resolved = job.record.resolvedPath { request.destination = .file(resolved) }
        let task = downloader.download(request, lease: HostLease(connections: hosts, host: job.host))
        job.attempt += 1
        job.task = task
        job.restoredRunning = false
        job.error = nil
        job.result = nil
        job.startedAt = .now
        job.endedAt = nil
        job.record.status = .running
        let attempt = job.attempt
        job.monitor = Task { [weak self] in
            for await progress in task.progress {
                await self?.progressed(id, attempt: attempt, progress)
            }
            guard !Task.isCancelled else { return }
            let outcome = await task.outcome()
            await self?.ended(id, attempt: attempt, outcome)
        }
        jobs[id] = job
        try? persist([job.record])
        emit(.started(id))
    }

    func progressed(_ id: ID, attempt: Int, _ progress: DownloadProgress) {
        guard let job = jobs[id], job.attempt == attempt, job.task != nil else { return }
        jobs[id]?.progress = progress
        if let destination = progress.destination, destination != job.record.resolvedPath {
            try? update(id) { $0.record.resolvedPath = destination }
        }
        emit(.progress(id, progress))
    }

    /// The attempt ended by itself (no stop claimed it).
    func ended(_ id: ID, attempt: Int, _ outcome: Result<DownloadResult, DownloadError>) {
        guard let job = jobs[id], job.attempt == attempt, job.task != nil else { return }
        jobs[id]?.task = nil
        jobs[id]?.monitor = nil
        releaseHostSlot(of: job)
        record(outcome, for: id)
        schedule()
    }

    /// Saves and announces how an attempt ended.
    func record(_ outcome: Result<DownloadResult, DownloadError>, for id: ID) {
        switch outcome {
        case .success(let result):
            try? update(id) { job in
                job.record.status = .completed
                job.record.resolvedPath = result.path
                job.record.resultBytes = result.bytes
                job.record.errorKind = nil
                job.record.lastError = nil
                job.result = result
                job.endedAt = .now
            }
            emit(.completed(id, result))
        case .failure(let error):
            try? update(id) { job in
                job.record.status = .failed
                job.record.errorKind = error.kind.description
                job.record.lastError = error.message
                job.error = error
                job.endedAt = .now
            }
            emit(.failed(id, error))
        }
    }

    /// Stops a running attempt and then does what the strongest stop asked for meanwhile.
    func stop(_ id: ID, _ reason: Stop) async {
        guard let job = jobs[id] else { return }
        if let pending = job.stopping {
            jobs[id]?.stopping = max(pending, reason)
            return
        }
        guard let task = job.task else { return }
        // Claiming the task first keeps the monitor from reporting the end of this attempt.
        jobs[id]?.task = nil
        jobs[id]?.monitor?.cancel()
        jobs[id]?.monitor = nil
        jobs[id]?.stopping = reason
        await task.pauseAndWait()
        let finished: Result<DownloadResult, DownloadError>? = task.isPaused ? nil : await task.outcome()
        // State may have changed while waiting: re-read it.
        let final = jobs[id]?.stopping ?? reason
        let resumeAfter = jobs[id]?.resumeAfterStop ?? false
        jobs[id]?.stopping = nil
        jobs[id]?.resumeAfterStop = false
        releaseHostSlot(of: job)
        guard jobs[id] != nil else { return }

        if let finished, case .success = finished {
            record(finished, for: id)
            if final == .remove { forget(id) }
        } else if let finished, case .failure(let error) = finished, error.kind != .cancelled {
            record(finished, for: id)
            if final == .remove {
                await discardPartial(of: jobs[id]?.record ?? job.record)
                forget(id)
            }
        } else {
            switch final {
            case .shutdown:
                // The row keeps saying "running": a restore continues it.
                jobs[id]?.record.status = .paused
                jobs[id]?.endedAt = .now
                emit(.paused(id))
            case .pause:
                try? update(id) { job in
                    job.record.status = resumeAfter ? .queued : .paused
                    job.endedAt = .now
                }
                emit(.paused(id))
            case .cancel, .remove:
                task.cancel()
                _ = await task.outcome()
                if final == .remove {
                    forget(id)
                } else {
                    record(.failure(.cancelled), for: id)
                }
            }
        }
        schedule()
    }

    func releaseHostSlot(of job: Job) {
        if job.holdsHostSlot { hosts.release(1, host: job.host) }
    }

    func forget(_ id: ID) {
        guard jobs.removeValue(forKey: id) != nil else { return }
        try? store.deleteJob(id: id)
        emit(.removed(id))
    }

    /// Deletes a stopped download's partial file and record (once its file is known).
    func discardPartial(of record: JobRecord) async {
        guard let path = record.resolvedPath ?? (record.destinationKind == "file" ? record.destinationPath : nil) else { return }
        await PartFile.discard(destination: path, store: store)
    }
}
