import Foundation

extension DownloadManager {
    // MARK: Adding

    /// Adds a download and returns its id.
    ///
    /// Adding the same URL for the same destination again returns the existing download
    /// (also one an earlier process added to this queue), as it stands: a running one
    /// continues, a paused one stays paused, a completed one completed unless its file is gone
    /// (then it is queued again), a failed one is tried again.
    ///
    /// - Parameters:
    ///   - request: what to download and where.
    ///   - priority: higher starts first; equal priorities start in the order added.
    ///   - dependencies: downloads that must complete first; if one fails or is removed, this
    ///     one fails with a ``DownloadError/Kind/dependency`` error.
    ///   - replacing: when another URL already downloads to the same file, remove that download
    ///     (and its partial file) instead of failing.
    ///   - paused: add it paused: it waits until ``resume(_:)`` (aria2's `pause` option).
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/invalidRequest`` for an invalid
    ///   request, an unknown dependency or a destination taken by another URL;
    ///   ``DownloadError/Kind/io`` when the store fails.
    @discardableResult
    public func add(
        _ request: DownloadRequest, priority: Int = 0, after dependencies: [ID] = [],
        replacing: Bool = false, paused: Bool = false
    ) async throws(DownloadError) -> ID {
        for dependency in dependencies where !book.entries.contains(dependency) {
            throw .invalidRequest("unknown download \(dependency) to depend on")
        }
        let added = try await add(contentsOf: [request], priority: priority, after: dependencies, replacing: replacing, paused: paused)
        return try added[0].get()
    }

    /// Adds many downloads in one step: one look in the store for the whole list, one group
    /// commit, O(n log n) in all. Each request's id, or why it was refused, in order.
    ///
    /// - Parameters:
    ///   - requests: what to download and where, in the order they are queued.
    ///   - priority: higher starts first, as for ``add(_:priority:after:replacing:paused:)``.
    ///   - dependencies: downloads that must complete before each of these.
    ///   - replacing: another URL already downloading to the same file is removed instead of
    ///     refusing the request.
    ///   - paused: each waits until ``resume(_:)``.
    ///   - requeueExisting: a download that was already there is also queued again:
    ///     a paused or failed one resumes, a completed one is checked against the server (one
    ///     conditional request) — what running `haul get` again does.
    /// - Returns: each request's id, or why it was refused, in order.
    /// - Throws: ``DownloadError`` when the manager has shut down or the store fails.
    public func add(
        contentsOf requests: [DownloadRequest], priority: Int = 0, after dependencies: [ID] = [],
        replacing: Bool = false, paused: Bool = false,
        requeueExisting: Bool = false
    ) async throws(DownloadError) -> [Result<ID, DownloadError>] {
        guard !isShutDown else { throw .invalidRequest("the download manager has shut down") }
        if let storeFailure { throw storeFailure }
        let requests = requests.map(\.absolutized)
        try await loadCounters()
        try await adopt(requests)
        var results: [Result<ID, DownloadError>] = []
        results.reserveCapacity(requests.count)
        for request in requests {
            do throws(DownloadError) {
                try request.validate()
                let id = try await addOne(
                    request, priority: priority, dependencies: dependencies, replacing: replacing,
                    paused: paused, requeueExisting: requeueExisting)
                results.append(.success(id))
            } catch {
                results.append(.failure(error))
            }
        }
        schedule()
        // A long list is added faster than its rows are written: past this many, the next
        // batch waits for the writer, so what waits in memory stays bounded.
        if store.writer.pendingCount >= Self.pendingRowsLimit { try await store.flush() }
        return results
    }

    /// Rows waiting for the store beyond which adding waits (each costs ~0.8 KB until written).
    static let pendingRowsLimit = 10_000

