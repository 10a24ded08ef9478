/// Splits the missing bytes of a file among connections, aria2-style: each connection owns one
/// segment at a time, and one that runs out of work takes the back half of the largest segment
/// still in progress, down to a minimum size. A pure value; the transfer performs it.
struct SegmentPlanner: Sendable {
    /// One connection's share: it writes at `next` and stops at `end`, which may move earlier
    /// when another connection takes over the back half.
    struct Segment: Equatable, Sendable {
        let id: Int
        var next: Int64
        var end: Int64
        var remaining: Int64 { end - next }
    }

    let minimumSplit: Int64
    private(set) var active: [Segment] = []
    /// Missing bytes nobody is fetching.
    private(set) var unassigned: [Range<Int64>]
    private var nextID = 0

    /// - Parameters:
    ///   - missing: the holes of the file, in any order.
    ///   - connections: how many connections will ask for work; the holes are pre-cut into that
    ///     many pieces (never below `minimumSplit`) so they all start at once.
    init(missing: [Range<Int64>], connections: Int, minimumSplit: Int64) {
        self.minimumSplit = max(1, minimumSplit)
        var pieces = missing.filter { !$0.isEmpty }
        while pieces.count < connections,
            let largest = pieces.indices.max(by: { pieces[$0].count < pieces[$1].count }),
            Int64(pieces[largest].count) >= 2 * self.minimumSplit
        {
            let range = pieces[largest]
            let middle = range.lowerBound + Int64(range.count) / 2
            pieces[largest] = range.lowerBound..<middle
            pieces.insert(middle..<range.upperBound, at: largest + 1)
        }
        unassigned = pieces.sorted { $0.lowerBound < $1.lowerBound }
    }

    var isComplete: Bool { active.isEmpty && unassigned.isEmpty }

    /// Work for an idle connection: an unassigned hole, else the back half of the largest
    /// segment in progress. nil when there is nothing worth splitting.
    mutating func assign() -> Segment? {
        if !unassigned.isEmpty {
            return start(unassigned.removeFirst())
        }
        guard let index = active.indices.max(by: { active[$0].remaining < active[$1].remaining }),
            active[index].remaining >= 2 * minimumSplit
        else { return nil }
        let victim = active[index]
        let middle = victim.next + victim.remaining / 2
        active[index].end = middle
        return start(middle..<victim.end)
    }

    private mutating func start(_ range: Range<Int64>) -> Segment {
        let segment = Segment(id: nextID, next: range.lowerBound, end: range.upperBound)
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
