import Testing
@testable import Haul

/// The manager's queue rules, on plain values.
@Suite struct QueuePolicyTests {
    func item(_ id: String, host: String = "a", priority: Int = 0, position: Int, after: [String] = [],
              _ status: DownloadStatus = .queued, restored: Bool = false, failure: String? = nil) -> QueuePolicy.Item {
        QueuePolicy.Item(id: id, host: host, priority: priority, position: position, dependencies: after,
                         status: status, restoredRunning: restored, failure: failure)
    }

    func starts(_ decisions: [QueuePolicy.Decision]) -> [String] {
        decisions.compactMap { if case .start(let id) = $0 { id } else { nil } }
    }

    @Test func startsNoMoreThanTheLimitInTheOrderAdded() {
        let policy = QueuePolicy(maxConcurrent: 3, hostLimit: 16)
        let items = (0..<7).reversed().map { item("d\($0)", position: $0) }
        #expect(starts(policy.decide(items, connectionsInUse: [:])) == ["d0", "d1", "d2"])
    }

    @Test func runningDownloadsCountAgainstTheLimit() {
        let policy = QueuePolicy(maxConcurrent: 2, hostLimit: 16)
        let items = [item("r", position: 0, .running), item("q1", position: 1), item("q2", position: 2)]
        #expect(starts(policy.decide(items, connectionsInUse: ["a": 1])) == ["q1"])
    }

    @Test func higherPriorityStartsFirstAndRestoredRunningBeforeThat() {
        let policy = QueuePolicy(maxConcurrent: 2, hostLimit: 16)
        let items = [item("low", position: 0), item("high", priority: 5, position: 9),
                     item("restored", position: 20, restored: true)]
        #expect(starts(policy.decide(items, connectionsInUse: [:])) == ["restored", "high"])
    }

    @Test func pausedDownloadsNeverStart() {
        let policy = QueuePolicy(maxConcurrent: 5, hostLimit: 16)
        #expect(starts(policy.decide([item("p", position: 0, .paused)], connectionsInUse: [:])).isEmpty)
    }

    @Test func aDependantWaitsForItsDependencyToComplete() {
        let policy = QueuePolicy(maxConcurrent: 5, hostLimit: 16)
        let waiting = [item("a", position: 0, .running), item("b", position: 1, after: ["a"])]
        #expect(policy.decide(waiting, connectionsInUse: ["a": 1]).isEmpty)
        let done = [item("a", position: 0, .completed), item("b", position: 1, after: ["a"])]
        #expect(starts(policy.decide(done, connectionsInUse: [:])) == ["b"])
    }

    @Test func aFailedDependencyFailsItsDependantsTransitively() {
        let policy = QueuePolicy(maxConcurrent: 5, hostLimit: 16)
        let items = [item("c", position: 2, after: ["b"]), item("b", position: 1, after: ["a"]),
                     item("a", position: 0, .failed, failure: "404 Not Found"), item("x", position: 3)]
        let decisions = policy.decide(items, connectionsInUse: [:])
        #expect(decisions.contains(.fail("b", dependency: "a", reason: "404 Not Found")))
        #expect(decisions.contains(.fail("c", dependency: "b", reason: "needed download a failed: 404 Not Found")))
        #expect(starts(decisions) == ["x"])
    }

    @Test func aRemovedDependencyFailsItsDependant() {
        let policy = QueuePolicy(maxConcurrent: 5, hostLimit: 16)
        let decisions = policy.decide([item("b", position: 1, after: ["gone"])], connectionsInUse: [:])
        #expect(decisions == [.fail("b", dependency: "gone", reason: "it was removed")])
    }

    @Test func aFullHostIsPassedOverForAnotherHost() {
        let policy = QueuePolicy(maxConcurrent: 5, hostLimit: 2)
        let items = [item("a1", position: 0), item("a2", position: 1), item("a3", position: 2),
                     item("b1", host: "b", position: 3)]
        #expect(starts(policy.decide(items, connectionsInUse: [:])) == ["a1", "a2", "b1"])
        // A segmented download already holds the host's slots.
        #expect(starts(policy.decide(items, connectionsInUse: ["a": 2])) == ["b1"])
    }
}
