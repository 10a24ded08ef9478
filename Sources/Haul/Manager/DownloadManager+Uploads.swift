import Foundation

/// A manager's uploads: a short queue beside the downloads, sharing their `-j`, host slots,
/// store and events.
///
/// Uploads are few (a person's files, not a crawl's), so they live in a dictionary scanned when
/// one starts, not in the downloads' indexes built for 100,000; with none queued, a download's
/// scheduling pays nothing for them.
struct UploadBook {
    struct Entry {
        let id: DownloadID
        var request: UploadRequest
        var status: DownloadStatus
        var priority: Int
        var position: Int64
        var finishOrder: Int64?
        /// The host whose connection slot it takes while it runs.
        var host: String
        var result: UploadResult?
        var error: DownloadError?
        /// The attempt running in this process, its number, and why it is being stopped.
        var task: AttemptHandle?
        var attempt = 0
        var stop: Stop?
    }

    /// Why a running upload is being stopped: what it becomes once its attempt has ended.
    enum Stop { case pause, cancel, remove, shutdown }

    var entries: [DownloadID: Entry] = [:]
    var nextPosition: Int64 = 0
    var nextFinishOrder: Int64 = 0
    /// Uploads whose attempt runs: they count against the manager's `-j`.
    var running = 0
    /// The store's record of each change, written one after another in the order they were made.
    var saves: Task<DownloadError?, Never>?
    /// Every upload of the queue in the store is in memory (``DownloadManager/restore()``).
    var restored = false

    /// The queued uploads in the order they start: higher priority first, then the first added.
    var ready: [Entry] {
        entries.values.filter { $0.status == .queued }.sorted {
            $0.priority != $1.priority ? $0.priority > $1.priority : $0.position < $1.position
        }
    }

    var hasQueued: Bool { entries.values.contains { $0.status == .queued } }
}

extension DownloadManager {
    /// A managed upload as it stands.
    public struct Upload: Sendable {
        /// Its id: from the same space as the downloads' (aria2's GID).
        public var id: ID
        /// The file sent, its path absolute.
        public var file: String
        /// The target URL without any credentials it carries.
        public var url: String
        /// Where it stands: queued, running, paused, completed or failed.
        public var status: DownloadStatus
        /// Higher starts first among the queued (default 0), downloads and uploads alike.
        public var priority: Int
        /// The latest snapshot of the current or last attempt (none before the first).
        public var progress: UploadProgress?
        /// Set when ``status`` is ``DownloadStatus/completed``.
        public var result: UploadResult?
        /// Set when ``status`` is ``DownloadStatus/failed``.
        public var error: DownloadError?
        /// The request it runs with (without its secrets once completed).
        public var request: UploadRequest
    }

    // MARK: Adding and listing

    /// Queues an upload and returns its id. It runs when the manager's `-j` and the host's
    /// connection limit allow, before downloads of the same or a lower priority, on the
    /// downloader's clients, cookies, rate limit and store.
    ///
    /// ```swift
    /// let id = try await manager.addUpload(UploadRequest(file: "video.mp4", url: "https://uploadBook.example/files"))
    /// await manager.waitUntilIdle()
    /// print(await manager.upload(id)?.result?.location ?? "not sent")
    /// ```
    ///
    /// The queue is recorded in the store: after a crash, ``restore()`` queues again what was
    /// running, and a resumable upload (tus, the IETF draft) asks the server for its offset and
    /// sends only the rest, as ``Downloader/upload(_:)`` does. Adding the same file for the
    /// same URL again returns the upload there is: an unfinished one as it stands, a finished
    /// one queued again with this request.
    ///
    /// - Parameters:
    ///   - request: the file, the URL, the protocol and the network options.
    ///   - priority: higher starts first.
    ///   - paused: add it paused: it waits until ``resume(_:)``.
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/invalidRequest`` for an unusable
    ///   request or a manager that has shut down; ``DownloadError/Kind/io`` when the store fails.
    @discardableResult
    public func addUpload(_ request: UploadRequest, priority: Int = 0, paused: Bool = false) async throws(DownloadError) -> ID {
        guard !isShutDown else { throw .invalidRequest("the download manager has shut down") }
        if let storeFailure { throw storeFailure }
        try request.validate()
        var request = request
        request.file = DownloadRequest.absolutePath(request.file)
        if !uploadBook.restored, let row = try await store.uploadJob(queue: queue, file: request.file, url: request.url),
            uploadBook.entries[row.id] == nil
        {
            insertRestoredUpload(row)
        }
        let id: ID
        if let existing = uploadBook.entries.values.first(where: { $0.request.file == request.file && $0.request.url == request.url }) {
            id = existing.id
            guard existing.status == .completed || existing.status == .failed else { return id }
            uploadBook.entries[id]?.request = request
            uploadBook.entries[id]?.priority = priority
            uploadBook.entries[id]?.finishOrder = nil
            uploadBook.entries[id]?.result = nil
            uploadBook.entries[id]?.error = nil
            uploadBook.entries[id]?.status = paused ? .paused : .queued
        } else {
            id = DownloadID.next()
            uploadBook.nextPosition += Self.positionStep
            uploadBook.entries[id] = UploadBook.Entry(
                id: id, request: request, status: paused ? .paused : .queued, priority: priority,
                position: uploadBook.nextPosition, host: HostConnections.host(of: request.url))
        }
        // Added means recorded: a crash after this returns loses nothing.
        if let failure = await persistUpload(id).value {
            uploadBook.entries[id] = nil
            throw failure
        }
        hub.send(.upload(id, .added))
        if paused { hub.send(.upload(id, .paused)) }
        schedule()
        return id
    }