    private func addOne(
        _ request: DownloadRequest, priority: Int, dependencies: [ID], replacing: Bool, paused: Bool,
        requeueExisting: Bool
    ) async throws(DownloadError) -> ID {
        if let existing = book.find(RequestIndex.Key(request)) {
            if requeueExisting {
                // Asked for again with today's options: a finished download kept none of its
                // secrets, and the next attempt needs them.
                if let entry = book.entries[existing], entry.request != request, !entry.lifecycle.isRunning {
                    let patch: RowPatch
                    do { patch = try .request(request) } catch {
                        throw .invalidRequest("cannot store the request of download \(existing): \(error)")
                    }
                    book.entries[existing]?.request = request
                    store.writer.update(existing, patch)
                }
                requeue(existing)
            } else if book.entries[existing]?.lifecycle.status == .failed {
                // Asked for again: try again.
                transition(existing) { $0.resume() }
            } else {
                requeueIfFileGone(existing)
            }
            return existing
        }
        if case .file(let path) = request.destination, let other = book.byFile[path] {
            guard replacing, let taken = book.entries[other] else {
                throw .invalidRequest(
                    "\(path) is already the destination of download \(other) (\(book.entries[other]?.request.url ?? "")); remove it first or add with replacing"
                )
            }
            _ = taken
            await remove(other)
        }
        let id = ID.next()
        let position = book.nextPosition
        book.nextPosition += Self.positionStep
        let (lifecycle, actions) = DownloadLifecycle.added(paused: paused)
        var entry = Entry(
            lifecycle: lifecycle, request: request, priority: priority, position: position,
            host: HostConnections.host(of: request.url), dependencies: dependencies, id: id)
        var row = DownloadRow(id: id, queue: queue, request: request)
        row.priority = priority
        row.position = position
        row.dependencies = dependencies
        row.status = lifecycle.status
        entry.unmet = 0
        book.insert(entry)
        for dependency in dependencies {
            book.index.addDependent(id, on: dependency)
            guard let other = book.entries[dependency] else { continue }
            if other.lifecycle.status != .completed { book.entries[id]?.unmet += 1 }
        }
        book.reindexReady(id)
        let pooled = poolsAsAdded(id)
        store.writer.insert(row, pooled: pooled)
        // The row went in whole above; of the lifecycle's actions the announcement is left.
        if actions.contains(.announce(.added)) { hub.send(.added(id)) }
        // A dependency that already failed fails this one at once.
        for dependency in dependencies {
            if let error = book.entries[dependency]?.lifecycle.error {
                dependencyFailed(id, dependency: dependency, reason: error.message)
            }
        }
        if pooled {
            _ = book.handOver(id)
            offeredToPool += 1
        }
        return id
    }

    /// Brings in what earlier processes left in this queue for these requests (one query), so
    /// adding one again finds it. Not needed once ``restore()`` has loaded everything. Each
    /// destination is looked up once: a list added in batches into one folder would otherwise
    /// read every row of the earlier batches again with each batch.
    private func adopt(_ requests: [DownloadRequest]) async throws(DownloadError) {
        guard !restored else { return }
        var destinations = Set<String>()
        for request in requests where book.find(RequestIndex.Key(request)) == nil {
            let path = request.destination.path
            if adoptedDestinations.insert(path).inserted { destinations.insert(path) }
        }
        guard !destinations.isEmpty else { return }
        for row in try await store.rows(queue: queue, destinations: destinations) where !book.entries.contains(row.id) {
            book.insert(restoredEntry(row))
        }
    }

    /// Reads the counters (positions, finish order) the store left, once.
    private func loadCounters() async throws(DownloadError) {
        guard !countersLoaded else { return }
        countersLoaded = true
        let counters = try await store.counters(queue: queue)
        book.nextPosition = max(book.nextPosition, counters.position + Self.positionStep)
        book.nextFinishOrder = max(book.nextFinishOrder, counters.finishOrder)
    }

    /// Continues the queue kept in the store: running and queued downloads are queued (the
    /// ones that were running first), paused stay paused, finished ones are remembered. An
    /// unfinished download reports what its partial file holds until it runs again.
    ///
    /// Downloads start at once: ask for ``events()`` before restoring to see them start.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/io`` when the store fails.
    public func restore() async throws(DownloadError) {
        let look = try await store.join(queue)
        (fleetOthers, isEldestOfFleet, fleetMembers) = (look.others, look.eldest, look.members)
        // In a fleet, the hosts' connections are counted across it: none until shared out.
        if store.database.isShared { hosts.startSharing() }
        try await restore(rows: try await store.heldRows(queue: queue))
        watchFleet()
    }

    /// ``restore()`` from the queue's rows, read just before (``storedRows()``).
    func restore(rows: [DownloadRow]) async throws(DownloadError) {
        try await loadCounters()
        insertRestored(rows)
        // Dependencies once everyone is in.
        var dependants: [ID] = []
        for (id, entry) in book.entries where !entry.dependencies.isEmpty { dependants.append(id) }
        linkDependencies(of: dependants)
        try await restoreUploads()
        restored = true
        schedule()
    }

