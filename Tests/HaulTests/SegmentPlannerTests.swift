import Synchronization
import Testing
@testable import Haul

@Suite struct SegmentPlannerTests {
    @Test func theMissingBytesArePreCutForEveryConnection() {
        var planner = SegmentPlanner(missing: [0..<800], connections: 4, minimumSplit: 100)
        let segments = (0..<4).compactMap { _ in planner.assign() }
        #expect(segments.map { $0.next..<$0.end } == [0..<200, 200..<400, 400..<600, 600..<800])
    }

    /// With piece digests, cuts fall on piece boundaries: each piece comes from one connection.
    @Test func cutsFallOnTheAlignment() {
        var planner = SegmentPlanner(missing: [0..<1000], connections: 3, minimumSplit: 50, alignment: 64)
        let segments = (0..<3).compactMap { _ in planner.assign() }
        #expect(segments.allSatisfy { $0.next % 64 == 0 }, "\(segments)")
        _ = planner.advance(segments[0].id, to: 100)
        planner.release(segments[0].id)
        _ = planner.assign()  // the released rest, 100..<448
        let thief = planner.assign()
        #expect(thief.map { $0.next % 64 == 0 } == true, "\(String(describing: thief))")
    }

    @Test func neverCutsBelowTheMinimumSplit() {
        var planner = SegmentPlanner(missing: [0..<150], connections: 8, minimumSplit: 100)
        #expect(planner.assign()?.end == 150)
        #expect(planner.assign() == nil)
    }

    @Test func anIdleConnectionTakesTheBackHalfOfTheLargestSegment() {
        var planner = SegmentPlanner(missing: [0..<1000], connections: 2, minimumSplit: 10)
        let a = planner.assign()!
        let b = planner.assign()!
        let advancedA = planner.advance(a.id, to: 500)
        #expect(advancedA)
        planner.release(a.id)
        let advancedB = planner.advance(b.id, to: 600)
        #expect(advancedB)
        let c = planner.assign()!
        #expect(c.next == 800 && c.end == 1000)
        #expect(planner.end(of: b.id) == 800)
        let pastEnd = planner.advance(b.id, to: 801)
        #expect(!pastEnd, "bytes past a shortened end belong to the thief")
    }

    @Test func aFailedSegmentReturnsItsRestToThePool() {
        var planner = SegmentPlanner(missing: [0..<400], connections: 1, minimumSplit: 100)
        let a = planner.assign()!
        _ = planner.advance(a.id, to: 150)
        planner.release(a.id)
        #expect(planner.unassigned == [150..<400])
        #expect(planner.assign()?.next == 150)
    }

    @Test func holesFromAnEarlierRunAreAllFetched() {
        var planner = SegmentPlanner(missing: [100..<200, 500..<900], connections: 3, minimumSplit: 50)
        var covered = ByteRanges()
        while let segment = planner.assign() {
            covered.insert(segment.next..<segment.end)
            _ = planner.advance(segment.id, to: segment.end)
            planner.release(segment.id)
        }
        #expect(covered.ranges == [100..<200, 500..<900])
        #expect(planner.isComplete)
    }
}

/// Connections of different speeds (several sources): work goes where it finishes soonest.
@Suite struct SegmentPlannerSpeedTests {
    @Test func anIdleConnectionTakesTheShareThatEndsBothTogether() {
        var planner = SegmentPlanner(missing: [0..<3000], connections: 1, minimumSplit: 10)
        let slow = planner.assign(rate: 100)!
        planner.measured(slow.id, rate: 100)
        // Three times as fast: it takes three quarters of the rest.
        let fast = planner.assign(rate: 300)!
        #expect(fast.next == 750 && fast.end == 3000)
        #expect(planner.end(of: slow.id) == 750)
    }

    @Test func theSegmentExpectedToFinishLastIsSplitNotTheLargest() {
        var planner = SegmentPlanner(missing: [0..<2000], connections: 2, minimumSplit: 10)
        let big = planner.assign(rate: 1000)!
        let small = planner.assign(rate: 10)!
        planner.measured(big.id, rate: 1000)
        planner.measured(small.id, rate: 10)
        let thief = planner.assign(rate: 10)!
        #expect(thief.end == 2000, "the slow segment (100 s left) is helped, not the big fast one (1 s)")
    }

