import Foundation

/// The manager's bookkeeping as a value: every download's entry, the queue's indexes, the
/// dedupe maps, the counts, and the transitions and scheduling that keep them consistent.
///
/// It does no I/O. A transition applies one ``DownloadLifecycle`` event (and what it causes: the
/// dependants of a download that failed or went away fail too) and returns the ``Effect``s for
/// the ``DownloadManager`` to carry out, in order: launch an attempt, stop a transfer, give a
/// host slot back, write the store, announce an event, delete a partial file. Tested with plain
/// values (`DownloadBookTests`), as AsyncHTTPClient tests its connection pool's state machine.
struct DownloadBook {
    typealias ID = DownloadID
    typealias Entry = DownloadManager.Entry

    /// What the manager does for a transition.
    enum Effect {
        /// Run attempt `attempt` of the download (its entry says how).
        case launch(ID, attempt: Int)
        /// Cancel the download's running transfer.
        case stopTransfer(ID)
        /// Give back a connection slot of `host`.
        case releaseHostSlot(host: String)
        /// Write this change of the download's row.
        case persist(ID, RowPatch)
        case announce(DownloadManager.Event)
        /// Delete the download's partial file (at `path`, or where its transfer said) and forget
        /// its progress.
        case discardPartial(ID, path: String?)
        /// The download is forgotten: delete its row and its progress.
        case deleteRow(ID)
        /// Store this request as the download's own (a completed one's, without its secrets).
        case storeRequest(ID, DownloadRequest)
    }

    var entries = EntryTable()
    var index = DownloadQueue()
    /// Same URL, same destination: the same download.
    var byRequest = RequestIndex()
    /// The downloads writing each file asked for by path.
    var byFile: [String: ID] = [:]
    /// Downloads that hold a slot (transferring, not committing).
    var transferring = 0
    /// Downloads whose bytes are all in and whose file is being flushed and put in place: they
    /// gave their slot back, but each still holds its open part file and its task.
    var committing = 0
    /// Past this many downloads committing, no new one starts: a disk slower than the network
    /// bounds the open files and the memory instead of letting thousands wait to be written.
    static let maxCommitting = 256
    var counts: [DownloadStatus: Int] = [:]
    /// Bytes of the completed downloads.
    var completedBytes: Int64 = 0
    var nextPosition: Int64 = 0
    var nextFinishOrder: Int64 = 0

    // MARK: Entries

    /// The download that fetches `key` (the same URL into the same destination), if any.
    func find(_ key: RequestIndex.Key) -> ID? {
        let entries = entries
        return byRequest.find(key) { id, key in Self.fetches(entries, id, key) }
    }

    private static func fetches(_ entries: EntryTable, _ id: ID, _ key: RequestIndex.Key) -> Bool {
        entries[id].map { $0.request.url == key.url && $0.request.destination == key.destination } ?? false
    }

    /// Puts a new entry in the maps and indexes.
    mutating func insert(_ entry: Entry) {
        entries[entry.id] = entry
        indexRequest(of: entry)
        counts[entry.lifecycle.status, default: 0] += 1
        if let result = entry.lifecycle.result { completedBytes += result.bytes }
        indexState(entry)
    }

    /// Lists `entry` under its URL and destination (and its file, when it is asked for by path).
    mutating func indexRequest(of entry: Entry) {
        let entries = entries
        byRequest.insert(RequestIndex.Key(entry.request), entry.id) { id, key in Self.fetches(entries, id, key) }
        if case .file(let path) = entry.request.destination { byFile[path] = entry.id }
    }

    /// Takes `entry` out of the URL and destination maps.
    mutating func unindexRequest(of entry: Entry) {
        byRequest.remove(RequestIndex.Key(entry.request), entry.id)
        if case .file(let path) = entry.request.destination, byFile[path] == entry.id { byFile[path] = nil }
    }

    /// Whether ``handOver(_:)`` would take `id` out of the book.
    func canHandOver(_ id: ID) -> Bool {
        guard let entry = entries[id] else { return false }
        return entry.lifecycle.isQueued && !entry.lifecycle.restoredRunning && entry.live == nil && !entry.revalidate
            && entry.dependencies.isEmpty && index.dependentsOf(id).isEmpty
    }

