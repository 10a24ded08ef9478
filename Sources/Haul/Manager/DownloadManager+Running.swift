import Foundation

extension DownloadManager {
    // MARK: Transitions

    /// Applies one lifecycle event to `id` and performs what it says: the only way a
    /// download's state changes. The indexes follow, and so do the downloads that depend on it
    /// (a failure runs down a chain of dependants without recursion).
    func transition(_ id: ID, _ event: (inout DownloadLifecycle) -> [DownloadLifecycle.Action]) {
        var failed = apply(id, event)
        while let (dependency, reason) = failed.popLast() {
            for dependent in index.dependentsOf(dependency) where entries[dependent]?.lifecycle.isQueued == true {
                let error = DownloadError.dependencyFailed(dependency, reason: reason)
                failed += apply(dependent) { $0.dependencyFailed(error) }
            }
        }
    }

    /// One transition; returns `(id, reason)` when it made the download fail.
    ///
    /// The entry is changed where it is: a copy of it costs the retains of all its references,
    /// and this runs several times for every download.
    private func apply(_ id: ID, _ event: (inout DownloadLifecycle) -> [DownloadLifecycle.Action]) -> [(ID, String)] {
        guard let before = entries[id]?.lifecycle, let oldKey = entries[id]?.key else { return [] }
        let actions = event(&entries[id]!.lifecycle)
        let after = entries[id]!.lifecycle
        let newKey = entries[id]!.key
        guard !actions.isEmpty || before.status != after.status || oldKey != newKey else { return [] }
        if after.isFinished, !before.isFinished {
            nextFinishOrder += 1
            entries[id]!.finishOrder = nextFinishOrder
        }
        counts[before.status, default: 0] -= 1
        counts[after.status, default: 0] += 1
        if let result = before.result { completedBytes -= result.bytes }
        if let result = after.result { completedBytes += result.bytes }
        if Self.category(before) != Self.category(after) || oldKey != newKey || before.isQueued != after.isQueued {
            let (host, finishOrder, unmet) = (entries[id]!.host, entries[id]!.finishOrder, entries[id]!.unmet)
            unindexState(before, key: oldKey, host: host, finishOrder: finishOrder)
            if !after.isFinished { entries[id]!.finishOrder = nil }
            indexState(after, key: newKey, unmet: unmet, finishOrder: after.isFinished ? finishOrder : nil)
        }
        // Only a transition that forgets the download needs it kept for the actions after that.
        let kept = actions.contains(.forget) ? entries[id] : nil
        perform(actions, for: id, entry: kept)
        // The downloads that wait for this one to complete.
        if (before.status == .completed) != (after.status == .completed) {
            let completed = after.status == .completed
            for dependent in index.dependentsOf(id) {
                guard let lifecycle = entries[dependent]?.lifecycle, !lifecycle.isFinished, !lifecycle.isRunning else { continue }
                entries[dependent]!.unmet += completed ? -1 : 1
                reindexReady(dependent)
            }
        }
        if after.status == .failed, before.status != .failed, entries.contains(id), let error = after.error {
            return [(id, error.message)]
        }
        return []
    }

    /// A queued download whose dependency failed or went away fails too, and so on down.
    func dependencyFailed(_ id: ID, dependency: ID, reason: String) {
        let error = DownloadError.dependencyFailed(dependency, reason: reason)
        transition(id) { $0.dependencyFailed(error) }
    }

    enum Category { case waiting, running, finished }

    static func category(_ lifecycle: DownloadLifecycle) -> Category {
        if lifecycle.isRunning { return .running }
        return lifecycle.isFinished ? .finished : .waiting
    }

    /// Adds `entry` to the indexes its state belongs in.
    func indexState(_ entry: Entry) {
        indexState(entry.lifecycle, key: entry.key, unmet: entry.unmet, finishOrder: entry.finishOrder)
    }

    /// Adds the download of `key` in state `lifecycle` to the indexes that state belongs in.
    private func indexState(_ lifecycle: DownloadLifecycle, key: DownloadQueue.Key, unmet: Int, finishOrder: Int64?) {
        switch Self.category(lifecycle) {
        case .waiting:
            index.insertWaiting(key)
            if lifecycle.isQueued, unmet == 0 { index.insertReady(key) }
        case .running:
            index.insertActive(key.id)
        case .finished:
            if let finishOrder { index.insertStopped(.init(order: finishOrder, id: key.id)) }
        }
    }

