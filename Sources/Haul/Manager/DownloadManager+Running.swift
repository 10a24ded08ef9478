import Foundation

extension DownloadManager {
    // MARK: Transitions

    /// Applies one lifecycle event to `id` in the book and carries out what it says: the only
    /// way a download's state changes.
    func transition(_ id: ID, _ event: (inout DownloadLifecycle) -> [DownloadLifecycle.Action]) {
        perform(book.transition(id, event))
    }

    /// A queued download whose dependency failed or went away fails too, and so on down.
    func dependencyFailed(_ id: ID, dependency: ID, reason: String) {
        perform(book.dependencyFailed(id, dependency: dependency, reason: reason))
    }

    /// Carries out the book's effects, in order.
    func perform(_ effects: [DownloadBook.Effect]) {
        for effect in effects {
            switch effect {
            case .launch(let id, let attempt):
                launch(id, attempt: attempt)
            case .stopTransfer(let id):
                book.entries[id]?.live?.task?.cancel()
            case .releaseHostSlot(let host):
                hosts.release(1, host: host)
            case .persist(let id, let patch):
                store.writer.update(id, patch)
            case .announce(let event):
                hub.send(event)
            case .discardPartial(let id, let path):
                if let path = path ?? board.progress(of: id)?.destination {
                    PartFile.discard(destination: path, id: id, store: store)
                }
                board.remove(id)
            case .deleteRow(let id):
                store.writer.delete(id)
                board.remove(id)
                if looking { removedWhileLooking.insert(id) }
            case .storeRequest(let id, let request):
                // Only a request that cannot be encoded fails here; its row then keeps the old one,
                // secrets and all, which is said rather than passed over.
                do { store.writer.update(id, try .request(request)) } catch {
                    downloader.configuration.logger.error("cannot store the request of download \(id) without its secrets: \(error)")
                }
            }
        }
    }

    // MARK: Running

    /// Starts what the limits allow: O(log n) per download started, whatever the queue's length.
    /// Connection slots were given back by someone other than a download of this manager (a
    /// mirror's checks, which take the same hosts' slots): downloads set aside for want of one
    /// may start now.
    package func hostSlotsFreed() { schedule() }

    func schedule() {
        guard !isShutDown, storeFailure == nil else {
            // The store failed after the last attempt that ended looked (on the writer's own
            // thread): the downloads still waiting fail now, or nothing would end the run.
            if !isShutDown, let failure = storeFailure { halt(failure) }
            if isIdle { wakeIdleWaiters() }
            return
        }
        startUploads()
        perform(book.schedule(maxConcurrent: maxConcurrent - uploadBook.running, hosts: hosts, maxCommitting: maxCommitting))
        // A download of a higher priority that held an upload back may have been set aside for
        // want of a connection to its host: the slot it left is the upload's.
        startUploads()
        claimFromPoolSoon()
        offerSurplusSoon()
        shareHostsSoon()
        publishCounts()
        if isIdle { wakeIdleWaiters() }
    }

    /// Runs attempt `attempt` of `id` in a task of its own, which reports its end back here.
    func launch(_ id: ID, attempt: Int) {
        guard let entry = book.entries[id] else { return }
        var request = entry.request
        // Once the server named the file, a restart goes to the same file (not `name.1.ext`
        // because a different file took the name meanwhile).
        if let path = entry.path { request.destination = .file(path) }
        let revalidate = entry.revalidate
        book.entries[id]?.revalidate = false
        let (board, hub) = (board, self.hub)
        var runEvents = DownloadRunner.RunEvents()
        runEvents.progress = { progress in
            board.update(id, progress)
            if hub.wantsProgress { hub.send(.progress(id, progress)) }
        }
        runEvents.note = { note in
            var progress = board.progress(of: id) ?? DownloadProgress(bytesDone: 0, bytesPerSecond: 0)
            progress.note = note
            board.update(id, progress)
            if hub.wantsProgress { hub.send(.progress(id, progress)) }
        }
        runEvents.resolved = { path in
            var progress = board.progress(of: id) ?? DownloadProgress(bytesDone: 0, bytesPerSecond: 0)
            progress.destination = path
            board.update(id, progress)
        }
        runEvents.transferred = { [weak self] in
            self?.report(.transferred(id, attempt: attempt))
        }
        let limiter = downloader.limiter(request.rateLimit)
        let runner = downloader.runner(
            request, id: id, revalidate: revalidate, lease: HostLease(connections: hosts),
            validated: true, limiter: limiter, committingAtMost: maxCommitting, events: runEvents)
        let standIn = attemptRunner
        let (events, asked) = (runEvents, request)
        let task = AttemptHandle.start(finishing: false) { [weak self] handle in
            let outcome: Result<DownloadResult, DownloadError>
            if let standIn {
                outcome = await standIn(asked, id, events)
            } else {
                do throws(DownloadError) { outcome = .success(try await runner.run()) } catch { outcome = .failure(error) }
            }
            if let self { self.report(.ended(id, attempt: attempt, outcome, handle)) } else { handle.finish() }
        }
        book.entries[id]?.live = Live(task: task, limiter: limiter, host: entry.host, startedAt: ProcessTime.now)
    }

    /// Keeps what an attempt's task reports, for ``takeReports()`` (seen to when none is due).
    nonisolated func report(_ report: AttemptReports.Report) {
        if reports.post(report) { Task { await self.takeReports() } }
    }

    /// Takes in every report of the attempts that came since the last take and starts what the
    /// limits then allow, once for them all; again for those that came meanwhile, until none did.
    /// With many downloads ending together this is one hop to the manager for a batch of them,
    /// not two for each (10,000 files of 1 KB: 11 % less CPU).
    func takeReports() {
        while true {
            let taken = reports.take()
            if taken.isEmpty { return }
            for report in taken {
                switch report {
                case .transferred(let id, let attempt):
                    // Every byte is in: it no longer counts among the downloads running at once.
                    transition(id) { $0.transferred(attempt) }
                case .ended(let id, let attempt, let outcome, let handle):
                    attemptEnded(id, attempt: attempt, outcome)
                    handle.finish()
                }
            }
            schedule()
        }
    }

    /// The attempt's task ended, by itself or because it was stopped.
    func attemptEnded(_ id: ID, attempt: Int, _ outcome: Result<DownloadResult, DownloadError>) {
        guard book.entries.contains(id) else { return }
        switch outcome {
        case .success(let result):
            book.entries[id]?.path = result.path
            board.remove(id)
        case .failure:
            if let path = board.progress(of: id)?.destination { book.entries[id]?.path = path }
        }
        book.entries[id]?.live?.task = nil
        transition(id) { $0.attemptEnded(attempt, outcome) }
        if let failure = storeFailure {
            halt(failure)
            transition(id) { $0.fail(failure) }
        }
    }

    /// The store failed: nothing more can be recorded, so every download stops where it is
    /// (its bytes stay in its part file) and reports the store's error. Downloads and uploads
    /// queued again after that (a resume) fail as they come: none can start.
    func halt(_ failure: DownloadError) {
        if !halted { for id in Array(book.index.active) { transition(id) { $0.shutdown() } } }
        halted = true
        for key in book.index.waiting.elements(from: 0, limit: book.index.waiting.count) {
            transition(key.id) { $0.fail(failure) }
        }
        haltUploads(failure)
    }
}