    /// Takes a queued download out of the book without deleting its row, for another member
    /// of the fleet to run, and returns its entry; nil (and nothing changes) unless it is
    /// queued, never ran here, has nothing to continue (a restored or revalidating one), and
    /// neither depends on another download nor has one depending on it.
    mutating func handOver(_ id: ID) -> Entry? {
        guard canHandOver(id), let entry = entries[id] else { return nil }
        entries.removeValue(forKey: id)
        unindexState(entry, key: entry.key)
        counts[entry.lifecycle.status, default: 0] -= 1
        unindexRequest(of: entry)
        return entry
    }

    // MARK: Transitions

    /// Applies one lifecycle event to `id`: the only way a download's state changes. The
    /// indexes follow, and so do the downloads that depend on it (a failure runs down a chain
    /// of dependants without recursion). Returns what the manager must do, in order.
    mutating func transition(_ id: ID, _ event: (inout DownloadLifecycle) -> [DownloadLifecycle.Action]) -> [Effect] {
        var effects: [Effect] = []
        transition(id, event, into: &effects)
        return effects
    }

    private mutating func transition(
        _ id: ID, _ event: (inout DownloadLifecycle) -> [DownloadLifecycle.Action],
        into effects: inout [Effect]
    ) {
        var failed = apply(id, event, into: &effects)
        while let (dependency, reason) = failed.popLast() {
            for dependent in index.dependentsOf(dependency) where entries[dependent]?.lifecycle.isQueued == true {
                let error = DownloadError.dependencyFailed(dependency, reason: reason)
                failed += apply(dependent, { $0.dependencyFailed(error) }, into: &effects)
            }
        }
    }

    /// A queued download whose dependency failed or went away fails too, and so on down.
    mutating func dependencyFailed(_ id: ID, dependency: ID, reason: String) -> [Effect] {
        let error = DownloadError.dependencyFailed(dependency, reason: reason)
        return transition(id) { $0.dependencyFailed(error) }
    }

