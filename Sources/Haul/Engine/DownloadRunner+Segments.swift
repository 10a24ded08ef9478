import AsyncHTTPClient
import NIOCore
import Synchronization

extension DownloadError {
    /// A connection of a segmented transfer got an answer that is not the range it asked for
    /// (a 200, a 416, another range, another file): the transfer falls back to one stream,
    /// whose resume rules know what each of those means.
    static let rangesNotHonoured = DownloadError(kind: .protocolViolation, message: "the server stopped honouring ranges")

    /// A mirror whose answer shows it does not serve the same file as the others.
    static func otherFile(_ why: String) -> DownloadError { DownloadError(kind: .protocolViolation, message: why) }
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
        /// The request's sources, in order; connections are spread over them.
        let sources: [DownloadRequest.Source]
        /// Each source's host, as connection slots are counted.
        let hosts: [String]
        /// Each source's validators by URI as the transfer began (the row's, and the first
        /// source's); ``sourceValidators`` adds what mirrors answered since.
        let knownValidators: [String: Validators]

        /// Each source's validators by URI, as the row keeps them: a mirror's are recorded with
        /// its first answer, before any of its bytes are.
        var sourceValidators: [String: Validators] {
            var all = knownValidators
            for (index, source) in board.sources.enumerated() {
                if let validators = source.validators { all[sources[index].uri] = validators }
            }
            return all
        }
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
        let sources = request.sources
        // Connections are dealt to the sources in turn, each beyond the download's first one
        // taking a free slot on its source's host (under a manager; the host's limit is
        // --max-connections-per-host), until the request's connections are all dealt.
        let hosts = sources.map { HTTPURL.connectionHost(of: $0.uri) }
        var dealt = Array(repeating: 0, count: sources.count)
        dealt[0] = 1
        var left = request.connections - 1
        var progressed = true
        while left > 0, progressed {
            progressed = false
            for index in sources.indices where left > 0 {
                guard (lease?.acquire(upTo: 1, host: hosts[index]) ?? 1) == 1 else { continue }
                dealt[index] += 1
                left -= 1
                progressed = true
            }
        }
        // The slots held on each source's host: the download's first connection is its own.
        var leased = { dealt.indices.map { dealt[$0] - ($0 == 0 ? 1 : 0) } }
        defer {
            for (index, count) in leased().enumerated() { lease?.release(count, host: hosts[index]) }
        }
        let connections = dealt.reduce(0, +)
        let total = transfer.machine.total ?? 0
        let pieces = try pieceDigests(total: total)
        let planner = SegmentPlanner(
            missing: missing, connections: connections, minimumSplit: request.minimumSplitSize, alignment: pieces?.length ?? 1)
        let board = SegmentBoard(planner: planner, written: trusted, sources: sources.count, pieces: pieces, total: total)
        board.deal(dealt)
        // A mirror's validators from an earlier run: it must still serve that file.
        for (index, source) in sources.enumerated().dropFirst() {
            if let known = transfer.state.sourceValidators[source.uri] { board.learn(known, of: index) }
        }
        if sources.count > 1, !transfer.machine.validators.isEmpty {
            transfer.state.sourceValidators[sources[0].uri] = transfer.machine.validators
        }
        // Connections move between sources when one is dropped: the board knows who holds what.
        leased = { board.leasedSlots }
        let context = SegmentContext(
            total: total, validators: transfer.machine.validators, destination: transfer.state.path,
            part: transfer.part, checkpointer: transfer.checkpointer, board: board, sources: sources, hosts: hosts,
            knownValidators: transfer.state.sourceValidators)
        logger.debug("segmented", metadata: ["connections": "\(dealt)", "holes": "\(missing.count)"])
        // The first answer's body starts at 0: the segment that starts there is its.
        let opening = first.flatMap { answer in context.board.assign().map { (segment: $0, answer: answer) } }
        let failure: DownloadError? = await withTaskGroup(of: SegmentTaskEnd.self) { group in
            var index = 0
            for (source, count) in dealt.enumerated() {
                for _ in 0..<count {
                    let opens = index == 0 ? opening : nil
                    group.addTask { .connection(await self.connection(context, source: source, opening: opens)) }
                    index += 1
                }
            }
            // Fewer connections than asked (the host's slots were taken): more join as they free up.
            var (running, dealtSoFar) = (index, index)
            if lease != nil, dealtSoFar < request.connections {
                let wanting = request.connections - dealtSoFar
                group.addTask { await self.recruit(context, wanting: wanting) }
            }
            var first: DownloadError?
            for await end in group {
                switch end {
                case .recruited(let source, let segment):
                    guard running > 0, first == nil else {
                        // The transfer ended meanwhile: the slot and the segment go back.
                        context.board.release(segment.id)
                        if context.board.leave(source) { lease?.release(1, host: context.hosts[source]) }
                        break
                    }
                    (running, dealtSoFar) = (running + 1, dealtSoFar + 1)
                    group.addTask { .connection(await self.connection(context, source: source, opening: nil, assigned: segment)) }
                    if first == nil, dealtSoFar < request.connections {
                        let wanting = request.connections - dealtSoFar
                        group.addTask { await self.recruit(context, wanting: wanting) }
                    }
                case .recruiterDone: break
                case .connection(let failure):
                    running -= 1
                    if let failure, first == nil {
                        first = failure
                        group.cancelAll()
                    }
                    // The last connection ended: a recruiter still waiting stops too.
                    if running == 0 { group.cancelAll() }
                }
            }
            return first
        }
        if sources.count > 1 { transfer.state.sourceValidators = context.sourceValidators }
        transfer.segmentsWritten = context.board.recorded
        transfer.fetched += context.board.fetched
        transfer.servedBy = context.board.sources.indices.filter { context.board.sources[$0].fetched > 0 }.map { sources[$0].displayURI }
        if let failure {
            if failure == .rangesNotHonoured { return false }
            throw failure
        }
        return context.board.isComplete
    }

    /// How a task of a segmented transfer ended: a connection (with its failure), or a recruiter
    /// that found a free slot and a segment for one more, or gave up.
    private enum SegmentTaskEnd: Sendable {
        case connection(DownloadError?)
        case recruited(source: Int, segment: SegmentPlanner.Segment)
        case recruiterDone
    }

    /// How often a transfer with fewer connections than it asked for looks for a free slot.
    static let recruitInterval: Duration = .milliseconds(100)

    /// Waits for a slot to free up on a live source's host that no queued download waits for,
    /// while the transfer still has a segment worth splitting off for one more connection: a
    /// download started while its host was busy (a big file behind a list of small ones) takes
    /// the connections the others leave, up to what it asked for. Done, without a connection,
    /// once nothing is worth splitting (or the transfer ended). `wanting`: the connections the
    /// transfer still lacks.
    private func recruit(_ context: SegmentContext, wanting: Int) async -> SegmentTaskEnd {
        while !context.board.isComplete {
            do { try await clock.sleep(for: Self.recruitInterval) } catch { return .recruiterDone }
            for source in context.board.liveSourcesByLoad() where lease?.acquireSpare(host: context.hosts[source], wanting: wanting) == true {
                guard let segment = context.board.assign(source: source) else {
                    lease?.release(1, host: context.hosts[source])
                    return .recruiterDone
                }
                context.board.join(source)
                return .recruited(source: source, segment: segment)
            }
        }
        return .recruiterDone
    }

    /// One connection to `source`: takes segments until none is left, retrying on its own.
    /// `opening` is a segment already assigned with the answer that serves it; `assigned`, one
    /// assigned without an answer yet (a connection that joined a running transfer). Ends
    /// without an error when its source is dropped: the others fetch the rest.
    private func connection(
        _ context: SegmentContext, source first: Int, opening: (segment: SegmentPlanner.Segment, answer: HTTPAnswer)?,
        assigned: SegmentPlanner.Segment? = nil
    ) async -> DownloadError? {
        var source = first
        var pending = assigned
        var retry = RetryPolicy(maxTries: request.maxTries, baseWait: request.retryWait)
        if let opening {
            do throws(DownloadError) {
                try await receiveUnlessTakenOver(opening.answer.body, segment: opening.segment, announcedEnd: context.total, context)
            } catch {
                if error.kind == .cancelled || Task.isCancelled { return .cancelled }
            }
            context.board.release(opening.segment.id)
        }
        while !context.board.isComplete {
            if Task.isCancelled { return .cancelled }
            if !context.board.isLive(source) {
                // Its source was dropped: the connection goes on with another that has room.
                guard let next = move(from: source, context) else {
                    // Nowhere to go: a slot it held goes back now, not when the transfer ends.
                    if context.board.leave(source) { lease?.release(1, host: context.hosts[source]) }
                    return nil
                }
                source = next
                retry = RetryPolicy(maxTries: request.maxTries, baseWait: request.retryWait)
                continue
            }
            let next = pending ?? context.board.assign(source: source)
            pending = nil
            guard let segment = next else {
                // Nothing worth splitting now; a failing connection may hand work back.
                do { try await clock.sleep(for: .milliseconds(50)) } catch { return .cancelled }
                continue
            }
            do throws(DownloadError) {
                try await fetch(segment, from: source, context)
                context.board.succeeded(source)
                context.board.release(segment.id)
            } catch {
                let madeProgress = (context.board.position(of: segment.id) ?? segment.next) > segment.next
                context.board.release(segment.id)
                if error.kind != .cancelled, !Task.isCancelled, dropped(source, after: error, context) {
                    continue
                }
                if error == .rangesNotHonoured || (source > 0 && error.kind == .protocolViolation) { return error }
                do throws(DownloadError) {
                    try await wait(&retry, after: error, madeProgress: madeProgress)
                } catch {
                    return error
                }
            }
        }
        return nil
    }

    /// Whether `source` is dropped after `error`, which is then said once. A source that
    /// answers with an error status, refuses ranges or serves another file goes at once; one
    /// whose requests fail (refused, reset, stalled, busy) goes at its second failure in a row: a
    /// mirror that stalls after a few bytes each time is gone after two, not kept alive by
    /// them. The last source left is never dropped: its errors take the usual course.
    private func dropped(_ source: Int, after error: DownloadError, _ context: SegmentContext) -> Bool {
        guard context.sources.count > 1, context.board.isLive(source) else { return !context.board.isLive(source) }
        // A busy answer (503, 429) is a failure like a reset: a second one in a row drops it.
        let atOnce = (error.kind == .http && !error.isRetryable) || error.kind == .protocolViolation
        guard atOnce || context.board.failed(source) >= 2 else { return false }
        guard drop(source, reason: error.message, context) else { return !context.board.isLive(source) }
        return true
    }

    /// Moves a connection of a dropped source to the live source with the fewest connections
    /// whose host has a free slot. The download's own connection (it holds no slot) moves to
    /// the least loaded one even when none has: a download never runs out of connections
    /// while a source is live. Nil when the connection cannot go anywhere.
    private func move(from old: Int, _ context: SegmentContext) -> Int? {
        let live = context.board.liveSourcesByLoad()
        for candidate in live where (lease?.acquire(upTo: 1, host: context.hosts[candidate]) ?? 1) == 1 {
            if context.board.move(from: old, to: candidate) { lease?.release(1, host: context.hosts[old]) }
            return candidate
        }
        guard let least = live.first, context.board.moveOwn(from: old, to: least) else { return nil }
        return least
    }

    /// Stops using `source` and says why, once; false when it was dropped already or is the
    /// last source left.
    private func drop(_ source: Int, reason: String, _ context: SegmentContext) -> Bool {
        guard context.board.drop(source, reason: reason) else { return false }
        let uri = context.sources[source].displayURI
        logger.debug("source dropped", metadata: ["source": "\(uri)", "reason": "\(reason)"])
        events.note("dropped source \(uri): \(reason)")
        return true
    }

    /// Hashes piece `index`, whose bytes are all in. A piece that does not match is fetched
    /// again; the source that served it alone is dropped (a piece two sources shared names
    /// neither: its next copy, fetched whole by one, will). A bad piece nobody could be dropped
    /// for (the last source left) counts against the request's tries, twice over. Throws when
    /// the connection's own source is dropped, which ends its segment.
    private func check(piece index: Int, from source: Int, _ context: SegmentContext) async throws(DownloadError) {
        guard let pieces = context.board.pieces else { return }
        let (part, total) = (context.part, context.total)
        let matches = try await offTheEventLoops { () throws(DownloadError) in try pieces.matches(index, of: part, total: total) }
        guard !matches else {
            context.board.verified(index)
            return
        }
        let reason = "\(pieces.describe(index, total: total)) did not match its \(pieces.algorithm.rawValue) digest"
        let culprits = context.board.rejected(index)
        // Its one source was dropped meanwhile (by another of its bad pieces): nothing to count.
        let alreadyDropped = culprits.count == 1 && !context.board.isLive(culprits[0])
        if !alreadyDropped, culprits.count != 1 || !drop(culprits[0], reason: reason, context) {
            let uris = culprits.isEmpty ? request.displayURL : culprits.map { context.sources[$0].displayURI }.joined(separator: ", ")
            let bad = context.board.countBadPiece()
            guard bad < 2 * request.maxTries else {
                throw DownloadError(kind: .checksum, message: "\(reason), \(bad) times (from \(uris))")
            }
            events.note("\(reason) (from \(uris)): fetching it again")
        }
        if !context.board.isLive(source) { throw .otherFile(reason) }
    }

    /// Asks `source` for one segment and writes its bytes until the segment's (possibly moved) end.
    private func fetch(_ segment: SegmentPlanner.Segment, from source: Int, _ context: SegmentContext) async throws(DownloadError) {
        var headers = self.headers
        headers.append(("Range", RangeHeader.value(from: segment.next, to: segment.end - 1)))
        // Each source has its own validators: the first one's came with the download, a
        // mirror's with its first answer.
        let validators = source == 0 ? context.validators : context.board.validators(of: source)
        if let ifRange = validators?.ifRange { headers.append(("If-Range", ifRange)) }
        let answer = try await transport.send(.GET, url: context.sources[source].uri, headers: headers, stallTimeout: stallTimeout)
        let head = answer.head
        switch head.status {
        case 206:
            guard let range = head.contentRange, range.first == segment.next else {
                throw source == 0 ? .rangesNotHonoured : .otherFile("it answered another range than asked")
            }
            guard range.total == context.total else {
                guard source > 0 else { throw .rangesNotHonoured }
                let length = range.total.map { "\($0) bytes" } ?? "an unknown length"
                throw .otherFile("it serves \(length), not \(context.total) as the others")
            }
            if let validators, validators.contradicts(head.validators) {
                throw source == 0 ? .rangesNotHonoured : .otherFile("its file changed (another ETag or Last-Modified)")
            }
            if source > 0, !head.validators.isEmpty, context.board.learn(head.validators, of: source) {
                store.writer.update(id, try .sourceValidators(context.sourceValidators))
            }
            try await receiveUnlessTakenOver(answer.body, segment: segment, announcedEnd: range.last + 1, context)
        case 200 where source > 0 && validators?.ifRange != nil:
            // If-Range answered with the whole file: the mirror's file is not the one it served.
            throw .otherFile("its file changed (another ETag or Last-Modified)")
        case 200, 416:
            throw source == 0 ? .rangesNotHonoured : .otherFile("it does not serve ranges (status \(head.status))")
        default:
            throw head.error
        }
    }

    /// ``receive(_:segment:announcedEnd:_:)``, stopped at once (its connection closed) when a
    /// faster source takes the segment's whole rest, which ends it without an error.
    private func receiveUnlessTakenOver(
        _ body: HTTPClientResponse.Body, segment: SegmentPlanner.Segment, announcedEnd: Int64,
        _ context: SegmentContext
    ) async throws(DownloadError) {
        let reading = Task { () async -> DownloadError? in
            do throws(DownloadError) {
                try await receive(body, segment: segment, announcedEnd: announcedEnd, context)
                return nil
            } catch {
                return error
            }
        }
        let takenOver = TakeoverMark()
        context.board.onTakeover(segment.id) {
            takenOver.mark()
            reading.cancel()
        }
        defer { context.board.onTakeover(segment.id, nil) }
        let error = await withTaskCancellationHandler {
            await reading.value
        } onCancel: {
            reading.cancel()
        }
        // Stopped where another connection took over: the segment is done. (The stop shows as a
        // cancellation, or as the connection it closed; a piece that did not match is the
        // segment's own error all the same.)
        guard let error else { return }
        if takenOver.isMarked, !Task.isCancelled, error.kind == .cancelled || error.kind == .network { return }
        throw error
    }

    private func receive(
        _ body: HTTPClientResponse.Body, segment: SegmentPlanner.Segment, announcedEnd: Int64,
        _ context: SegmentContext
    ) async throws(DownloadError) {
        var offset = segment.next
        // Bytes written and not yet told to the observer: told with each progress report, and
        // the rest when the request ends.
        var unobserved: Int64 = 0
        defer { if unobserved > 0 { observer.fetched(unobserved) } }
        do {
            for try await buffer in body {
                let room = context.board.room(for: segment.id, at: offset, count: buffer.readableBytes)
                if room > 0 {
                    try context.part.write(buffer.getSlice(at: buffer.readerIndex, length: room)!, at: offset)
                }
                let after = context.board.wrote(segment.id, at: offset, count: room, now: .now)
                offset += Int64(after.accepted)
                unobserved += Int64(after.accepted)
                for piece in after.completedPieces { try await check(piece: piece, from: context.board.source(of: segment.id), context) }
                if isThrottled { try await throttle(after.accepted) }
                if let ranges = after.checkpoint { try await context.checkpointer.request(ranges) }
                if let report = after.report {
                    observer.fetched(unobserved)
                    unobserved = 0
                    var progress = DownloadProgress(
                        destination: context.destination, bytesDone: report.bytes,
                        totalBytes: context.total, bytesPerSecond: report.bytesPerSecond,
                        connections: report.connections)
                    progress.sources = zip(context.sources, report.sources).map { source, state in
                        .init(uri: source.displayURI, bytesPerSecond: state.rate, dropped: state.dropped)
                    }
                    events.progress(progress)
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

/// Set when a faster source took a segment's whole rest and its connection was stopped.
private final class TakeoverMark: Sendable {
    private let marked = Mutex(false)
    func mark() { marked.withLock { $0 = true } }
    var isMarked: Bool { marked.withLock { $0 } }
}
