import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix

/// What the engine knows about one file on the server and on disk, as its row keeps it.
struct EngineState: Sendable, Hashable {
    var path: String
    var totalLength: Int64?
    var validators = Validators()
    /// Each source's, by URI, for a download from several (``DownloadRow/sourceValidators``).
    var sourceValidators: [String: Validators] = [:]
    var acceptsRanges = false
    /// Bytes flushed to disk before the store recorded them.
    var ranges = ByteRanges()

    var patch: RowPatch {
        get throws(DownloadError) {
            var patch = RowPatch.engine(
                path: path, totalLength: totalLength, validators: validators, acceptsRanges: acceptsRanges, ranges: ranges)
            patch.merge(try .sourceValidators(sourceValidators))
            return patch
        }
    }
}

extension DownloadRunner {
    /// The mutable side of one transfer, kept together so each step takes one `inout`.
    struct Transfer {
        var state: EngineState
        var machine: TransferStateMachine
        var digest: StreamingDigest?
        var meter = SpeedMeter()
        /// Body bytes written by this run, for the summary.
        var fetched: Int64 = 0
        /// How much of ``fetched`` the observer was told of (``EngineObserver/fetched``).
        var observed: Int64 = 0
        /// What a segmented transfer wrote, holes and all (with piece digests, its verified
        /// pieces); nil while a single stream runs.
        var segmentsWritten: ByteRanges?
        /// With piece digests, how far a single stream's pieces are verified; its digest
        /// runs over the piece being received.
        var verifiedPrefix: Int64?
        var pieceDigest: StreamingDigest?
        /// The sources that served bytes of a segmented transfer, for a checksum error.
        var servedBy: [String] = []
        let part: PartFile
        let checkpointer: Checkpointer

        /// What may be recorded: the bytes written, or with piece digests the verified ones.
        var written: ByteRanges { segmentsWritten ?? ByteRanges([0..<min(verifiedPrefix ?? .max, machine.offset)]) }
    }

    /// The request's piece digests for a file of `total` bytes, when it has any.
    ///
    /// - Throws: a checksum error when they describe a file of another length: the server's
    ///   file is not the one they were made from.
    func pieceDigests(total: Int64) throws(DownloadError) -> PieceChecksums? {
        guard let pieces = request.pieces else { return nil }
        guard pieces.fits(total: total) else {
            throw DownloadError(
                kind: .checksum,
                message: "the server's file has \(total) bytes, but the \(pieces.hashes.count) piece digests of \(pieces.length) bytes describe another length"
            )
            .with(url: request.displayURL)
        }
        return pieces
    }

    /// Files from this size on get their blocks reserved before the first byte.
    static let preallocationThreshold: Int64 = 1 << 20

    /// How often progress snapshots go out; more often only costs the byte loop.
    static let progressInterval: Duration = .milliseconds(100)

    /// Transfers into `part` until `path` is complete and in place.
    ///
    /// - Parameters:
    ///   - first: an answer to a plain GET whose body has not been read yet (the first contact).
    ///   - replacing: the file at `path` is Haul's own earlier version; the new one replaces it.
    func transfer(
        to path: String, part: PartFile, probe: ProbeResult, first: HTTPAnswer?, replacing: Bool,
        retry: inout RetryPolicy
    ) async throws(DownloadError) -> DownloadResult {
        defer { part.unlock() }
        let state = try await loadState(for: path, part: part, probe: probe)
        var transfer = Transfer(
            state: state,
            machine: TransferStateMachine(
                total: state.totalLength, validators: state.validators,
                acceptsRanges: state.acceptsRanges, offset: state.ranges.contiguousPrefix),
            digest: nil, part: part,
            checkpointer: Checkpointer(part: part, writer: store.writer, id: id, durable: state.ranges))
        var first = first
        do {
            // Fails fast on a full disk; blocks already written cost nothing to reserve again.
            // (A small file costs a system call more than it could save.)
            if let total = state.totalLength, total >= Self.preallocationThreshold { try part.preallocate(total) }
            if let missing = segmentation(of: transfer, trusted: state.ranges) {
                // Bytes arrive out of order: the checksum is computed over the file at the end.
                let complete = try await segmentedTransfer(&transfer, missing: missing, trusted: state.ranges, first: first)
                first = nil
                // One stream takes over from the bytes the connections left (all of them, or up
                // to the first hole when the server stopped honouring ranges).
                transfer.machine.takeOver(from: transfer.written.contiguousPrefix)
                transfer.segmentsWritten = nil
                if complete { return try await finish(&transfer, at: path, replacing: replacing) }
                logger.debug("falling back to one connection")
            }
            transfer.digest = try request.checksum.map { checksum throws(DownloadError) in
                try Self.digest(of: part, upTo: transfer.machine.offset, algorithm: checksum.algorithm)
            }
            while true {
                let before = transfer.machine.offset
                do {
                    let answer = first
                    first = nil
                    if try await attempt(&transfer, prefetched: answer) { break }
                } catch {
                    let (checkpointer, written) = (transfer.checkpointer, transfer.written)
                    try await Self.detached { () async throws(DownloadError) in try await checkpointer.flush(written) }
                    try await wait(&retry, after: error, madeProgress: transfer.machine.offset > before)
                }
            }
            return try await finish(&transfer, at: path, replacing: replacing)
        } catch {
            await stopped(transfer, error: error)
            throw error
        }
    }

