/// Splits the missing bytes of a file among connections, aria2-style: each connection owns one
/// segment at a time, and one that runs out of work takes the back of the segment expected to
/// finish last, down to a minimum size. A pure value; the transfer performs it.
///
/// With speeds (connections to several sources run at different rates), an idle connection
/// takes the share of that segment that makes both end together, and near the end a connection
/// to another source at least twice as fast takes over the whole rest of a slow one (the end
/// game): a slow source never holds the finish.
struct SegmentPlanner: Sendable {
    /// One connection's share: it writes at `next` and stops at `end`, which may move earlier
    /// when another connection takes over the back of it.
    struct Segment: Equatable, Sendable {
        let id: Int
        var next: Int64
        var end: Int64
        /// The bytes per second of the connection writing it, when known.
        var rate: Double?
        /// The source it is fetched from (an index in the request's sources).
        var source = 0
        var remaining: Int64 { end - next }

        init(id: Int, next: Int64, end: Int64, rate: Double? = nil, source: Int = 0) {
            self.id = id
            self.next = next
            self.end = end
            self.rate = rate
            self.source = source
        }
    }

    let minimumSplit: Int64
    /// Where a split may fall: a multiple of this (the piece length of a request with piece
    /// digests, so that a piece comes from one connection and a bad one names its source).
    let alignment: Int64
    private(set) var active: [Segment] = []
    /// Missing bytes nobody is fetching.
    private(set) var unassigned: [Range<Int64>]
    private var nextID = 0
    /// The segment whose whole rest the last ``assign(rate:source:)`` gave to a faster source
    /// (the end game): its connection should stop now, not when its next bytes arrive.
    var takenOver: Int?

    /// - Parameters:
    ///   - missing: the holes of the file, in any order.
    ///   - connections: how many connections will ask for work; the holes are pre-cut into that
    ///     many pieces (never below `minimumSplit`) so they all start at once.
    init(missing: [Range<Int64>], connections: Int, minimumSplit: Int64, alignment: Int64 = 1) {
        self.minimumSplit = max(1, minimumSplit)
        self.alignment = max(1, alignment)
        var pieces = missing.filter { !$0.isEmpty }
        while pieces.count < connections,
            let largest = pieces.indices.max(by: { pieces[$0].count < pieces[$1].count }),
            Int64(pieces[largest].count) >= 2 * self.minimumSplit
        {
            let range = pieces[largest]
            let middle = Self.aligned(range.lowerBound + Int64(range.count) / 2, to: self.alignment)
            guard middle > range.lowerBound else { break }
            pieces[largest] = range.lowerBound..<middle
            pieces.insert(middle..<range.upperBound, at: largest + 1)
        }
        unassigned = pieces.sorted { $0.lowerBound < $1.lowerBound }
    }

    var isComplete: Bool { active.isEmpty && unassigned.isEmpty }

    /// Work for an idle connection: an unassigned hole, else the back of the segment in
    /// progress expected to finish last. nil when there is nothing worth splitting.
    ///
    /// - Parameters:
    ///   - rate: the idle connection's expected bytes per second, when known. Without rates the
    ///     largest segment is halved.
    ///   - source: the idle connection's source; the end game takes over from other sources only
    ///     (another connection to the same server is no faster, only luckier).
    mutating func assign(rate: Double? = nil, source: Int = 0) -> Segment? {
        if !unassigned.isEmpty {
            return start(unassigned.removeFirst(), rate: rate, source: source)
        }
        // Seconds left of each segment; a segment of unknown speed is taken at the thief's.
        func timeLeft(_ segment: Segment) -> Double {
            Double(segment.remaining) / (segment.rate ?? rate ?? 1)
        }
        guard let index = active.indices.filter({ active[$0].remaining > 0 }).max(by: { timeLeft(active[$0]) < timeLeft(active[$1]) })
        else { return nil }
        let victim = active[index]
        // The share that makes both connections end together; half when a speed is unknown.
        let fraction = rate.flatMap { thief in victim.rate.map { thief / (thief + $0) } } ?? 0.5
        let cut = Self.aligned(victim.end - Int64(Double(victim.remaining) * fraction), to: alignment)
        if victim.end - cut >= minimumSplit, cut - victim.next >= minimumSplit {
            active[index].end = cut
            return start(cut..<victim.end, rate: rate, source: source)
        }
        // End game: too little to split, but the idle connection is to another source at least
        // twice as fast: it fetches the whole rest, and the slow one stops where it is.
        if victim.source != source, let thief = rate, let slow = victim.rate, thief >= 2 * slow,
            victim.remaining >= Self.endGameMinimum
        {
            active[index].end = victim.next
            takenOver = victim.id
            return start(victim.next..<victim.end, rate: rate, source: source)
        }
        return nil
    }

    /// `offset` rounded down to a multiple of `alignment`.
    static func aligned(_ offset: Int64, to alignment: Int64) -> Int64 { offset - offset % alignment }

    /// Below this, a segment's rest is not worth a new request even from a faster source.
    static let endGameMinimum: Int64 = 16 << 10

    /// Records the speed of the connection writing segment `id`.
    mutating func measured(_ id: Int, rate: Double) {
        guard let index = active.firstIndex(where: { $0.id == id }) else { return }
        active[index].rate = rate
    }

    private mutating func start(_ range: Range<Int64>, rate: Double?, source: Int) -> Segment {
        let segment = Segment(id: nextID, next: range.lowerBound, end: range.upperBound, rate: rate, source: source)
        nextID += 1
        active.append(segment)
        return segment
    }

    /// Where segment `id` must stop now (it may have been shortened since it started).
    func end(of id: Int) -> Int64? {
        active.first { $0.id == id }?.end
    }

    /// Records that segment `id` wrote up to `offset`; returns false (and records nothing) for
    /// bytes past its end, which belong to another connection now.
    mutating func advance(_ id: Int, to offset: Int64) -> Bool {
        guard let index = active.firstIndex(where: { $0.id == id }), offset <= active[index].end else { return false }
        active[index].next = max(active[index].next, offset)
        return true
    }

    /// Puts `range` back among the bytes to fetch (a piece whose digest did not match). Nobody
    /// is fetching it: its bytes were all written.
    mutating func reopen(_ range: Range<Int64>) {
        unassigned.append(range)
        unassigned.sort { $0.lowerBound < $1.lowerBound }
    }

    /// The connection of segment `id` stopped; whatever it did not fetch becomes unassigned.
    mutating func release(_ id: Int) {
        guard let index = active.firstIndex(where: { $0.id == id }) else { return }
        let segment = active.remove(at: index)
        if segment.next < segment.end {
            unassigned.append(segment.next..<segment.end)
            unassigned.sort { $0.lowerBound < $1.lowerBound }
        }
    }
}
