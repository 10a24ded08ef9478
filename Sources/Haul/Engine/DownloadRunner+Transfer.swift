import AsyncHTTPClient
import Foundation
import NIOCore

extension DownloadRunner {
    /// The mutable side of one transfer, kept together so each step takes one `inout`.
    struct Transfer {
        var record: DownloadRecord
        var machine: TransferStateMachine
        var digest: StreamingDigest?
        var meter = SpeedMeter()
        /// Body bytes written by this run, for the summary.
        var fetched: Int64 = 0
        /// What a segmented transfer wrote, holes and all; nil while a single stream runs.
        var segmentsWritten: ByteRanges?
        let part: PartFile
        let checkpointer: Checkpointer

        var written: ByteRanges { segmentsWritten ?? ByteRanges([0..<machine.offset]) }
    }

    /// How often progress snapshots go out; more often only costs the byte loop.
    static let progressInterval: Duration = .milliseconds(100)

    func transfer(to path: String, part: PartFile, probe: ProbeResult, retry: inout RetryPolicy) async throws(DownloadError) -> DownloadResult {
        defer { part.unlock() }
        let record = try await loadRecord(for: path, part: part, probe: probe)
        var transfer = Transfer(
            record: record,
            machine: TransferStateMachine(total: record.totalLength, validators: record.validators,
                                          acceptsRanges: record.acceptsRanges, offset: record.ranges.contiguousPrefix),
            digest: nil, part: part,
            checkpointer: Checkpointer(part: part, store: store, id: record.id, durable: record.ranges))
        do {
            // Fails fast on a full disk; blocks already written cost nothing to reserve again.
            if let total = record.totalLength, total > 0 { try part.preallocate(total) }
            if let missing = segmentation(of: transfer, trusted: record.ranges) {
                // Bytes arrive out of order: the checksum is computed over the file at the end.
                let complete = try await segmentedTransfer(&transfer, missing: missing, trusted: record.ranges)
                // One stream takes over from the bytes the connections left (all of them, or up
                // to the first hole when the server stopped honouring ranges).
                transfer.machine.takeOver(from: transfer.written.contiguousPrefix)
                transfer.segmentsWritten = nil
                if complete { return try await finish(&transfer, at: path) }
                logger.debug("falling back to one connection")
            }
            transfer.digest = try request.checksum.map { checksum throws(DownloadError) in
                try Self.digest(of: part, upTo: transfer.machine.offset, algorithm: checksum.algorithm)
            }
            while true {
                let before = transfer.machine.offset
                do {
                    if try await attempt(&transfer) { break }
                } catch {
                    let (checkpointer, written) = (transfer.checkpointer, transfer.written)
                    try await Self.detached { () async throws(DownloadError) in try await checkpointer.flush(written) }
                    try await wait(&retry, after: error, madeProgress: transfer.machine.offset > before)
                }
            }
            return try await finish(&transfer, at: path)
        } catch {
            await stopped(transfer, error: error)
            throw error
        }
    }

    /// Reads the store's row for `path` and keeps only what can be trusted (DESIGN rules 1–3).
    private func loadRecord(for path: String, part: PartFile, probe: ProbeResult) async throws(DownloadError) -> DownloadRecord {
        let partSize = try part.size()
        let now = Date()
        var record = try await storeAccess { try await store.record(destination: path) }
            ?? DownloadRecord(id: UUID().uuidString, destination: path, url: request.url, totalLength: nil,
                              acceptsRanges: false, ranges: ByteRanges(), status: .running, createdAt: now, updatedAt: now)
        // Only recorded bytes that are still in the file count; nothing else is trusted.
        var trusted = record.ranges.clamped(to: partSize)
        let changedLength = probe.totalLength != nil && record.totalLength != nil && probe.totalLength != record.totalLength
        let biggerThanRemote = probe.totalLength.map { partSize > $0 } ?? false
        if changedLength || biggerThanRemote || record.validators.contradicts(probe.validators) {
            logger.debug("starting over", metadata: ["path": "\(path)"])
            trusted = ByteRanges()
        }
        if trusted.byteCount == 0 {
            record.totalLength = probe.totalLength
            record.validators = probe.validators
            record.acceptsRanges = probe.acceptsRanges
        }
        record.ranges = trusted
        record.url = request.url
        record.status = .running
        record.lastError = nil
        record.checksum = request.checksum?.description
        // The row must stop claiming bytes before the file loses them.
        try await storeAccess { try await store.save(record) }
        if trusted.byteCount == 0 { try part.truncate() }
        return record
    }