    /// What can be trusted of the part file (the resume contract's rules 1–3): the ranges a
    /// row recorded for this path, as far as the file still holds them and the server still
    /// describes the same file. An empty part file needs no lookup at all.
    private func loadState(for path: String, part: PartFile, probe: ProbeResult) async throws(DownloadError) -> EngineState {
        let partSize = part.startedEmpty ? 0 : try part.size()
        var state = EngineState(path: path)
        if partSize > 0 {
            let rows = try await store.rows(path: path)
            if let best = rows.first(where: { !$0.recorded.isEmpty }) {
                let recorded = best.recorded
                state = EngineState(
                    path: path, totalLength: best.totalLength, validators: best.validators,
                    sourceValidators: best.sourceValidators, acceptsRanges: best.acceptsRanges, ranges: recorded)
                // The first contact may have gone to another source than last time's (the first
                // one failed): its own validators are the ones to compare.
                if let own = best.sourceValidators[request.url] { state.validators = own }
                // Bytes a killed process wrote in this boot are in the page cache: flushed now,
                // the row below may record them with the rest.
                if recorded != best.ranges {
                    try await offTheEventLoops { () throws(DownloadError) in try part.sync() }
                }
                // Another download's progress on this file is now this one's.
                if best.id != id { store.writer.update(best.id, .ranges(ByteRanges())) }
            }
        }
        // Only recorded bytes that are still in the file count; nothing else is trusted.
        var trusted = state.ranges.clamped(to: partSize)
        let changedLength = probe.totalLength != nil && state.totalLength != nil && probe.totalLength != state.totalLength
        let biggerThanRemote = probe.totalLength.map { partSize > $0 } ?? false
        if changedLength || biggerThanRemote || state.validators.contradicts(probe.validators) {
            logger.debug("starting over", metadata: ["path": "\(path)"])
            trusted = ByteRanges()
        }
        if trusted.byteCount == 0 {
            state.totalLength = probe.totalLength
            state.validators = probe.validators
            state.sourceValidators = [:]
            state.acceptsRanges = probe.acceptsRanges
        }
        let claimed = !state.ranges.isEmpty
        state.ranges = trusted
        store.writer.update(id, try state.patch)
        if trusted.byteCount == 0, partSize > 0 {
            // The row must stop claiming bytes before the file loses them.
            if claimed { try await store.flush() }
            try part.truncate()
        }
        return state
    }