    /// One upload as it stands, or nil for an unknown id (or a download's).
    public func upload(_ id: ID) -> Upload? {
        uploadBook.entries[id].map(describe)
    }

    /// Every upload: running, then waiting in the order they will start, then finished in the
    /// order they ended.
    public func uploads() -> [Upload] {
        let entries = Array(uploadBook.entries.values)
        let running = entries.filter { $0.status == .running }.sorted { $0.position < $1.position }
        let waiting = entries.filter { $0.status == .queued || $0.status == .paused }.sorted {
            $0.priority != $1.priority ? $0.priority > $1.priority : $0.position < $1.position
        }
        let finished = entries.filter { $0.status == .completed || $0.status == .failed }.sorted {
            ($0.finishOrder ?? 0) < ($1.finishOrder ?? 0)
        }
        return (running + waiting + finished).map(describe)
    }

    func describe(_ entry: UploadBook.Entry) -> Upload {
        Upload(
            id: entry.id, file: entry.request.file, url: entry.request.displayURL, status: entry.status, priority: entry.priority,
            progress: uploadBoard.progress(of: entry.id), result: entry.result, error: entry.error, request: entry.request)
    }

    // MARK: Restoring and recording

    /// Brings in the uploads the store holds for this queue: one that was running when its
    /// process ended is queued again.
    func restoreUploads() async throws(DownloadError) {
        guard !uploadBook.restored else { return }
        let rows = try await store.uploadJobs(queue: queue)
        uploadBook.restored = true
        for row in rows where uploadBook.entries[row.id] == nil { insertRestoredUpload(row) }
    }

    private func insertRestoredUpload(_ row: UploadJobRow) {
        var entry = UploadBook.Entry(
            id: row.id, request: row.request, status: row.status == .running ? .queued : row.status, priority: row.priority,
            position: row.position, host: HostConnections.host(of: row.request.url))
        entry.finishOrder = row.finishOrder
        entry.result = row.result
        entry.error = row.error
        uploadBook.entries[row.id] = entry
        uploadBook.nextPosition = max(uploadBook.nextPosition, row.position)
        uploadBook.nextFinishOrder = max(uploadBook.nextFinishOrder, row.finishOrder ?? 0)
    }

    /// Records upload `id` as it stands now (forgets it when it is gone), after every change
    /// recorded before: the returned task says whether the store took it.
    @discardableResult
    func persistUpload(_ id: ID) -> Task<DownloadError?, Never> {
        let previous = uploadBook.saves
        let (store, logger, queue) = (store, downloader.configuration.logger, queue)
        let row = uploadBook.entries[id].map { entry in
            UploadJobRow(
                id: id, queue: queue, request: entry.request, status: entry.status, priority: entry.priority,
                position: entry.position, finishOrder: entry.finishOrder, result: entry.result, error: entry.error)
        }
        let save = Task { () -> DownloadError? in
            _ = await previous?.value
            do throws(DownloadError) {
                if let row { try await store.saveUploadJob(row) } else { try await store.deleteUploadJob(id) }
                return nil
            } catch {
                logger.error("cannot record upload \(id): \(error.message)")
                return error
            }
        }
        uploadBook.saves = save
        return save
    }

    // MARK: Running

    /// Starts the queued uploads the limits allow, before any download of a lower priority.
    func startUploads() {
        guard !uploadBook.entries.isEmpty, uploadBook.hasQueued else { return }
        var free = maxConcurrent - book.transferring - uploadBook.running
        let bestDownload = book.index.ready.first?.priority
        for entry in uploadBook.ready where free > 0 {
            if let bestDownload, bestDownload > entry.priority { break }
            guard hosts.acquire(upTo: 1, host: entry.host) == 1 else { continue }
            launchUpload(entry.id)
            free -= 1
        }
    }

    private func launchUpload(_ id: ID) {
        guard var entry = uploadBook.entries[id] else { return }
        entry.status = .running
        entry.attempt += 1
        entry.error = nil
        entry.stop = nil
        uploadBook.running += 1
        let (downloader, board, request, attempt) = (downloader, uploadBoard, entry.request, entry.attempt)
        entry.task = AttemptHandle.start { [weak self] _ in
            let outcome: Result<UploadResult, DownloadError>
            do throws(DownloadError) {
                let task = try await downloader.upload(request)
                outcome = await withTaskCancellationHandler {
                    for await progress in task.progress { board.update(id, progress) }
                    do throws(DownloadError) { return .success(try await task.result()) } catch { return .failure(error) }
                } onCancel: {
                    task.cancel()
                }
            } catch {
                outcome = .failure(error)
            }
            await self?.uploadEnded(id, attempt: attempt, outcome)
        }
        uploadBook.entries[id] = entry
        persistUpload(id)
        hub.send(.upload(id, .started))
    }