    /// Takes `entry` (as it was, with `key`) out of its indexes.
    func unindexState(_ entry: Entry, key: DownloadQueue.Key) {
        unindexState(entry.lifecycle, key: key, host: entry.host, finishOrder: entry.finishOrder)
    }

    /// Takes the download of `key`, in state `lifecycle`, out of that state's indexes.
    private func unindexState(_ lifecycle: DownloadLifecycle, key: DownloadQueue.Key, host: String, finishOrder: Int64?) {
        switch Self.category(lifecycle) {
        case .waiting:
            index.removeWaiting(key)
            index.removeReady(key, host: host)
        case .running:
            index.removeActive(key.id)
        case .finished:
            if let finishOrder { index.removeStopped(.init(order: finishOrder, id: key.id)) }
        }
    }

    /// Puts a queued download in the ready list when nothing holds it back any more, or takes
    /// it out when something does.
    func reindexReady(_ id: ID) {
        guard entries[id]?.lifecycle.isQueued == true, let key = entries[id]?.key else { return }
        if entries[id]?.unmet == 0 {
            index.insertReady(key)
        } else if let host = entries[id]?.host {
            index.removeReady(key, host: host)
        }
    }

    /// Performs a transition's actions, in order, on the entry of `id`, or on `entry` once that
    /// is gone (an action after ``DownloadLifecycle/Action/forget``).
    func perform(_ actions: [DownloadLifecycle.Action], for id: ID, entry: Entry? = nil) {
        for action in actions {
            // Read in place (a copy of the entry for every action would cost more than the
            // actions), or from `entry` once the download is forgotten.
            guard entries.contains(id) || entry != nil else { return }
            switch action {
            case .start(let attempt):
                launch(id, attempt: attempt)
            case .stopTransfer:
                entries[id]?.live?.task?.cancel()
            case .releaseHostSlot:
                guard let host = entries[id]?.live?.host ?? entries[id]?.host ?? entry?.live?.host ?? entry?.host else { return }
                hosts.release(1, host: host)
                transferring -= 1
            case .persist(let status):
                let lifecycle = entries[id]?.lifecycle ?? entry?.lifecycle
                var patch = RowPatch.status(status, error: lifecycle?.error, finishOrder: entries[id]?.finishOrder ?? entry?.finishOrder)
                if status == .completed, let result = lifecycle?.result {
                    patch.set(.path, result.path)
                    patch.set(.resultBytes, result.bytes)
                    // Its secrets were for fetching it; a finished download does not keep them.
                    if let plain = entries[id]?.request.withoutSecrets, let stored = try? DownloadRow.storedOptions(of: plain) {
                        entries[id]?.request = plain
                        patch.set(.request, stored)
                    }
                }
                store.writer.update(id, patch)
            case .announce(let announcement):
                if announcement != .started, announcement != .added, entries[id]?.live != nil { entries[id]?.live?.endedAt = ProcessTime.now }
                hub.send(event(announcement, id: id, lifecycle: entries[id]?.lifecycle ?? entry?.lifecycle,
                               filePath: entries[id]?.filePath ?? entry?.filePath))
            case .discardPartial:
                if let path = entries[id]?.filePath ?? entry?.filePath ?? board.progress(of: id)?.destination {
                    PartFile.discard(destination: path, id: id, store: store)
                }
                board.remove(id)
            case .forget:
                forget(id)
            }
        }
    }

    func event(_ announcement: DownloadLifecycle.Announcement, id: ID, lifecycle: DownloadLifecycle?, filePath: String?) -> Event {
        switch announcement {
        case .added: .added(id)
        case .started: .started(id)
        case .paused: .paused(id)
        case .completed: .completed(id, lifecycle?.result ?? DownloadResult(path: filePath ?? "", bytes: 0, bytesFetched: 0, wasAlreadyComplete: false))
        case .failed: .failed(id, lifecycle?.error ?? .cancelled)
        case .removed: .removed(id)
        }
    }

    /// Drops a download from memory and the store; what waited for it fails.
    func forget(_ id: ID) {
        guard let entry = entries.removeValue(forKey: id) else { return }
        unindexState(entry, key: entry.key)
        counts[entry.lifecycle.status, default: 0] -= 1
        if let result = entry.lifecycle.result { completedBytes -= result.bytes }
        byRequest.remove(RequestIndex.Key(entry.request), id)
        if case .file(let path) = entry.request.destination, byFile[path] == id { byFile[path] = nil }
        store.writer.delete(id)
        board.remove(id)
        for dependent in index.takeDependents(of: id) where entries[dependent]?.lifecycle.isQueued == true {
            dependencyFailed(dependent, dependency: id, reason: "it was removed")
        }
    }