    /// One request and its body (or `prefetched`, the first contact's answer). Returns true
    /// when the file is complete.
    private func attempt(_ transfer: inout Transfer, prefetched: HTTPAnswer?) async throws(DownloadError) -> Bool {
        var headers = self.headers
        if case .from(let start, let ifRange) = transfer.machine.nextRequest() {
            headers.append(("Range", RangeHeader.value(from: start)))
            if let ifRange { headers.append(("If-Range", ifRange)) }
        }
        let answer: HTTPAnswer
        if let prefetched {
            answer = prefetched
        } else {
            answer = try await transport.send(.GET, url: request.url, headers: headers, stallTimeout: stallTimeout)
        }
        switch transfer.machine.received(answer.head) {
        case .fail(let error):
            throw error
        case .restartFromZero(let reason):
            try await startOver(&transfer)
            throw .badResponse(reason)
        case .confirmComplete:
            let head = try await transport.send(.HEAD, url: request.url, headers: self.headers, stallTimeout: stallTimeout)
            switch transfer.machine.confirmed(head.head) {
            case .confirmComplete: return true
            case .fail(let error): throw error
            case .restartFromZero(let reason):
                try await startOver(&transfer)
                throw .badResponse(reason)
            case .stream:
                return false
            }
        case .stream(_, let truncate):
            if truncate { try await startOver(&transfer) }
            learnedFromAnswer(&transfer)
            try await receive(answer.body, into: &transfer)
            switch transfer.machine.bodyEnded() {
            case .complete: return true
            case .partial: return false
            case .truncated(let error): throw error
            }
        }
    }

    /// Forgets the partial: the row first, then the bytes (nothing to do for an empty one).
    private func startOver(_ transfer: inout Transfer) async throws(DownloadError) {
        transfer.digest = request.checksum.map { StreamingDigest($0.algorithm) }
        // Nothing is verified of a file started over (the next body starts its first piece).
        if transfer.verifiedPrefix != nil { transfer.verifiedPrefix = 0 }
        transfer.pieceDigest = nil
        // A fresh download has nothing to forget (its checkpointer has not run yet either): a
        // part file it made itself and has not written to, or one found empty with no record.
        let unwritten = transfer.state.ranges.isEmpty && transfer.machine.offset == 0 && transfer.segmentsWritten == nil
        if unwritten, transfer.part.startedEmpty { return }
        if unwritten, try transfer.part.size() == 0, await transfer.checkpointer.durable.isEmpty { return }
        try await transfer.checkpointer.flush(ByteRanges())
        try transfer.part.truncate()
        transfer.state.ranges = ByteRanges()
    }

    /// Records what a 200/206 taught about the file (length, validators) before its bytes
    /// land, so that a kill right after resumes against the right version.
    private func learnedFromAnswer(_ transfer: inout Transfer) {
        let machine = transfer.machine
        guard
            transfer.state.totalLength != machine.total || transfer.state.validators != machine.validators
                || transfer.state.acceptsRanges != machine.acceptsRanges
        else { return }
        transfer.state.totalLength = machine.total
        transfer.state.validators = machine.validators
        transfer.state.acceptsRanges = machine.acceptsRanges
        // Not the ranges: those are the checkpointer's to write, and may be newer than these.
        var patch = RowPatch()
        patch.set(.path, transfer.state.path)
        patch.set(.totalLength, machine.total)
        patch.set(.etag, machine.validators.etag)
        patch.set(.lastModified, machine.validators.lastModified)
        patch.set(.acceptsRanges, machine.acceptsRanges)
        store.writer.update(id, patch)
    }

    /// The byte loop: write in place, hash in order, checkpoint on schedule.
    private func receive(_ body: HTTPClientResponse.Body, into transfer: inout Transfer) async throws(DownloadError) {
        var lastCheckpoint = (instant: ContinuousClock.now, offset: transfer.machine.offset)
        var lastProgress = lastCheckpoint.instant
        let pieces = try transfer.machine.total.map { total throws(DownloadError) in try pieceDigests(total: total) } ?? request.pieces
        if let pieces { try startPiece(&transfer, pieces) }
        // The bytes since the last report, also when the request fails.
        defer { tellFetched(&transfer) }
        do {
            for try await buffer in body {
                let count = buffer.readableBytes
                guard transfer.machine.fits(count) else {
                    throw DownloadError.badResponse("the server sent more bytes than it announced")
                }
                try transfer.part.write(buffer, at: transfer.machine.offset)
                transfer.digest?.update(buffer)
                if let pieces { try checkPieces(buffer, &transfer, pieces) }
                transfer.machine.wrote(count)
                transfer.fetched += Int64(count)
                if isThrottled { try await throttle(count) }
                let now = ContinuousClock.now
                if transfer.machine.offset - lastCheckpoint.offset >= Checkpointer.noteBytes
                    || now - lastCheckpoint.instant >= Checkpointer.noteInterval
                {
                    try await transfer.checkpointer.request(transfer.written)
                    lastCheckpoint = (now, transfer.machine.offset)
                }
                if now - lastProgress >= Self.progressInterval {
                    lastProgress = now
                    report(&transfer, at: now)
                }
            }
        } catch let error as DownloadError {
            throw error
        } catch {
            throw HTTPTransport.map(error, stallTimeout: stallTimeout)
        }
        report(&transfer, at: .now)
    }

