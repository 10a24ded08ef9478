import Synchronization

/// What the connections of one segmented transfer share: the plan, the bytes written, and
/// when the next checkpoint and progress report are due. Held under one lock; every call is
/// short and never awaits.
final class SegmentBoard: Sendable {
    struct State {
        var planner: SegmentPlanner
        var written: ByteRanges
        var lastCheckpoint: (instant: ContinuousClock.Instant, bytes: Int64)
        var lastReport: ContinuousClock.Instant
        var meter = SpeedMeter()
        var fetched: Int64 = 0
    }

    /// What a connection should do after writing.
    struct AfterWrite {
        /// How many of the bytes belonged to the segment (the rest went to a thief).
        var accepted: Int
        /// The segment has all its bytes now (up to its end, which a thief may have moved).
        var finished = false
        /// Ranges to checkpoint now, when one is due.
        var checkpoint: ByteRanges?
        /// Bytes done, the smoothed rate and the connections reading, when a progress report is due.
        var report: (bytes: Int64, bytesPerSecond: Double, connections: Int)?
    }

    private let state: Mutex<State>

    init(planner: SegmentPlanner, written: ByteRanges) {
        let now = ContinuousClock.now
        state = Mutex(State(planner: planner, written: written, lastCheckpoint: (now, written.byteCount), lastReport: now))
    }

    func assign() -> SegmentPlanner.Segment? { state.withLock { $0.planner.assign() } }

    func end(of id: Int) -> Int64? { state.withLock { $0.planner.end(of: id) } }

    /// Where segment `id` writes next.
    func position(of id: Int) -> Int64? { state.withLock { state in state.planner.active.first { $0.id == id }?.next } }

    func release(_ id: Int) { state.withLock { $0.planner.release(id) } }

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
            state.written.insert(offset..<offset + Int64(accepted))
            state.fetched += Int64(accepted)
            let bytes = state.written.byteCount
            var outcome = AfterWrite(accepted: accepted, finished: offset + Int64(accepted) >= end)
            if bytes - state.lastCheckpoint.bytes >= Checkpointer.byteInterval
                || now - state.lastCheckpoint.instant >= Checkpointer.interval
            {
                state.lastCheckpoint = (now, bytes)
                outcome.checkpoint = state.written
            }
            if now - state.lastReport >= DownloadRunner.progressInterval {
                state.lastReport = now
                state.meter.sample(bytes: state.fetched, at: now)
                outcome.report = (bytes, state.meter.bytesPerSecond, state.planner.active.count)
            }
            return outcome
        }
    }
}
