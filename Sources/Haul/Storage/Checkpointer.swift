import NIOPosix

/// Makes progress durable without stalling the byte loop: data is `fdatasync`ed on a
/// thread-pool thread, and only then does the store record the ranges.
///
/// Requests coalesce: while one flush runs, newer requests replace each other, so a slow
/// disk costs checkpoints, never throughput. ``flush(_:)`` waits until everything asked
/// for, and the given ranges, are durable.
actor Checkpointer {
    /// The resume contract: a checkpoint at least every second or every 8 MiB.
    static let interval: Duration = .seconds(1)
    static let byteInterval: Int64 = 8 << 20

    private let part: PartFile
    private let writer: StoreWriter
    private let id: DownloadID
    private var pending: ByteRanges?
    private var worker: Task<Void, Never>?
    private var failure: DownloadError?
    private(set) var durable: ByteRanges

    init(part: PartFile, writer: StoreWriter, id: DownloadID, durable: ByteRanges) {
        self.part = part
        self.writer = writer
        self.id = id
        self.durable = durable
    }

    /// Asks for `ranges` to become durable soon. Throws a failure of an earlier checkpoint.
    func request(_ ranges: ByteRanges) throws(DownloadError) {
        if let failure { throw failure }
        pending = ranges
        if worker == nil {
            worker = Task { await self.drain() }
        }
    }

    /// Makes `ranges` durable now, after any checkpoint under way, and waits until the store
    /// has written them.
    func flush(_ ranges: ByteRanges) async throws(DownloadError) {
        pending = ranges
        // In a task of its own: a pause cancels the caller, and must not cut the save short.
        let worker = worker ?? Task { await self.drain() }
        self.worker = worker
        await worker.value
        if let failure { throw failure }
        let writer = writer
        let stored = await Task { () async -> DownloadError? in
            do throws(DownloadError) { try await writer.flush() } catch { return error }
            return nil
        }.value
        if let stored { throw stored }
    }

    private func drain() async {
        while let next = pending {
            pending = nil
            do {
                let part = self.part
                // A part file without a name gets it now: the ranges recorded below must be
                // findable after a crash. Where another process took the name meanwhile, the
                // bytes stay unnamed and nothing is recorded (that process has the file).
                let recordable = try await NIOThreadPool.singleton.runIfActive { () throws(DownloadError) -> Bool in
                    guard try part.name() else { return false }
                    try part.sync()
                    return true
                }
                guard recordable else { continue }
                // Written with the next group commit; a failure there reaches the manager.
                writer.update(id, .ranges(next))
                durable = next
            } catch let error as DownloadError {
                failure = error
            } catch {
                failure = .io("cannot record progress in the store: \(error)")
            }
        }
        worker = nil
    }
}
