import NIOCore

/// Paces one response body: bounded slices, trickle timing, and the point where it is cut or stalls.
///
/// A value state machine: the connection handler asks for the ``Action`` to perform next and
/// performs it, asking again only once the previous write has completed. Waiting for each write
/// keeps at most one slice in flight, so a 64 MiB body never sits in memory as queued buffers.
struct BodySender {
    /// Where a body stops early.
    struct Stop: Equatable {
        /// Cut closes the connection; stall keeps it open and silent.
        enum Kind: Equatable { case cut, stall }
        var kind: Kind
        var after: Int

        /// The earlier of a cut and a stall point, or nil when there is neither.
        init?(cutAfter: Int?, stallAfter: Int?) {
            switch (cutAfter, stallAfter) {
            case (nil, nil): return nil
            case (let cut?, let stall?): (kind, after) = cut <= stall ? (.cut, cut) : (.stall, stall)
            case (let cut?, nil): (kind, after) = (.cut, cut)
            case (nil, let stall?): (kind, after) = (.stall, stall)
            }
            after = max(0, after)
        }
    }

    /// What the connection should do next.
    enum Action: Equatable {
        case write(ArraySlice<UInt8>)
        case wait(until: NIODeadline)
        case cut
        case stall
        case finish
    }

    /// Largest slice handed to the channel at once.
    static let sliceSize = 64 * 1024
    /// Trickled bodies go out about every 20 ms, small enough to look smooth and large enough
    /// for timer slack not to dominate the rate.
    static let trickleSlicesPerSecond = 50

    private var remaining: ArraySlice<UInt8>
    private let stop: Stop?
    private let bytesPerSecond: Int?
    private var issued = 0
    private var startedAt: NIODeadline?

    /// A sender for `body`, stopping at `stop`, trickled at `bytesPerSecond` when set.
    init(body: ArraySlice<UInt8>, stop: Stop?, bytesPerSecond: Int?) {
        self.remaining = body
        self.stop = stop
        self.bytesPerSecond = bytesPerSecond.flatMap { $0 > 0 ? $0 : nil }
    }

    /// The next step at time `now`; a `.write` slice counts as issued.
    mutating func next(now: NIODeadline) -> Action {
        if remaining.isEmpty { return .finish }
        if let stop, issued >= stop.after { return stop.kind == .cut ? .cut : .stall }
        var size = min(remaining.count, Self.sliceSize, stop.map { $0.after - issued } ?? .max)
        if let rate = bytesPerSecond {
            // Schedule against the start time rather than the previous slice, so timer lateness
            // does not accumulate and the average rate stays close to `rate`.
            let start = startedAt ?? now
            startedAt = start
            let due = start + .nanoseconds(Int64(issued) * 1_000_000_000 / Int64(rate))
            if now < due { return .wait(until: due) }
            size = min(size, max(1, rate / Self.trickleSlicesPerSecond))
        }
        let slice = remaining.prefix(size)
        remaining = remaining.dropFirst(size)
        issued += size
        return .write(slice)
    }
}
