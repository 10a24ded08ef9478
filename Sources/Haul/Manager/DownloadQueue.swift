/// The manager's indexes over its downloads, so that no event costs work in proportion to
/// the whole queue: the waiting list in start order (``waiting``), the downloads ready to
/// start now (``ready``), those held back only because their host has no free connection
/// (``blocked``, per host), the finished ones in the order they ended (``stopped``), the
/// running ones (``active``), and who waits for whom (``dependents``).
///
/// Every operation is O(log n) (with ``RankedSet``'s chunk size as the constant); ``visits``
/// counts the entries touched, so a test can tell linear from quadratic without a clock.
struct DownloadQueue {
    /// The start order: restored-running first, then higher priority, then smaller position.
    struct Key: Comparable, Hashable, Sendable {
        var restored: Bool
        var priority: Int
        var position: Int64
        var id: DownloadID

        static func < (a: Key, b: Key) -> Bool {
            if a.restored != b.restored { return a.restored }
            if a.priority != b.priority { return a.priority > b.priority }
            if a.position != b.position { return a.position < b.position }
            return a.id < b.id
        }
    }

    /// The order downloads finished in.
    struct Finished: Comparable, Hashable, Sendable {
        var order: Int64
        var id: DownloadID

        static func < (a: Finished, b: Finished) -> Bool {
            a.order != b.order ? a.order < b.order : a.id < b.id
        }
    }

    /// Queued and paused downloads, as `tellWaiting` lists them.
    private(set) var waiting = RankedSet<Key>()
    /// Queued downloads whose dependencies are complete and whose host has a free slot (as
    /// far as the last look could tell).
    private(set) var ready = RankedSet<Key>()
    /// Ready downloads set aside because their host was full; they go back to ``ready`` when
    /// it has a free slot again.
    private(set) var blocked: [String: RankedSet<Key>] = [:]
    private(set) var stopped = RankedSet<Finished>()
    /// Running downloads in the order they started.
    private(set) var active: [DownloadID] = []
    /// Downloads waiting for each download to complete.
    private(set) var dependents: [DownloadID: [DownloadID]] = [:]
    /// Entries touched by queue operations so far.
    private(set) var visits = 0

    // MARK: Waiting and ready

    mutating func insertWaiting(_ key: Key) {
        visits += 1
        waiting.insert(Self.waitingKey(key))
    }

    mutating func removeWaiting(_ key: Key) {
        visits += 1
        waiting.remove(Self.waitingKey(key))
    }

    /// The waiting list ignores the restored flag: it is an order of start, not of listing.
    static func waitingKey(_ key: Key) -> Key {
        Key(restored: false, priority: key.priority, position: key.position, id: key.id)
    }

    mutating func insertReady(_ key: Key) {
        visits += 1
        ready.insert(key)
    }

    /// Takes `key` out of ``ready`` or its host's blocked list, wherever it is.
    mutating func removeReady(_ key: Key, host: String) {
        visits += 1
        if !ready.remove(key), var list = blocked[host], list.remove(key) {
            blocked[host] = list.isEmpty ? nil : list
        }
    }

    /// The first ready download, taken out.
    mutating func popReady() -> Key? {
        guard let first = ready.first else { return nil }
        visits += 1
        ready.remove(first)
        return first
    }

    /// Sets `key` aside until `host` has a free slot.
    mutating func block(_ key: Key, host: String) {
        visits += 1
        blocked[host, default: RankedSet()].insert(key)
    }

    /// Moves up to `count` of `host`'s blocked downloads back to ``ready``.
    mutating func unblock(host: String, count: Int) {
        guard count > 0, var list = blocked[host] else { return }
        for _ in 0..<min(count, list.count) {
            guard let first = list.first else { break }
            visits += 1
            list.remove(first)
            ready.insert(first)
        }
        blocked[host] = list.isEmpty ? nil : list
    }

    /// The hosts that have downloads set aside.
    var blockedHosts: [String] { Array(blocked.keys) }

    /// How many ready downloads are set aside for each host.
    var blockedByHost: [String: Int] { blocked.mapValues(\.count) }

    /// The downloads that could start but for the limits (ready, or set aside for their host),
    /// in the order they would start, past the first `offset`. O(n log n) in those: for handing
    /// a list's surplus to a fleet, once.
    func startable(from offset: Int) -> [Key] {
        var keys = ready.elements(from: 0, limit: ready.count)
        for list in blocked.values { keys += list.elements(from: 0, limit: list.count) }
        guard keys.count > offset else { return [] }
        keys.sort()
        return Array(keys[offset...])
    }

    /// How many of ``startable(from:)``'s downloads come before `key`.
    func startable(before key: Key) -> Int {
        blocked.values.reduce(ready.count(before: key)) { $0 + $1.count(before: key) }
    }

    /// Ready downloads set aside for want of a connection to their host, across hosts.
    var blockedCount: Int { blocked.values.reduce(0) { $0 + $1.count } }

    // MARK: Running and finished

    mutating func insertActive(_ id: DownloadID) {
        visits += 1
        active.append(id)
    }

    mutating func removeActive(_ id: DownloadID) {
        visits += 1
        // Short: at most the downloads running at once.
        if let index = active.lastIndex(of: id) { active.remove(at: index) }
    }

    mutating func insertStopped(_ finished: Finished) {
        visits += 1
        stopped.insert(finished)
    }

    mutating func removeStopped(_ finished: Finished) {
        visits += 1
        stopped.remove(finished)
    }

    // MARK: Dependencies

    mutating func addDependent(_ id: DownloadID, on dependency: DownloadID) {
        visits += 1
        dependents[dependency, default: []].append(id)
    }

    /// Forgets who waited for `id` and returns them.
    mutating func takeDependents(of id: DownloadID) -> [DownloadID] {
        let list = dependents.removeValue(forKey: id) ?? []
        visits += list.count
        return list
    }

    func dependentsOf(_ id: DownloadID) -> [DownloadID] {
        dependents[id] ?? []
    }
}