    /// Starts the digest of the piece a stream resumes in, from the bytes of it already in the
    /// part file; what lies before that piece was recorded verified or checked as it came.
    private func startPiece(_ transfer: inout Transfer, _ pieces: PieceChecksums) throws(DownloadError) {
        let offset = transfer.machine.offset
        let start = offset / pieces.length * pieces.length
        var digest = StreamingDigest(pieces.algorithm)
        if offset > start { try digest.update(from: transfer.part, range: start..<offset) }
        transfer.pieceDigest = digest
        transfer.verifiedPrefix = start
    }

    /// Feeds `buffer`, written at the stream's offset, to the pieces' digests, checking each
    /// piece it ends. A piece that does not match goes back to be fetched again: the stream's
    /// offset returns to its start and the try fails (the retry asks from there).
    private func checkPieces(_ buffer: ByteBuffer, _ transfer: inout Transfer, _ pieces: PieceChecksums) throws(DownloadError) {
        var offset = transfer.machine.offset
        var index = buffer.readerIndex
        let end = offset + Int64(buffer.readableBytes)
        while offset < end {
            let piece = Int(offset / pieces.length)
            let pieceEnd = min(Int64(piece + 1) * pieces.length, transfer.machine.total ?? .max)
            let take = Int(min(end, pieceEnd) - offset)
            buffer.withUnsafeReadableBytes { bytes in
                let slice = UnsafeRawBufferPointer(rebasing: bytes[(index - buffer.readerIndex)..<(index - buffer.readerIndex + take)])
                transfer.pieceDigest?.update(slice)
            }
            offset += Int64(take)
            index += take
            guard offset == pieceEnd, piece < pieces.hashes.count else { continue }
            let actual = transfer.pieceDigest?.finalizeHex()
            transfer.pieceDigest = StreamingDigest(pieces.algorithm)
            guard actual == pieces.hashes[piece] else {
                let start = Int64(piece) * pieces.length
                transfer.machine.takeOver(from: start)
                transfer.digest = nil
                throw DownloadError.badResponse(
                    "\(pieces.describe(piece, total: transfer.machine.total ?? pieceEnd)) did not match its \(pieces.algorithm.rawValue) digest")
            }
            transfer.verifiedPrefix = pieceEnd
        }
    }

    private func report(_ transfer: inout Transfer, at instant: ContinuousClock.Instant) {
        tellFetched(&transfer)
        transfer.meter.sample(bytes: transfer.machine.offset, at: instant)
        events.progress(
            DownloadProgress(
                destination: transfer.state.path, bytesDone: transfer.machine.offset,
                totalBytes: transfer.machine.total, bytesPerSecond: transfer.meter.bytesPerSecond))
    }

    /// Tells the observer of the bytes written since it was last told.
    private func tellFetched(_ transfer: inout Transfer) {
        guard transfer.fetched > transfer.observed else { return }
        observer.fetched(transfer.fetched - transfer.observed)
        transfer.observed = transfer.fetched
    }