    // MARK: Running

    /// Starts what the limits allow: O(log n) per download started, whatever the queue's length.
    func schedule() {
        guard !isShutDown, storeFailure == nil else {
            if isIdle { wakeIdleWaiters() }
            return
        }
        // Hosts that have free slots again take back the downloads set aside for them.
        for host in index.blockedHosts {
            index.unblock(host: host, count: hosts.available(host))
        }
        while transferring < maxConcurrent, let key = index.popReady() {
            guard let entry = entries[key.id], entry.lifecycle.isQueued, entry.unmet == 0 else { continue }
            guard hosts.acquire(upTo: 1, host: entry.host) == 1 else {
                index.block(key, host: entry.host)
                continue
            }
            transferring += 1
            transition(key.id) { $0.start() }
        }
        if isIdle { wakeIdleWaiters() }
    }

    /// Runs attempt `attempt` of `id` in a task of its own, which reports its end back here.
    func launch(_ id: ID, attempt: Int) {
        guard let entry = entries[id] else { return }
        var request = entry.request
        // Once the server named the file, a restart goes to the same file (not `name.1.ext`
        // because a different file took the name meanwhile).
        if let path = entry.path { request.destination = .file(path) }
        let revalidate = entry.revalidate
        entries[id]?.revalidate = false
        let (board, hub) = (board, self.hub)
        var runEvents = DownloadRunner.RunEvents()
        runEvents.progress = { progress in
            board.update(id, progress)
            if hub.hasSubscribers { hub.send(.progress(id, progress)) }
        }
        runEvents.note = { note in
            var progress = board.progress(of: id) ?? DownloadProgress(bytesDone: 0, bytesPerSecond: 0)
            progress.note = note
            board.update(id, progress)
            if hub.hasSubscribers { hub.send(.progress(id, progress)) }
        }
        runEvents.resolved = { path in
            var progress = board.progress(of: id) ?? DownloadProgress(bytesDone: 0, bytesPerSecond: 0)
            progress.destination = path
            board.update(id, progress)
        }
        runEvents.transferred = { [weak self] in
            await self?.transferred(id, attempt: attempt)
        }
        let limiter = downloader.limiter(request.rateLimit)
        let runner = downloader.runner(request, id: id, revalidate: revalidate, lease: HostLease(connections: hosts, host: entry.host),
                                       validated: true, limiter: limiter, events: runEvents)
        let standIn = attemptRunner
        let (events, asked) = (runEvents, request)
        let task = AttemptHandle.start { [weak self] _ in
            let outcome: Result<DownloadResult, DownloadError>
            if let standIn {
                outcome = await standIn(asked, id, events)
            } else {
                do throws(DownloadError) { outcome = .success(try await runner.run()) } catch { outcome = .failure(error) }
            }
            await self?.attemptEnded(id, attempt: attempt, outcome)
        }
        entries[id]?.live = Live(task: task, limiter: limiter, host: entry.host, startedAt: ProcessTime.now)
    }

    /// Every byte of the attempt is in; it no longer counts among the downloads running at once.
    func transferred(_ id: ID, attempt: Int) {
        transition(id) { $0.transferred(attempt) }
        schedule()
    }

    /// The attempt's task ended, by itself or because it was stopped.
    func attemptEnded(_ id: ID, attempt: Int, _ outcome: Result<DownloadResult, DownloadError>) {
        guard entries.contains(id) else { return }
        switch outcome {
        case .success(let result):
            entries[id]?.path = result.path
            board.remove(id)
        case .failure:
            if let path = board.progress(of: id)?.destination { entries[id]?.path = path }
        }
        entries[id]?.live?.task = nil
        transition(id) { $0.attemptEnded(attempt, outcome) }
        if let failure = storeFailure {
            halt(failure)
            transition(id) { $0.fail(failure) }
        }
        schedule()
    }

    /// The store failed: nothing more can be recorded, so every download stops where it is
    /// (its bytes stay in its part file) and reports the store's error.
    func halt(_ failure: DownloadError) {
        guard !halted else { return }
        halted = true
        for id in Array(index.active) { transition(id) { $0.shutdown() } }
        for key in index.waiting.elements(from: 0, limit: index.waiting.count) {
            transition(key.id) { $0.fail(failure) }
        }
    }
}
