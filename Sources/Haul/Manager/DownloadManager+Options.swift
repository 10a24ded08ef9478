import Foundation

extension DownloadManager {
    // MARK: Changing limits and requests

    /// How many downloads run at once.
    public var maxConcurrentDownloads: Int { maxConcurrent }

    /// Changes how many downloads run at once. A higher limit starts waiting downloads now; a
    /// lower one lets the running ones finish and starts no new one until they are under it.
    public func setMaxConcurrentDownloads(_ limit: Int) {
        maxConcurrent = max(1, limit)
        schedule()
    }

    /// Settings kept in the store for this manager's queue (a daemon's changed global
    /// options), by name; empty when none were saved.
    ///
    /// - Throws: ``DownloadError`` when the store cannot be read.
    public func savedSettings() async throws(DownloadError) -> [String: String] {
        try await store.settings(queue: queue)
    }

    /// Keeps `settings` in the store for this manager's queue, each replacing its earlier
    /// value, so that ``savedSettings()`` returns them after a restart.
    ///
    /// ```swift
    /// try await manager.saveSettings(["max-concurrent-downloads": "3"])
    /// ```
    ///
    /// - Throws: ``DownloadError`` when the store cannot be written.
    public func saveSettings(_ settings: [String: String]) async throws(DownloadError) {
        try await store.saveSettings(settings, queue: queue)
    }

    /// Forgets these settings of this manager's queue (names not kept are ignored).
    ///
    /// - Throws: ``DownloadError`` when the store cannot be written.
    public func removeSettings(_ names: [String]) async throws(DownloadError) {
        try await store.removeSettings(names, queue: queue)
    }

    /// The store's error, once writing to it failed: every download stopped with it.
    public var failure: DownloadError? { storeFailure }

    /// Changes a download's URL or options (headers, checksum, connections, rate limit, …).
    ///
    /// A change of the rate limit alone applies at once to a running download, which goes on as
    /// it is. Any other change stops a running download and starts it again with the new
    /// request, continuing from what it has on disk (a ``Event/paused(_:)`` and a ``Event/started(_:)``
    /// event). The destination can change only while the download has written nothing; a
    /// finished one changes for its next attempt.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/invalidRequest`` for an unknown
    ///   id, an invalid request or a destination that can no longer change.
    public func change(_ id: ID, _ body: @Sendable (inout DownloadRequest) -> Void) async throws(DownloadError) {
        guard let entry = book.entries[id] else { throw .invalidRequest("unknown download \(id)") }
        var request = entry.request
        body(&request)
        request = request.absolutized
        try request.validate()
        if request.destination != entry.request.destination, let path = entry.path ?? board.progress(of: id)?.destination {
            throw .invalidRequest("download \(id) has started writing \(path); its destination cannot change")
        }
        var limitOnly = entry.request
        limitOnly.rateLimit = request.rateLimit
        if limitOnly == request, let limiter = entry.live?.limiter, entry.live?.task != nil {
            limiter.setRate(request.rateLimit)
            book.entries[id]?.request = request
            do { store.writer.update(id, try .request(request)) } catch {
                throw .invalidRequest("cannot store the request of download \(id): \(error)")
            }
            return
        }
        // The new request is in place before the stop: the restart that the end of the attempt
        // brings runs with it (set after the stop, the change took effect one change late).
        var changed = entry
        book.unindexState(changed, key: changed.key)
        book.unindexRequest(of: changed)
        changed.request = request
        changed.host = HostConnections.host(of: request.url)
        book.entries[id] = changed
        book.indexState(changed)
        book.indexRequest(of: changed)
        do { store.writer.update(id, try .request(request)) } catch {
            throw .invalidRequest("cannot store the request of download \(id): \(error)")
        }
        transition(id) { $0.restart() }
        await stopped(id)
        schedule()
    }
}
