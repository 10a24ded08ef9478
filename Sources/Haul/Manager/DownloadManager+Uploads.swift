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

    /// Why a running upload is being stopped: what it becomes once its attempt has ended. Of
    /// two reasons given while it stops, the stronger holds (a remove is not undone by a pause).
    enum Stop: Int, Comparable {
        case shutdown, pause, cancel, remove

        static func < (a: Stop, b: Stop) -> Bool { a.rawValue < b.rawValue }
    }

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
        entries.values.filter { $0.status == .queued }.sorted(by: Self.startsBefore)
    }

    /// Start order: higher priority first, then the first added.
    static func startsBefore(_ a: Entry, _ b: Entry) -> Bool {
        a.priority != b.priority ? a.priority > b.priority : a.position < b.position
    }

    var hasQueued: Bool { entries.values.contains { $0.status == .queued } }

    /// The upload of `file` to `url`, if there is one.
    func entry(file: String, url: String) -> Entry? {
        entries.values.first { $0.request.file == file && $0.request.url == url }
    }
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
    /// let id = try await manager.addUpload(UploadRequest(file: "video.mp4", url: "https://uploads.example/files"))
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
        if !uploadBook.restored {
            // Changes made before this are on disk before the store is asked.
            _ = await uploadBook.saves?.value
            if let row = try await store.uploadJob(queue: queue, file: request.file, url: request.url), uploadBook.entries[row.id] == nil {
                insertRestoredUpload(row)
            }
        }
        // The entry joins the book only once its row is on disk: nothing starts, stops or lists
        // an upload that a crash would lose.
        var entry: UploadBook.Entry
        if let existing = uploadBook.entry(file: request.file, url: request.url) {
            guard existing.status == .completed || existing.status == .failed else { return existing.id }
            entry = existing
            entry.request = request
            entry.priority = priority
            entry.finishOrder = nil
            entry.result = nil
            entry.error = nil
            entry.status = paused ? .paused : .queued
        } else {
            uploadBook.nextPosition += Self.positionStep
            entry = UploadBook.Entry(
                id: DownloadID.next(), request: request, status: paused ? .paused : .queued, priority: priority,
                position: uploadBook.nextPosition, host: HostConnections.host(of: request.url))
        }
        let id = entry.id
        if let failure = await persistUpload(id, as: entry).value { throw failure }
        // Meanwhile the manager may have shut down, or another add of the same file and URL won.
        guard !isShutDown else {
            persistUpload(id)
            throw .invalidRequest("the download manager has shut down")
        }
        if let other = uploadBook.entry(file: request.file, url: request.url), other.id != id || other.status != .completed && other.status != .failed {
            // Its record goes back to what the book holds (none, for a new one).
            persistUpload(id)
            return other.id
        }
        uploadBook.entries[id] = entry
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
        let waiting = entries.filter { $0.status == .queued || $0.status == .paused }.sorted(by: UploadBook.startsBefore)
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
        _ = await uploadBook.saves?.value
        let (rows, unreadable) = try await store.uploadJobs(queue: queue)
        guard !uploadBook.restored else { return }
        uploadBook.restored = true
        for row in rows where uploadBook.entries[row.id] == nil { insertRestoredUpload(row) }
        for (id, why) in unreadable {
            downloader.configuration.logger.error("upload \(id) of the store is left out: its record cannot be read (\(why))")
        }
    }

    /// Brings in the uploads the store now holds that this manager does not (taken over from
    /// a member of the fleet that is gone); returns how many.
    func takeOverUploads() async throws(DownloadError) -> Int {
        _ = await uploadBook.saves?.value
        let (rows, _) = try await store.uploadJobs(queue: queue)
        var count = 0
        for row in rows where uploadBook.entries[row.id] == nil {
            insertRestoredUpload(row)
            count += 1
        }
        return count
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
        persistUpload(id, as: uploadBook.entries[id])
    }

    /// Records upload `id` as `entry` says (forgets it for nil), after every change recorded before.
    private func persistUpload(_ id: ID, as entry: UploadBook.Entry?) -> Task<DownloadError?, Never> {
        let previous = uploadBook.saves
        let (store, logger, queue) = (store, downloader.configuration.logger, queue)
        let row = entry.map { entry in
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
        guard uploadBook.hasQueued else { return }
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
            forgetUpload(id)
            schedule()
            return
        case (.shutdown?, .failure):
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
    func stopUpload(_ id: ID, _ stop: UploadBook.Stop) async {
        guard let task = uploadBook.entries[id]?.task else { return }
        let stronger = max(stop, uploadBook.entries[id]?.stop ?? stop)
        uploadBook.entries[id]?.stop = stronger
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
            failWaitingUpload(id, .cancelled)
            persistUpload(id)
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
            forgetUpload(id)
        }
        schedule()
    }

    /// Forgets an upload that does not run: from the book, the board and the store.
    func forgetUpload(_ id: ID) {
        uploadBook.entries[id] = nil
        uploadBoard.remove(id)
        persistUpload(id)
        hub.send(.upload(id, .removed))
    }

    /// Fails an upload that does not run with `error`: it ends now, among the finished.
    private func failWaitingUpload(_ id: ID, _ error: DownloadError) {
        uploadBook.nextFinishOrder += 1
        // Read first: read inside the assignment, it overlapped the entry's modification of the
        // same book (a crash, "simultaneous accesses", when the store failed with an upload waiting).
        let order = uploadBook.nextFinishOrder
        uploadBook.entries[id]?.finishOrder = order
        uploadBook.entries[id]?.status = .failed
        uploadBook.entries[id]?.error = error
        hub.send(.upload(id, .failed(error)))
    }

    /// The store failed (``halt(_:)``): the uploads that wait fail with it; running ones end
    /// by themselves, their own records failing.
    func haltUploads(_ failure: DownloadError) {
        for id in uploadIDs([.queued, .paused]) { failWaitingUpload(id, failure) }
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
