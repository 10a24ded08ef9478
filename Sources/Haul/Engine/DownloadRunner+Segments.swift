import AsyncHTTPClient
import NIOCore

extension DownloadError {
    /// A connection of a segmented transfer got an answer that is not the range it asked for
    /// (a 200, a 416, another range, another file): the transfer falls back to one stream,
    /// whose resume rules know what each of those means.
    static let rangesNotHonoured = DownloadError(kind: .protocolViolation, message: "the server stopped honouring ranges")
}

extension DownloadRunner {
    /// What every connection of one segmented transfer needs.
    struct SegmentContext: Sendable {
        let total: Int64
        let validators: Validators
        let destination: String
        let part: PartFile
        let checkpointer: Checkpointer
        let board: SegmentBoard
    }

    /// The holes left to fetch, when several connections are allowed and the server has shown
    /// it serves ranges of a file of known length; nil to use a single stream.
    func segmentation(of transfer: Transfer, trusted: ByteRanges) -> [Range<Int64>]? {
        guard request.connections > 1, let total = transfer.machine.total, transfer.machine.acceptsRanges else { return nil }
        var missing: [Range<Int64>] = []
        var cursor: Int64 = 0
        for range in trusted.clamped(to: total).ranges {
            if range.lowerBound > cursor { missing.append(cursor..<range.lowerBound) }
            cursor = range.upperBound
        }
        if cursor < total { missing.append(cursor..<total) }
        let left = missing.reduce(0) { $0 + $1.count }
        return left >= 2 * request.minimumSplitSize ? missing : nil
    }

    /// Fetches `missing` over up to `request.connections` connections. Returns true when every
    /// byte is written, false when the server stopped honouring ranges (a single stream takes over).
    ///
    /// - Parameter first: the first contact's answer to a plain GET: its body, from byte 0, feeds
    ///   the first segment, so a fresh download costs no extra request.
    func segmentedTransfer(
        _ transfer: inout Transfer, missing: [Range<Int64>], trusted: ByteRanges,
        first: HTTPAnswer?
    ) async throws(DownloadError) -> Bool {
        // Under a manager, connections beyond the first need free slots on the host.
        let extra = lease?.acquire(upTo: request.connections - 1) ?? request.connections - 1
        defer { lease?.release(extra) }
        let connections = 1 + extra
        let planner = SegmentPlanner(missing: missing, connections: connections, minimumSplit: request.minimumSplitSize)
        let context = SegmentContext(
            total: transfer.machine.total ?? 0, validators: transfer.machine.validators, destination: transfer.state.path,
            part: transfer.part, checkpointer: transfer.checkpointer, board: SegmentBoard(planner: planner, written: trusted))
        logger.debug("segmented", metadata: ["connections": "\(connections)", "holes": "\(missing.count)"])
        // The first answer's body starts at 0: the segment that starts there is its.
        let opening = first.flatMap { answer in context.board.assign().map { (segment: $0, answer: answer) } }
        let failure: DownloadError? = await withTaskGroup(of: DownloadError?.self) { group in
            for index in 0..<connections {
                group.addTask { await self.connection(context, opening: index == 0 ? opening : nil) }
            }
            var first: DownloadError?
            for await failure in group {
                if let failure, first == nil {
                    first = failure
                    group.cancelAll()
                }
            }
            return first
        }
        transfer.segmentsWritten = context.board.written
        transfer.fetched += context.board.fetched
        if let failure {
            if failure == .rangesNotHonoured { return false }
            throw failure
        }
        return context.board.isComplete
    }

    /// One connection: takes segments until none is left, retrying on its own. `opening` is a
    /// segment already assigned with the answer that serves it.
    private func connection(_ context: SegmentContext, opening: (segment: SegmentPlanner.Segment, answer: HTTPAnswer)?) async -> DownloadError? {
        var retry = RetryPolicy(maxTries: request.maxTries, baseWait: request.retryWait)
        if let opening {
            do throws(DownloadError) {
                try await receive(opening.answer.body, segment: opening.segment, announcedEnd: context.total, context)
            } catch {
                if error.kind == .cancelled || Task.isCancelled { return .cancelled }
            }
            context.board.release(opening.segment.id)
        }
        while !context.board.isComplete {
            if Task.isCancelled { return .cancelled }
            guard let segment = context.board.assign() else {
                // Nothing worth splitting now; a failing connection may hand work back.
                do { try await clock.sleep(for: .milliseconds(50)) } catch { return .cancelled }
                continue
            }
            do throws(DownloadError) {
                try await fetch(segment, context)
                context.board.release(segment.id)
            } catch {
                let madeProgress = (context.board.position(of: segment.id) ?? segment.next) > segment.next
                context.board.release(segment.id)
                if error == .rangesNotHonoured { return error }
                do throws(DownloadError) {
                    try await wait(&retry, after: error, madeProgress: madeProgress)
                } catch {
                    return error
                }
            }
        }
        return nil
    }

    /// Asks for one segment and writes its bytes until the segment's (possibly moved) end.
    private func fetch(_ segment: SegmentPlanner.Segment, _ context: SegmentContext) async throws(DownloadError) {
        var headers = self.headers
        headers.append(("Range", RangeHeader.value(from: segment.next, to: segment.end - 1)))
        if let ifRange = context.validators.ifRange { headers.append(("If-Range", ifRange)) }
        let answer = try await transport.send(.GET, url: request.url, headers: headers, stallTimeout: stallTimeout)
        let head = answer.head
        switch head.status {
        case 206:
            guard let range = head.contentRange, range.first == segment.next, range.total == context.total,
                !context.validators.contradicts(head.validators)
            else { throw .rangesNotHonoured }
            try await receive(answer.body, segment: segment, announcedEnd: range.last + 1, context)
        case 200, 416:
            throw .rangesNotHonoured
        default:
            throw head.error
        }
    }

    private func receive(
        _ body: HTTPClientResponse.Body, segment: SegmentPlanner.Segment, announcedEnd: Int64,
        _ context: SegmentContext
    ) async throws(DownloadError) {
        var offset = segment.next
        do {
            for try await buffer in body {
                let room = context.board.room(for: segment.id, at: offset, count: buffer.readableBytes)
                if room > 0 {
                    try context.part.write(buffer.getSlice(at: buffer.readerIndex, length: room)!, at: offset)
                }
                let after = context.board.wrote(segment.id, at: offset, count: room, now: .now)
                offset += Int64(after.accepted)
                if isThrottled { try await throttle(after.accepted) }
                if let ranges = after.checkpoint { try await context.checkpointer.request(ranges) }
                if let report = after.report {
                    events.progress(
                        DownloadProgress(
                            destination: context.destination, bytesDone: report.bytes,
                            totalBytes: context.total, bytesPerSecond: report.bytesPerSecond,
                            connections: report.connections))
                }
                // Reached the end, or another connection took over the rest: stop reading.
                if after.accepted < buffer.readableBytes { return }
                // The answer goes on past the segment (the first contact's whole file, or a
                // range a thief cut short): its next bytes are not waited for, since a server
                // that throttles may send them only when its next second's allowance opens.
                if after.finished, offset < announcedEnd { return }
            }
        } catch let error as DownloadError {
            throw error
        } catch {
            throw HTTPTransport.map(error, stallTimeout: stallTimeout)
        }
        if offset < min(announcedEnd, context.board.end(of: segment.id) ?? offset) {
            throw .network("connection closed after \(offset - segment.next) bytes of a segment")
        }
    }
}