    /// An upload's attempt ended, by itself or because it was stopped.
    func uploadEnded(_ id: ID, attempt: Int, _ outcome: Result<UploadResult, DownloadError>) {
        guard var entry = uploadBook.entries[id], entry.attempt == attempt, entry.status == .running else { return }
        uploadBook.running -= 1
        hosts.release(1, host: entry.host)
        entry.task = nil
        let stop = entry.stop
        entry.stop = nil
        let event: UploadEvent
        switch (stop, outcome) {
        case (.remove?, _):
            uploadBook.entries[id] = nil
            uploadBoard.remove(id)
            persistUpload(id)
            hub.send(.upload(id, .removed))
            schedule()
            return
        case (.shutdown?, _):
            // Its record still says running, as a crash would leave it: the next restore queues it.
            entry.status = .queued
            uploadBook.entries[id] = entry
            hub.send(.upload(id, .paused))
            return
        case (_, .success(let result)):
            entry.status = .completed
            entry.result = result
            // Its secrets were for sending it; a finished upload does not keep them.
            entry.request = entry.request.withoutSecrets
            uploadBoard.remove(id)
            event = .completed(result)
        case (.pause?, .failure):
            entry.status = .paused
            event = .paused
        case (.cancel?, .failure):
            entry.status = .failed
            entry.error = .cancelled
            event = .failed(.cancelled)
        case (nil, .failure(let error)):
            entry.status = .failed
            entry.error = error
            event = .failed(error)
        }
        if entry.status == .completed || entry.status == .failed {
            uploadBook.nextFinishOrder += 1
            entry.finishOrder = uploadBook.nextFinishOrder
        }
        uploadBook.entries[id] = entry
        persistUpload(id)
        hub.send(.upload(id, event))
        schedule()
    }

    // MARK: Controlling

    /// Stops a running upload for `stop` and waits until its attempt has ended.
    private func stopUpload(_ id: ID, _ stop: UploadBook.Stop) async {
        guard let task = uploadBook.entries[id]?.task else { return }
        uploadBook.entries[id]?.stop = stop
        task.cancel()
        await task.wait()
    }

    /// ``pause(_:)`` of an upload.
    func pauseUpload(_ id: ID) async {
        switch uploadBook.entries[id]?.status {
        case .running?:
            await stopUpload(id, .pause)
        case .queued?:
            uploadBook.entries[id]?.status = .paused
            persistUpload(id)
            hub.send(.upload(id, .paused))
        default:
            break
        }
        schedule()
    }

    /// ``resume(_:)`` of an upload: a paused or failed one is queued again.
    func resumeUpload(_ id: ID) {
        guard let status = uploadBook.entries[id]?.status, status == .paused || status == .failed else { return }
        uploadBook.entries[id]?.status = .queued
        uploadBook.entries[id]?.error = nil
        uploadBook.entries[id]?.finishOrder = nil
        persistUpload(id)
        schedule()
    }

    /// ``cancel(_:)`` of an upload: it stops and stays listed as failed (cancelled). A
    /// resumable one stays on the server: adding it again continues it.
    func cancelUpload(_ id: ID) async {
        switch uploadBook.entries[id]?.status {
        case .running?:
            await stopUpload(id, .cancel)
        case .queued?, .paused?:
            uploadBook.nextFinishOrder += 1
            uploadBook.entries[id]?.finishOrder = uploadBook.nextFinishOrder
            uploadBook.entries[id]?.status = .failed
            uploadBook.entries[id]?.error = .cancelled
            persistUpload(id)
            hub.send(.upload(id, .failed(.cancelled)))
        default:
            break
        }
        schedule()
    }

    /// ``remove(_:)`` of an upload: stopped if it runs, then forgotten.
    func removeUpload(_ id: ID) async {
        guard let entry = uploadBook.entries[id] else { return }
        if entry.status == .running {
            await stopUpload(id, .remove)
        } else {
            uploadBook.entries[id] = nil
            uploadBoard.remove(id)
            persistUpload(id)
            hub.send(.upload(id, .removed))
        }
        schedule()
    }

    /// The ids of the uploads in `statuses`.
    func uploadIDs(_ statuses: Set<DownloadStatus>) -> [ID] {
        uploadBook.entries.values.filter { statuses.contains($0.status) }.map(\.id)
    }

    /// Stops every running upload as a crash would leave it, and waits for the store to hold
    /// every change made before.
    func shutDownUploads() async {
        for id in uploadIDs([.running]) { await stopUpload(id, .shutdown) }
        _ = await uploadBook.saves?.value
    }
}
