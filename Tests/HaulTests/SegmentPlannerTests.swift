import Testing
@testable import Haul

@Suite struct SegmentPlannerTests {
    @Test func theMissingBytesArePreCutForEveryConnection() {
        var planner = SegmentPlanner(missing: [0..<800], connections: 4, minimumSplit: 100)
        let segments = (0..<4).compactMap { _ in planner.assign() }
        #expect(segments.map { $0.next..<$0.end } == [0..<200, 200..<400, 400..<600, 600..<800])
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
