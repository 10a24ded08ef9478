import Synchronization

/// What the connections of one segmented transfer share: the plan, the bytes written, the
/// sources and how each one does, and when the next checkpoint and progress report are due.
/// Held under one lock; every call is short and never awaits.
final class SegmentBoard: Sendable {
    /// One source of the file as this transfer sees it.
    struct SourceState: Sendable {
        /// The source's validators, once one of its answers gave them (each mirror has its own).
        var validators: Validators?
        /// Why it was dropped; nil while it is used.
        var dropped: String?
        /// Failed requests in a row (a request that fetched its whole segment ends the row).
        var failures = 0
        /// Bytes it served in this transfer.
        var fetched: Int64 = 0
        /// Its connections' typical bytes per second, once measured.
        var rate: Double?
        /// Its bytes per second, smoothed, for progress reports.
        var meter = SpeedMeter()
        /// Connections fetching from it now.
        var connections = 0
        /// Of those, the ones holding a slot on its host (the download's first does not).
        var leased = 0
    }

    struct State {
        var planner: SegmentPlanner
        var written: ByteRanges
        var lastCheckpoint: (instant: ContinuousClock.Instant, bytes: Int64)
        var lastReport: ContinuousClock.Instant
        var meter = SpeedMeter()
        var fetched: Int64 = 0
        var sources: [SourceState]
        /// Which source each active segment is fetched from, and when and where it started.
        var started: [Int: (source: Int, at: ContinuousClock.Instant, from: Int64)] = [:]
        /// How to stop the connection reading each segment at once (``onTakeover(_:_:)``).
        var stoppers: [Int: @Sendable () -> Void] = [:]
        /// The pieces whose digests matched, as byte ranges (with piece digests, only these
        /// are recorded: a kill loses at most the unverified pieces).
        var verified = ByteRanges()
        /// The sources (bits) that wrote bytes of each piece not verified yet.
        var servedBy: [Int: UInt64] = [:]
        /// Pieces complete and being hashed.
        var checking: Set<Int> = []
        /// Pieces that did not match while no source could be dropped for them.
        var badPieces = 0
    }

    /// What a connection should do after writing.
    struct AfterWrite {
        /// How many of the bytes belonged to the segment (the rest went to a thief).
        var accepted: Int
        /// The segment has all its bytes now (up to its end, which a thief may have moved).
        var finished = false
        /// Ranges to checkpoint now, when one is due.
        var checkpoint: ByteRanges?
        /// Bytes done, the smoothed rate, the connections reading and each source's rate and
        /// why it was dropped (empty with one source), when a progress report is due.
        var report: (bytes: Int64, bytesPerSecond: Double, connections: Int, sources: [(rate: Double, dropped: String?)])?
        /// Pieces whose bytes are all in now: the writer hashes them (``verified(_:)`` or
        /// ``rejected(_:)``).
        var completedPieces: [Int] = []
    }

    private let state: Mutex<State>
    /// The digests each piece must match, if the request has them.
    let pieces: PieceChecksums?
    let total: Int64

    /// - Parameters:
    ///   - pieces: piece digests fitting a file of `total` bytes; the whole pieces of
    ///     `written` count as verified (recorded progress holds verified pieces only).
    init(planner: SegmentPlanner, written: ByteRanges, sources: Int = 1, pieces: PieceChecksums? = nil, total: Int64 = 0) {
        let now = ContinuousClock.now
        var initial = State(
            planner: planner, written: written, lastCheckpoint: (now, written.byteCount), lastReport: now,
            sources: Array(repeating: SourceState(), count: max(1, sources)))
        if let pieces { initial.verified = pieces.wholePieces(of: written, total: total) }
        state = Mutex(initial)
        self.pieces = pieces
        self.total = total
    }

    /// What may be recorded as on disk: every byte written, or with piece digests the
    /// verified pieces.
    var recorded: ByteRanges { state.withLock { recorded(in: $0) } }

    private func recorded(in state: State) -> ByteRanges { pieces == nil ? state.written : state.verified }

    /// Piece `index` matched its digest.
    func verified(_ index: Int) {
        guard let pieces else { return }
        state.withLock { state in
            state.verified.insert(pieces.range(of: index, total: total))
            state.servedBy[index] = nil
            state.checking.remove(index)
        }
    }

    /// Piece `index` did not match: its bytes are to be fetched again. Returns the sources
    /// that wrote them in this transfer.
    func rejected(_ index: Int) -> [Int] {
        guard let pieces else { return [] }
        let range = pieces.range(of: index, total: total)
        return state.withLock { state in
            state.written.remove(range)
            state.planner.reopen(range)
            state.checking.remove(index)
            let mask = state.servedBy.removeValue(forKey: index) ?? 0
            return state.sources.indices.filter { $0 < 64 && mask & (1 << UInt64($0)) != 0 }
        }
    }