    /// One request and its body. Returns true when the file is complete.
    private func attempt(_ transfer: inout Transfer) async throws(DownloadError) -> Bool {
        var headers = request.headers.map { ($0.name, $0.value) }
        if case .from(let start, let ifRange) = transfer.machine.nextRequest() {
            headers.append(("Range", RangeHeader.value(from: start)))
            if let ifRange { headers.append(("If-Range", ifRange)) }
        }
        let answer = try await transport.send(.GET, url: request.url, headers: headers, stallTimeout: stallTimeout)
        switch transfer.machine.received(answer.head) {
        case .fail(let error):
            throw error
        case .restartFromZero(let reason):
            try await startOver(&transfer)
            throw .badResponse(reason)
        case .confirmComplete:
            let head = try await transport.send(.HEAD, url: request.url, headers: request.headers.map { ($0.name, $0.value) },
                                                stallTimeout: stallTimeout)
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
            try await learnedFromAnswer(&transfer)
            try await receive(answer.body, into: &transfer)
            switch transfer.machine.bodyEnded() {
            case .complete: return true
            case .partial: return false
            case .truncated(let error): throw error
            }
        }
    }

    /// Forgets the partial: the row first, then the bytes.
    private func startOver(_ transfer: inout Transfer) async throws(DownloadError) {
        try await transfer.checkpointer.flush(ByteRanges())
        try transfer.part.truncate()
        transfer.record.ranges = ByteRanges()
        transfer.digest = request.checksum.map { StreamingDigest($0.algorithm) }
    }

    /// Saves what a 200/206 taught about the file (length, validators) before its bytes
    /// land, so that a kill right after can resume against the right version.
    private func learnedFromAnswer(_ transfer: inout Transfer) async throws(DownloadError) {
        let machine = transfer.machine
        guard transfer.record.totalLength != machine.total || transfer.record.validators != machine.validators
                || transfer.record.acceptsRanges != machine.acceptsRanges else { return }
        transfer.record.totalLength = machine.total
        transfer.record.validators = machine.validators
        transfer.record.acceptsRanges = machine.acceptsRanges
        transfer.record.ranges = await transfer.checkpointer.durable
        let record = transfer.record
        try await storeAccess { try await store.save(record) }
    }

