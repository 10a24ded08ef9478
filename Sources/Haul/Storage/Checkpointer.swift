import NIOPosix

/// Makes progress durable without stalling the byte loop, against two kinds of crash.
///
/// - A killed process (`kill -9`, the OOM killer, a crash of Haul) loses nothing it wrote: the
///   bytes are in the page cache. Each ``request(_:)`` records the ranges written at once, with
///   the boot that wrote them (``DownloadRow/unsynced``), in the store's next transaction
///   without lingering for company, and callers ask every ``noteInterval`` or ``noteBytes``: a
///   rerun refetches little more than that.
/// - A crash of the system or a power cut loses what was not flushed. Every ``interval`` or
///   ``byteInterval``, data is `fdatasync`ed on a thread-pool thread, and only then does the
///   store record the ranges as flushed (``DownloadRow/ranges``), the only ones a rerun in
///   another boot trusts.
///
/// Flushes coalesce: while one runs, newer requests replace each other, so a slow disk costs
/// checkpoints, never throughput. ``flush(_:)`` waits until everything asked for, and the given
/// ranges, are durable.
actor Checkpointer {
    /// The resume contract after a system crash: a flushed checkpoint at least every second or
    /// every 8 MiB.
    static let interval: Duration = .seconds(1)
    static let byteInterval: Int64 = 8 << 20
    /// How often callers report what they wrote: after a killed process, a rerun refetches about
    /// this much (plus one ``StoreWriter/lingerStep`` and a transaction).
    static let noteInterval: Duration = .milliseconds(100)
    static let noteBytes: Int64 = 1 << 20

    private let part: PartFile
    private let writer: StoreWriter
    private let id: DownloadID
    private var pending: (ranges: ByteRanges, final: Bool)?
    private var worker: Task<Void, Never>?
    private var failure: DownloadError?
    /// When the last flush was asked for, and how many bytes it covered.
    private var lastFlush: (instant: ContinuousClock.Instant, bytes: Int64)
    private(set) var durable: ByteRanges

    init(part: PartFile, writer: StoreWriter, id: DownloadID, durable: ByteRanges) {
        self.part = part
        self.writer = writer
        self.id = id
        self.durable = durable
        lastFlush = (.now, durable.byteCount)
    }

    /// Records that `ranges` are written (in the store's next group commit), and asks for them to
    /// be flushed soon when a flush is due. Throws a failure of an earlier checkpoint.
    func request(_ ranges: ByteRanges) throws(DownloadError) {
        if let failure { throw failure }
        // A part file without a name has no path a rerun could find it at: its bytes are
        // recorded once a flush has named it.
        if let boot = BootID.current, part.isNamed { writer.update(id, .unsynced(ranges, boot: boot), promptly: true) }
        let now = ContinuousClock.now
        guard ranges.byteCount - lastFlush.bytes >= Self.byteInterval || now - lastFlush.instant >= Self.interval else { return }
        lastFlush = (now, ranges.byteCount)
        pending = (ranges, pending?.final ?? false)
        if worker == nil {
            worker = Task { await self.drain() }
        }
    }

    /// Makes `ranges` durable now, after any checkpoint under way, and waits until the store
    /// has written them: they are then all the row says of the part file.
    func flush(_ ranges: ByteRanges) async throws(DownloadError) {
        pending = (ranges, true)
        lastFlush = (.now, ranges.byteCount)
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
                // Written with the next group commit; a failure there reaches the manager. A
                // regular flush leaves the record of bytes written since in place.
                writer.update(id, next.final ? .ranges(next.ranges) : .flushed(next.ranges))
                durable = next.ranges
            } catch let error as DownloadError {
                failure = error
            } catch {
                failure = .io("cannot record progress in the store: \(error)")
            }
        }
        worker = nil
    }
}