    /// Counts a bad piece no source could be dropped for; returns how many so far.
    func countBadPiece() -> Int {
        state.withLock { state in
            state.badPieces += 1
            return state.badPieces
        }
    }

    /// Work for a connection to `source`: where it is expected to finish soonest.
    func assign(source: Int = 0) -> SegmentPlanner.Segment? {
        let (segment, stop) = state.withLock { state -> (SegmentPlanner.Segment?, (@Sendable () -> Void)?) in
            guard state.sources[source].dropped == nil, let segment = state.planner.assign(rate: state.sources[source].rate, source: source) else {
                return (nil, nil)
            }
            state.started[segment.id] = (source, .now, segment.next)
            let victim = state.planner.takenOver
            state.planner.takenOver = nil
            return (segment, victim.flatMap { state.stoppers.removeValue(forKey: $0) })
        }
        stop?()
        return segment
    }

    /// Sets (or, with nil, clears) how to stop the connection reading segment `id` at once, for
    /// when a faster source takes its whole rest: a server that throttles sends a second's
    /// allowance at a time (nginx's `limit_rate`), which a connection waiting for its next
    /// bytes would receive, and waste, before it noticed.
    func onTakeover(_ id: Int, _ stop: (@Sendable () -> Void)?) {
        state.withLock { $0.stoppers[id] = stop }
    }

    /// Records the connections dealt to each source; all but the download's first (source 0's
    /// first) hold a slot on their source's host.
    func deal(_ dealt: [Int]) {
        state.withLock { state in
            for (index, count) in dealt.enumerated() where index < state.sources.count {
                state.sources[index].connections = count
                state.sources[index].leased = count - (index == 0 ? 1 : 0)
            }
        }
    }

    /// A connection joins `source` while the transfer runs, holding a slot on its host.
    func join(_ source: Int) {
        state.withLock { state in
            state.sources[source].connections += 1
            state.sources[source].leased += 1
        }
    }

    /// The slots each source's host lends this transfer now.
    var leasedSlots: [Int] { state.withLock { $0.sources.map(\.leased) } }

    /// The live sources, the fewest connections first.
    func liveSourcesByLoad() -> [Int] {
        state.withLock { state in
            state.sources.indices.filter { state.sources[$0].dropped == nil }.sorted { state.sources[$0].connections < state.sources[$1].connections }
        }
    }

    /// A connection leaves `old` (dropped) for `new`, holding a slot on `new`'s host. Returns
    /// whether a slot on `old`'s host is to be given back.
    func move(from old: Int, to new: Int) -> Bool {
        state.withLock { state in
            state.sources[new].connections += 1
            state.sources[new].leased += 1
            return Self.depart(&state.sources[old])
        }
    }

    /// The download's own connection (which holds no slot) leaves `old` for `new`; false when
    /// `old` has no such connection left.
    func moveOwn(from old: Int, to new: Int) -> Bool {
        state.withLock { state in
            guard state.sources[old].connections > state.sources[old].leased else { return false }
            state.sources[old].connections -= 1
            state.sources[new].connections += 1
            return true
        }
    }

    /// A connection of `old` ends. Returns whether a slot on its host is to be given back.
    func leave(_ old: Int) -> Bool {
        state.withLock { state in Self.depart(&state.sources[old]) }
    }

    /// One connection fewer; a slot goes back when more are held than connections remain.
    private static func depart(_ source: inout SourceState) -> Bool {
        source.connections -= 1
        guard source.leased > max(0, source.connections) else { return false }
        source.leased -= 1
        return true
    }

    /// The source segment `id` is fetched from.
    func source(of id: Int) -> Int { state.withLock { $0.started[id]?.source ?? 0 } }

    /// Whether `source` is still used.
    func isLive(_ source: Int) -> Bool { state.withLock { $0.sources[source].dropped == nil } }

    /// Sources still used.
    var liveSources: Int { state.withLock { $0.sources.count { $0.dropped == nil } } }

    /// The sources as this transfer sees them.
    var sources: [SourceState] { state.withLock { $0.sources } }

    /// The validators `source` answered with first; later answers must not contradict them.
    func validators(of source: Int) -> Validators? { state.withLock { $0.sources[source].validators } }

    /// Keeps `validators` as `source`'s unless it has some. Returns whether it took them.
    @discardableResult
    func learn(_ validators: Validators, of source: Int) -> Bool {
        state.withLock { state in
            guard state.sources[source].validators == nil else { return false }
            state.sources[source].validators = validators
            return true
        }
    }

    /// A request to `source` fetched all it was asked: its failures are no longer in a row.
    func succeeded(_ source: Int) { state.withLock { $0.sources[source].failures = 0 } }

    /// Counts a failure of `source`; returns how many it had in a row.
    func failed(_ source: Int) -> Int {
        state.withLock { state in
            state.sources[source].failures += 1
            return state.sources[source].failures
        }
    }