    /// Puts the rows the book does not hold yet in it, as ``restore()`` finds them; returns their ids.
    @discardableResult
    func insertRestored(_ rows: [DownloadRow]) -> [ID] {
        var inserted: [ID] = []
        for row in rows where !book.entries.contains(row.id) {
            book.insert(restoredEntry(row))
            inserted.append(row.id)
            book.nextPosition = max(book.nextPosition, row.position + Self.positionStep)
            if [.queued, .paused, .running].contains(row.status), !row.recorded.isEmpty {
                board.update(
                    row.id,
                    DownloadProgress(
                        destination: row.path, bytesDone: row.recorded.byteCount,
                        totalBytes: row.totalLength, bytesPerSecond: 0))
            }
        }
        return inserted
    }

    /// Counts the unmet dependencies of `ids` (restored entries), and lists them as their dependants.
    func linkDependencies(of ids: [ID]) {
        for id in ids {
            guard let entry = book.entries[id], !entry.dependencies.isEmpty else { continue }
            var unmet = 0
            for dependency in entry.dependencies {
                book.index.addDependent(id, on: dependency)
                if book.entries[dependency]?.lifecycle.status != .completed { unmet += 1 }
            }
            book.entries[id]?.unmet = unmet
            book.reindexReady(id)
        }
    }

    func restoredEntry(_ row: DownloadRow) -> Entry {
        let result =
            row.status == .completed
            ? DownloadResult(
                path: row.path ?? row.request.destination.path, bytes: row.resultBytes ?? 0, bytesFetched: 0,
                wasAlreadyComplete: true)
            : nil
        var entry = Entry(
            lifecycle: DownloadLifecycle(restoring: row.status, result: result, error: row.error),
            request: row.request, priority: row.priority, position: row.position,
            host: HostConnections.host(of: row.url), path: row.path, dependencies: row.dependencies, id: row.id)
        entry.finishOrder = row.finishOrder
        if entry.lifecycle.isFinished, entry.finishOrder == nil {
            book.nextFinishOrder += 1
            entry.finishOrder = book.nextFinishOrder
        }
        return entry
    }

    /// A completed download whose file is gone is queued again.
    func requeueIfFileGone(_ id: ID) {
        guard let entry = book.entries[id], let result = entry.lifecycle.result,
            DestinationResolver.regularFileSize(result.path) == nil
        else { return }
        transition(id) { $0.requeue() }
    }
}

extension DownloadManager {
    /// Every download the store keeps for this manager's queue, as it was stored, without
    /// bringing any into the manager or starting one: what ``restore()`` would continue.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/io`` when the store fails.
    package func storedDownloads() async throws(DownloadError) -> [Download] {
        let rows = try await storedRows()
        // Describing a row as restore() would must not move the manager's own counter.
        let finishOrder = book.nextFinishOrder
        let downloads = rows.map { describe(restoredEntry($0)) }
        book.nextFinishOrder = finishOrder
        return downloads
    }

    /// Download `id` of this queue, as ``download(_:)`` describes it when this manager holds it,
    /// else as the store last recorded it: in a fleet, one that another member runs or that
    /// waits in the pool. Its progress is
    /// what its row records (the ranges written at the last checkpoint). Nil when the queue has
    /// no such download.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/io`` when the store fails.
    public func storedDownload(_ id: ID) async throws(DownloadError) -> Download? {
        if let entry = book.entries[id] { return describe(entry) }
        // After this manager's own changes (a download it just removed is gone).
        return try await storedDownloads("SELECT * FROM download WHERE id = ? AND queue = ?", [id.storedValue.databaseValue, queue.databaseValue])
            .first
    }

    /// The rows the store keeps for this manager's queue, in queue order, without bringing any
    /// into the manager: what ``storedDownloads()`` describes and ``restore(rows:)`` continues.
    func storedRows() async throws(DownloadError) -> [DownloadRow] {
        try await store.rows(queue: queue)
    }

    /// The files of the queue's downloads, a few columns of each (``DownloadRow/File``).
    func storedFiles() async throws(DownloadError) -> [DownloadRow.File] {
        try await store.files(queue: queue)
    }
}