    /// The byte loop: write in place, hash in order, checkpoint on schedule.
    private func receive(_ body: HTTPClientResponse.Body, into transfer: inout Transfer) async throws(DownloadError) {
        var lastCheckpoint = (instant: ContinuousClock.now, offset: transfer.machine.offset)
        var lastProgress = lastCheckpoint.instant
        do {
            for try await buffer in body {
                let count = buffer.readableBytes
                guard transfer.machine.fits(count) else {
                    throw DownloadError.badResponse("the server sent more bytes than it announced")
                }
                try transfer.part.write(buffer, at: transfer.machine.offset)
                transfer.digest?.update(buffer)
                transfer.machine.wrote(count)
                transfer.fetched += Int64(count)
                if isThrottled { try await throttle(count) }
                let now = ContinuousClock.now
                if transfer.machine.offset - lastCheckpoint.offset >= Checkpointer.byteInterval
                    || now - lastCheckpoint.instant >= Checkpointer.interval {
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

    private func report(_ transfer: inout Transfer, at instant: ContinuousClock.Instant) {
        transfer.meter.sample(bytes: transfer.machine.offset, at: instant)
        events.progress(DownloadProgress(destination: transfer.record.destination, bytesDone: transfer.machine.offset,
                                         totalBytes: transfer.machine.total, bytesPerSecond: transfer.meter.bytesPerSecond))
    }

    /// Size check, checksum, flush, atomic rename, folder fsync: nothing unverified at `path`.
    private func finish(_ transfer: inout Transfer, at path: String) async throws(DownloadError) -> DownloadResult {
        let total = transfer.machine.total ?? transfer.machine.offset
        let size = try transfer.part.size()
        if size > total { try transfer.part.truncate(to: total) }
        guard size >= total, transfer.machine.offset == total else {
            throw .sizeMismatch(expected: total, actual: min(size, transfer.machine.offset))
        }
        if let checksum = request.checksum {
            var digest = transfer.digest
            if digest == nil { digest = try Self.digest(of: transfer.part, upTo: total, algorithm: checksum.algorithm) }
            let actual = digest?.finalizeHex() ?? ""

            guard actual == checksum.hex else {
                // The bytes are wrong, so keeping them would only make the next run fail the same way.
                try? FileManager.default.removeItem(atPath: transfer.part.path)
                try? await store.delete(id: transfer.record.id)
                throw DownloadError.checksumMismatch(algorithm: checksum.algorithm.rawValue, expected: checksum.hex, actual: actual)
                    .with(url: request.url)
            }
        }
        try await transfer.checkpointer.flush(ByteRanges([0..<total]))
        if !request.overwrite, DestinationResolver.regularFileSize(path) != nil {
            throw .io("\(path) appeared while downloading; the download is kept in \(transfer.part.path)")
        }
        try transfer.part.commit(to: path)
        transfer.record.ranges = ByteRanges([0..<total])
        transfer.record.totalLength = total
        transfer.record.status = .completed
        let record = transfer.record
        try await storeAccess { try await store.save(record) }
        report(&transfer, at: .now)
        return DownloadResult(path: path, bytes: total, bytesFetched: transfer.fetched, wasAlreadyComplete: false)
    }

    /// Records why the transfer stopped, keeping every byte that was flushed.
    private func stopped(_ transfer: Transfer, error: DownloadError) async {
        guard error.kind != .checksum else { return }
        let (base, written, checkpointer) = (transfer.record, transfer.written, transfer.checkpointer)
        try? await Self.detached { () async throws(DownloadError) in
            try await checkpointer.flush(written)
            var record = base
            record.ranges = await checkpointer.durable
            record.status = error.kind == .cancelled ? .paused : .failed
            record.lastError = error.kind == .cancelled ? nil : error.description
            let final = record
            try await storeAccess { try await store.save(final) }
        }
    }

    /// Hashes the first `length` bytes of the part file (a run that resumes has no digest state).
    static func digest(of part: PartFile, upTo length: Int64, algorithm: Checksum.Algorithm) throws(DownloadError) -> StreamingDigest {
        var digest = StreamingDigest(algorithm)
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { chunk.deallocate() }
        var offset: Int64 = 0
        while offset < length {
            let wanted = UnsafeMutableRawBufferPointer(rebasing: chunk[0..<Int(min(Int64(chunk.count), length - offset))])
            let n = try part.read(into: wanted, at: offset)
            guard n > 0 else { throw .io("read", path: part.path, errno: EIO) }
            digest.update(UnsafeRawBufferPointer(rebasing: chunk[0..<n]))
            offset += Int64(n)
        }
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

    func storeAccess<T>(_ work: () async throws -> T) async throws(DownloadError) -> T {
        do {
            return try await work()
        } catch is CancellationError {
            // A pause or cancel arrived while waiting for the store; nothing failed.
            throw .cancelled
        } catch {
            throw .io("cannot use the store \(store.path): \(error)")
        }
    }
}