    /// Stops using `source` for `reason` unless it is the last one left. Returns true when this
    /// call dropped it (the caller says so, once), false when it was already dropped or is the
    /// only source left.
    func drop(_ source: Int, reason: String) -> Bool {
        state.withLock { state in
            guard state.sources[source].dropped == nil, state.sources.count(where: { $0.dropped == nil }) > 1 else { return false }
            state.sources[source].dropped = reason
            return true
        }
    }

    func end(of id: Int) -> Int64? { state.withLock { $0.planner.end(of: id) } }

    /// Where segment `id` writes next.
    func position(of id: Int) -> Int64? { state.withLock { state in state.planner.active.first { $0.id == id }?.next } }

    func release(_ id: Int) {
        state.withLock { state in
            if let started = state.started.removeValue(forKey: id),
                let next = state.planner.active.first(where: { $0.id == id })?.next
            {
                Self.measure(&state, source: started.source, bytes: next - started.from, since: started.at, now: .now)
            }
            state.planner.release(id)
        }
    }

    /// Folds one segment's speed into its source's: a segment too short to time says nothing.
    private static func measure(
        _ state: inout State, source: Int, bytes: Int64, since start: ContinuousClock.Instant, now: ContinuousClock.Instant
    ) {
        let elapsed = (now - start) / .seconds(1)
        guard elapsed >= 0.2, bytes > 0 else { return }
        let rate = Double(bytes) / elapsed
        state.sources[source].rate = state.sources[source].rate.map { ($0 + rate) / 2 } ?? rate
    }

    var written: ByteRanges { state.withLock { $0.written } }

    /// Bytes written by this transfer (not counting what an earlier run left).
    var fetched: Int64 { state.withLock { $0.fetched } }

    /// True when no byte is missing and no connection is working.
    var isComplete: Bool { state.withLock { $0.planner.isComplete } }

    /// How many of `count` bytes at `offset` segment `id` may write (bytes past its end are
    /// another connection's now).
    func room(for id: Int, at offset: Int64, count: Int) -> Int {
        state.withLock { state in
            guard let end = state.planner.end(of: id) else { return 0 }
            return Int(max(0, min(Int64(count), end - offset)))
        }
    }

    /// Records `count` bytes written by segment `id` at `offset`; bytes past the segment's end
    /// (shortened meanwhile by a thief) are not counted — the thief writes the same bytes.
    func wrote(_ id: Int, at offset: Int64, count: Int, now: ContinuousClock.Instant) -> AfterWrite {
        state.withLock { state in
            guard let end = state.planner.end(of: id) else { return AfterWrite(accepted: 0) }
            let accepted = Int(max(0, min(Int64(count), end - offset)))
            guard accepted > 0, state.planner.advance(id, to: offset + Int64(accepted)) else {
                return AfterWrite(accepted: 0)
            }
            let range = offset..<offset + Int64(accepted)
            state.written.insert(range)
            state.fetched += Int64(accepted)
            let source = state.started[id]?.source
            if let source { state.sources[source].fetched += Int64(accepted) }
            let bytes = state.written.byteCount
            var outcome = AfterWrite(accepted: accepted, finished: offset + Int64(accepted) >= end)
            if let pieces {
                for index in pieces.indices(overlapping: range) {
                    if let source, source < 64 { state.servedBy[index, default: 0] |= 1 << UInt64(source) }
                    let piece = pieces.range(of: index, total: total)
                    if !state.checking.contains(index), state.written.contains(piece), !state.verified.contains(piece) {
                        state.checking.insert(index)
                        outcome.completedPieces.append(index)
                    }
                }
            }
            if bytes - state.lastCheckpoint.bytes >= Checkpointer.noteBytes
                || now - state.lastCheckpoint.instant >= Checkpointer.noteInterval
            {
                state.lastCheckpoint = (now, bytes)
                outcome.checkpoint = recorded(in: state)
            }
            if now - state.lastReport >= DownloadRunner.progressInterval {
                state.lastReport = now
                // Each segment's speed so far: where the next idle connection helps most.
                for segment in state.planner.active {
                    guard let started = state.started[segment.id] else { continue }
                    let elapsed = (now - started.at) / .seconds(1)
                    if elapsed >= 0.2, segment.next > started.from {
                        state.planner.measured(segment.id, rate: Double(segment.next - started.from) / elapsed)
                    }
                }
                state.meter.sample(bytes: state.fetched, at: now)
                var sources: [(rate: Double, dropped: String?)] = []
                if state.sources.count > 1 {
                    for index in state.sources.indices {
                        state.sources[index].meter.sample(bytes: state.sources[index].fetched, at: now)
                        let source = state.sources[index]
                        sources.append((source.dropped == nil ? source.meter.bytesPerSecond : 0, source.dropped))
                    }
                }
                outcome.report = (bytes, state.meter.bytesPerSecond, state.planner.active.count, sources)
            }
            return outcome
        }
    }
}