    /// One transition; returns `(id, reason)` when it made the download fail.
    ///
    /// The entry is changed where it is: a copy of it costs the retains of all its references,
    /// and this runs several times for every download.
    private mutating func apply(
        _ id: ID, _ event: (inout DownloadLifecycle) -> [DownloadLifecycle.Action],
        into effects: inout [Effect]
    ) -> [(ID, String)] {
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
        committing += (after.isCommitting ? 1 : 0) - (before.isCommitting ? 1 : 0)
        if let result = before.result { completedBytes -= result.bytes }
        if let result = after.result { completedBytes += result.bytes }
        if Self.category(before) != Self.category(after) || oldKey != newKey || before.isQueued != after.isQueued {
            let (host, finishOrder, unmet) = (entries[id]!.host, entries[id]!.finishOrder, entries[id]!.unmet)
            unindexState(before, key: oldKey, host: host, finishOrder: finishOrder)
            if !after.isFinished { entries[id]!.finishOrder = nil }
            indexState(after, key: newKey, unmet: unmet, finishOrder: after.isFinished ? finishOrder : nil)
        }
        record(actions, for: id, into: &effects)
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

    /// Turns a transition's actions into effects, doing the bookkeeping ones here. The entry is
    /// read in place, or from the copy kept once it is forgotten (an action after
    /// ``DownloadLifecycle/Action/forget``).
    private mutating func record(_ actions: [DownloadLifecycle.Action], for id: ID, into effects: inout [Effect]) {
        var gone: Entry?
        for action in actions {
            guard entries.contains(id) || gone != nil else { return }
            switch action {
            case .start(let attempt):
                effects.append(.launch(id, attempt: attempt))
            case .stopTransfer:
                effects.append(.stopTransfer(id))
            case .releaseHostSlot:
                guard let host = entries[id]?.live?.host ?? entries[id]?.host ?? gone?.live?.host ?? gone?.host else { return }
                transferring -= 1
                effects.append(.releaseHostSlot(host: host))
            case .persist(let status):
                let lifecycle = entries[id]?.lifecycle ?? gone?.lifecycle
                var patch = RowPatch.status(status, error: lifecycle?.error, finishOrder: entries[id]?.finishOrder ?? gone?.finishOrder)
                if status == .completed, let result = lifecycle?.result {
                    patch.set(.path, result.path)
                    patch.set(.resultBytes, result.bytes)
                }
                effects.append(.persist(id, patch))
                // Its secrets were for fetching it; a finished download does not keep them.
                if status == .completed, let plain = entries[id]?.request.withoutSecrets {
                    entries[id]?.request = plain
                    effects.append(.storeRequest(id, plain))
                }
            case .announce(let announcement):
                if announcement != .started, announcement != .added, entries[id]?.live != nil { entries[id]?.live?.endedAt = ProcessTime.now }
                effects.append(
                    .announce(
                        Self.event(
                            announcement, id: id, lifecycle: entries[id]?.lifecycle ?? gone?.lifecycle,
                            filePath: entries[id]?.filePath ?? gone?.filePath)))
            case .discardPartial:
                effects.append(.discardPartial(id, path: entries[id]?.filePath ?? gone?.filePath))
            case .forget:
                gone = entries[id]
                forget(id, into: &effects)
            }
        }
    }

    /// Drops a download; what waited for it fails.
    private mutating func forget(_ id: ID, into effects: inout [Effect]) {
        guard let entry = entries.removeValue(forKey: id) else { return }
        unindexState(entry, key: entry.key)
        counts[entry.lifecycle.status, default: 0] -= 1
        if let result = entry.lifecycle.result { completedBytes -= result.bytes }
        unindexRequest(of: entry)
        effects.append(.deleteRow(id))
        for dependent in index.takeDependents(of: id) where entries[dependent]?.lifecycle.isQueued == true {
            let error = DownloadError.dependencyFailed(id, reason: "it was removed")
            transition(dependent, { $0.dependencyFailed(error) }, into: &effects)
        }
    }

    static func event(
        _ announcement: DownloadLifecycle.Announcement, id: ID, lifecycle: DownloadLifecycle?,
        filePath: String?
    ) -> DownloadManager.Event {
        switch announcement {
        case .added: .added(id)
        case .started: .started(id)
        case .paused: .paused(id)
        case .completed: .completed(id, lifecycle?.result ?? DownloadResult(path: filePath ?? "", bytes: 0, bytesFetched: 0, wasAlreadyComplete: false))
        case .failed: .failed(id, lifecycle?.error ?? .cancelled)
        case .removed: .removed(id)
        }
    }

    // MARK: Scheduling

    /// Starts what the limits allow: O(log n) per download started, whatever the queue's
    /// length. A download whose host has no free slot is set aside in that host's list until
    /// one frees.
    mutating func schedule(maxConcurrent: Int, hosts: HostConnections, maxCommitting: Int = maxCommitting) -> [Effect] {
        // Hosts that have free slots again take back the downloads set aside for them.
        for host in index.blockedHosts {
            index.unblock(host: host, count: hosts.available(host))
        }
        var effects: [Effect] = []
        while transferring < maxConcurrent, committing < maxCommitting, let key = index.popReady() {
            guard let entry = entries[key.id], entry.lifecycle.isQueued, entry.unmet == 0 else { continue }
            guard hosts.acquire(upTo: 1, host: entry.host, settingAside: true) == 1 else {
                index.block(key, host: entry.host)
                continue
            }
            transferring += 1
            transition(key.id, { $0.start() }, into: &effects)
        }
        hosts.keepSetAside(index.blocked.keys)
        return effects
    }

    // MARK: Indexes

    enum Category { case waiting, running, finished }

    static func category(_ lifecycle: DownloadLifecycle) -> Category {
        if lifecycle.isRunning { return .running }
        return lifecycle.isFinished ? .finished : .waiting
    }

    /// Adds `entry` to the indexes its state belongs in.
    mutating func indexState(_ entry: Entry) {
        indexState(entry.lifecycle, key: entry.key, unmet: entry.unmet, finishOrder: entry.finishOrder)
    }

    /// Adds the download of `key` in state `lifecycle` to the indexes that state belongs in.
    private mutating func indexState(_ lifecycle: DownloadLifecycle, key: DownloadQueue.Key, unmet: Int, finishOrder: Int64?) {
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
    mutating func unindexState(_ entry: Entry, key: DownloadQueue.Key) {
        unindexState(entry.lifecycle, key: key, host: entry.host, finishOrder: entry.finishOrder)
    }

    /// Takes the download of `key`, in state `lifecycle`, out of that state's indexes.
    private mutating func unindexState(_ lifecycle: DownloadLifecycle, key: DownloadQueue.Key, host: String, finishOrder: Int64?) {
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
    mutating func reindexReady(_ id: ID) {
        guard entries[id]?.lifecycle.isQueued == true, let key = entries[id]?.key else { return }
        if entries[id]?.unmet == 0 {
            index.insertReady(key)
        } else if let host = entries[id]?.host {
            index.removeReady(key, host: host)
        }
    }
}