    @Test func theEndGameHandsASlowSegmentsRestToAFastConnection() {
        let rest = SegmentPlanner.endGameMinimum + 5
        var planner = SegmentPlanner(missing: [0..<rest], connections: 1, minimumSplit: rest)
        let slow = planner.assign(rate: 1024, source: 0)!
        planner.measured(slow.id, rate: 1024)
        #expect(planner.assign(rate: 1024, source: 1) == nil, "as slow: nothing worth taking")
        #expect(planner.assign(rate: 8192, source: 0) == nil, "the same source is no faster, only luckier")
        let fast = planner.assign(rate: 8192, source: 1)!
        #expect(fast.next == 0 && fast.end == rest)
        #expect(planner.end(of: slow.id) == 0, "the slow connection stops where it is")
        #expect(planner.takenOver == slow.id, "and is told to stop now")
        #expect(planner.assign(rate: 1024, source: 0) == nil, "and does not take it back")
    }

    /// The end game stops the slow connection at once (its stopper runs), instead of letting it
    /// wait for bytes a throttling server sends a second later, to be thrown away.
    @Test func theEndGameStopsTheSlowConnectionAtOnce() async throws {
        let length: Int64 = 64 << 10
        let board = SegmentBoard(
            planner: SegmentPlanner(missing: [0..<2 * length], connections: 2, minimumSplit: length), written: ByteRanges(), sources: 2)
        // Source 1 fetches its segment fast; source 0's is slow.
        let fast = try #require(board.assign(source: 1))
        let slow = try #require(board.assign(source: 0))
        try await Task.sleep(for: .milliseconds(250))
        // The slow one's first: its write times the segments in progress (once a report is due).
        _ = board.wrote(slow.id, at: slow.next, count: 1024, now: .now)
        _ = board.wrote(fast.id, at: fast.next, count: Int(length), now: .now)
        board.release(fast.id)
        let stopped = Flag()
        board.onTakeover(slow.id) { stopped.set() }
        let thief = try #require(board.assign(source: 1), "the fast source takes the slow one's rest")
        #expect(thief.next == slow.next + 1024 && thief.end == slow.end)
        #expect(stopped.isSet, "the slow connection was stopped")
    }
}

/// The connections of a dropped source go on with the others, and the host slots they hold
/// follow them.
@Suite struct SegmentBoardDealTests {
    @Test func aDroppedSourcesConnectionsMoveToTheLeastLoaded() {
        let board = SegmentBoard(planner: SegmentPlanner(missing: [0..<1000], connections: 6, minimumSplit: 10), written: ByteRanges(), sources: 3)
        board.deal([3, 2, 1])
        #expect(board.leasedSlots == [2, 2, 1])
        #expect(board.drop(0, reason: "bad"))
        #expect(board.liveSourcesByLoad() == [2, 1])
        // Two of source 0's connections held slots on its host, its first (the download's own)
        // did not: two slots go back, whichever connection leaves first.
        let given = [board.move(from: 0, to: 2), board.move(from: 0, to: 1), board.move(from: 0, to: 2)]
        #expect(given.count { $0 } == 2)
        #expect(board.leasedSlots == [0, 3, 3])
    }

    /// The download's own connection moves without a slot; one that cannot move gives its
    /// slot back at once.
    @Test func theDownloadsOwnConnectionMovesWithoutASlot() {
        let board = SegmentBoard(planner: SegmentPlanner(missing: [0..<1000], connections: 3, minimumSplit: 10), written: ByteRanges(), sources: 2)
        board.deal([2, 1])
        #expect(board.drop(0, reason: "bad"))
        #expect(board.moveOwn(from: 0, to: 1))
        #expect(!board.moveOwn(from: 0, to: 1), "the other one holds a slot")
        #expect(board.leave(0), "it cannot move either: its slot goes back now")
        #expect(board.leasedSlots == [0, 1])
    }
}

/// A flag a `@Sendable` closure can set.
private final class Flag: Sendable {
    private let value = Mutex(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}