    /// Size check, checksum, then the batched flush and atomic rename: nothing unverified at `path`.
    private func finish(_ transfer: inout Transfer, at path: String, replacing: Bool) async throws(DownloadError) -> DownloadResult {
        let total = transfer.machine.total ?? transfer.machine.offset
        // A part file this download made holds what it wrote, never more than the total
        // (a connection that had sent too much failed).
        let size = transfer.part.startedEmpty ? transfer.machine.offset : try transfer.part.size()
        if size > total { try transfer.part.truncate(to: total) }
        guard size >= total, transfer.machine.offset == total else {
            throw .sizeMismatch(expected: total, actual: min(size, transfer.machine.offset))
        }
        if let pieces = try pieceDigests(total: total), let from = transfer.verifiedPrefix, from < total {
            // A stream of unknown length learns where its last piece ends only now.
            let part = transfer.part
            let bad = try await offTheEventLoops { () throws(DownloadError) -> Int? in
                for index in pieces.indices(overlapping: from..<total) where try !pieces.matches(index, of: part, total: total) {
                    return index
                }
                return nil
            }
            if let bad {
                throw DownloadError(
                    kind: .checksum, message: "\(pieces.describe(bad, total: total)) did not match its \(pieces.algorithm.rawValue) digest"
                ).with(url: request.displayURL)
            }
        }
        if let checksum = request.checksum {
            let actual: String
            if let digest = transfer.digest {
                actual = digest.finalizeHex()
            } else {
                // Seconds of reading for a big resumed file: on the threads for blocking I/O,
                // not on one of the few that run every download's tasks.
                let part = transfer.part
                actual = try await offTheEventLoops { () throws(DownloadError) in
                    try Self.digest(of: part, upTo: total, algorithm: checksum.algorithm).finalizeHex()
                }
            }
            guard actual == checksum.hex else {
                // The bytes are wrong, so keeping them would only make the next run fail the same way.
                transfer.part.remove()
                store.writer.update(id, .ranges(ByteRanges()))
                var mismatch = DownloadError.checksumMismatch(algorithm: checksum.algorithm.rawValue, expected: checksum.hex, actual: actual)
                // Which of several sources is wrong is not known: every one that served bytes is named.
                if transfer.servedBy.count > 1 {
                    mismatch = DownloadError(kind: .checksum, message: mismatch.message + " (from \(transfer.servedBy.joined(separator: ", ")))")
                }
                throw mismatch.with(url: request.displayURL)
            }
        }
        await events.transferred()
        // The row first, then the file: a download added moments ago may still have its insert
        // waiting for company (a crash would leave a file at its final name that no row knows).
        if store.writer.isInserting(id) { try await store.flush() }
        // A store that failed may have lost the insert: no file without its row.
        if let failure = store.writer.failure { throw failure }
        let committed = try await committer.commit(
            transfer.part, to: path, replacing: request.overwrite || replacing, waitingAtMost: committingAtMost)
        store.writer.update(id, .finished(path: committed.path, bytes: total, fileModified: committed.modified))
        report(&transfer, at: .now)
        return DownloadResult(path: committed.path, bytes: total, bytesFetched: transfer.fetched, wasAlreadyComplete: false)
    }

    /// Records the bytes that were flushed when the transfer stopped (a pause, a failure).
    private func stopped(_ transfer: Transfer, error: DownloadError) async {
        guard error.kind != .checksum else { return }
        let (written, checkpointer) = (transfer.written, transfer.checkpointer)
        do {
            try await Self.detached { () async throws(DownloadError) in try await checkpointer.flush(written) }
        } catch {
            // The store is failing: that failure reaches whoever runs this download (the
            // manager's failure handler); the bytes stay in the part file.
            logger.debug("cannot record progress: \(error)")
        }
    }

    /// Hashes the first `length` bytes of the part file (a run that resumes has no digest state).
    static func digest(of part: PartFile, upTo length: Int64, algorithm: Checksum.Algorithm) throws(DownloadError) -> StreamingDigest {
        var digest = StreamingDigest(algorithm)
        try digest.update(from: part, range: 0..<length)
        return digest
    }

    /// Runs `work` outside the current task's cancellation: saving state after a pause
    /// must not be cut short by the pause itself.
    static func detached<T: Sendable>(_ work: @escaping @Sendable () async throws(DownloadError) -> T) async throws(DownloadError) -> T {
        let result = await Task { () async -> Result<T, DownloadError> in
            do throws(DownloadError) { return .success(try await work()) } catch { return .failure(error) }
        }.value
        return try result.get()
    }
}
