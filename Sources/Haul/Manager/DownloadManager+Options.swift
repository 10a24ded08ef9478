import Foundation

extension DownloadManager {
    // MARK: Changing limits and requests

    /// How many downloads run at once.
    public var maxConcurrentDownloads: Int { policy.maxConcurrent }

    /// Changes how many downloads run at once. A higher limit starts waiting downloads now; a
    /// lower one lets the running ones finish and starts no new one until they are under it.
    public func setMaxConcurrentDownloads(_ limit: Int) {
        policy.maxConcurrent = max(1, limit)
        schedule()
    }

    /// Changes a download's URL or options (headers, checksum, connections, rate limit, …).
    ///
    /// A running download stops and starts again with the new request, continuing from what it
    /// has on disk (a ``paused(_:)`` and a ``started(_:)`` event). The destination can change
    /// only while the download has written nothing; a finished one changes for its next attempt.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/invalidRequest`` for an unknown
    ///   id or a destination that can no longer change; ``DownloadError/Kind/io`` when the store fails.
    public func change(_ id: ID, _ body: @Sendable (inout DownloadRequest) -> Void) async throws(DownloadError) {
        guard let job = jobs[id] else { throw .invalidRequest("unknown download \(id)") }
        var request = job.record.request
        body(&request)
        if request.destination != job.record.request.destination, job.record.resolvedPath != nil {
            throw .invalidRequest("download \(id) has started writing \(job.record.resolvedPath!); its destination cannot change")
        }
        let restart = job.record.status == .running || job.stopping != nil
        if restart { await stop(id, .pause) }
        guard var changed = jobs[id]?.record else { throw .invalidRequest("download \(id) was removed meanwhile") }
        let (kind, path) = request.destination.stored
        changed.url = request.url
        changed.destinationKind = kind
        changed.destinationPath = path
        changed.options = JobRecord.Options(request)
        changed.updatedAt = Date()
        let record = changed
        try update(id) { job in
            job.record = record
            job.host = HostConnections.host(of: record.url)
            if restart, job.record.status == .paused { job.record.status = .queued }
        }
        schedule()
    }
}
