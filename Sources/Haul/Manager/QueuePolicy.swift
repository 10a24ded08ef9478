/// The manager's queue rules as a pure function: given every download's state, which ones
/// start now and which fail because a download they depend on failed.
///
/// Order: downloads that were running when the last process stopped first (they were
/// already admitted), then higher ``Item/priority``, then smaller ``Item/position``
/// (the order of adding, changed by moves). A download whose host has no free connection
/// slot is passed over, not waited for: the next one in line may use another host.
struct QueuePolicy: Sendable {
    struct Item: Sendable, Hashable {
        var id: String
        var host: String
        var priority: Int
        var position: Int
        var dependencies: [String]
        var status: DownloadStatus
        var restoredRunning = false
        /// Why it failed, for a dependant's message.
        var failure: String?
    }

    enum Decision: Sendable, Hashable {
        case start(String)
        /// `dependency` failed or is gone, so this download can never start.
        case fail(String, dependency: String, reason: String)
    }

    var maxConcurrent: Int
    var hostLimit: Int

    /// - Parameter connectionsInUse: open connections per host right now.
    func decide(_ items: [Item], connectionsInUse: [String: Int]) -> [Decision] {
        var decisions: [Decision] = []
        var byID = Dictionary(items.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })

        // Failures cascade: C after B after A fails when A does, whatever the order of the list.
        var changed = true
        while changed {
            changed = false
            for item in items where byID[item.id]?.status == .queued {
                for dependency in item.dependencies {
                    let reason: String?
                    switch byID[dependency] {
                    case nil: reason = "it was removed"
                    case let other? where other.status == .failed: reason = other.failure ?? "it failed"
                    default: reason = nil
                    }
                    if let reason {
                        decisions.append(.fail(item.id, dependency: dependency, reason: reason))
                        byID[item.id]?.status = .failed
                        byID[item.id]?.failure = DownloadError.dependencyFailed(dependency, reason: reason).message
                        changed = true
                        break
                    }
                }
            }
        }

        var running = byID.values.filter { $0.status == .running }.count
        var inUse = connectionsInUse
        let ready = byID.values
            .filter { item in
                item.status == .queued && item.dependencies.allSatisfy { byID[$0]?.status == .completed }
            }
            .sorted { a, b in
                if a.restoredRunning != b.restoredRunning { return a.restoredRunning }
                if a.priority != b.priority { return a.priority > b.priority }
                return a.position < b.position
            }
        for item in ready where running < maxConcurrent {
            guard inUse[item.host, default: 0] < hostLimit else { continue }
            inUse[item.host, default: 0] += 1
            running += 1
            decisions.append(.start(item.id))
        }
        return decisions
    }
}

extension DownloadError {
    static func dependencyFailed(_ dependency: String, reason: String) -> DownloadError {
        DownloadError(kind: .dependency, message: "needed download \(dependency) failed: \(reason)")
    }
}
