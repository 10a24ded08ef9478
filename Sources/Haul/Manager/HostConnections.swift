import Foundation
import Synchronization

/// Counts open connections per host so that a long list does not hammer one server.
///
/// A download holds one slot for as long as it runs (the manager starts it only when one is
/// free); a segmented transfer takes extra slots for its other connections only while some
/// are free, and gives them back when its connections end. Nobody waits for a slot while
/// holding one, so there is no deadlock.
///
/// In a fleet (``share(_:)``) the limit is the fleet's: this process opens no more to a host
/// than its share, which the manager asks the store for (``wanted(blocked:everyHost:)``), so that the
/// fleet's shares add up to at most ``limit``.
final class HostConnections: Sendable {
    let limit: Int
    private struct State {
        var inUse: [String: Int] = [:]
        /// In a fleet, this process's share of each host; nil outside one.
        var shares: [String: Int]?
        /// In a fleet, the slots refused for want of a share since the shares were last granted.
        var short: [String: Int] = [:]
        /// In a fleet, the hosts this process last told the store it wants (so that a host it
        /// stops wanting is given back, not left wanting in the others' eyes).
        var asked: Set<String> = []
        /// Hosts the manager has downloads set aside for, for want of a slot.
        var setAside: Set<String> = []

        /// The most connections this process may open to `host`: its share in a fleet, else `limit`.
        func cap(_ host: String, limit: Int) -> Int { shares.map { min(limit, $0[host, default: 0]) } ?? limit }
    }

    /// In a fleet, whether a slot was refused since ``wanted(blocked:everyHost:)`` last asked
    /// for a host this process has no share of at all (a host new to it): worth asking at once.
    /// A host it has some of is asked for again at the next look.
    var wantsMore: Bool {
        state.withLock { state in state.short.keys.contains { state.shares?[$0, default: 0] == 0 } }
    }
    private let state = Mutex(State())

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Takes up to `wanted` slots for `host` and returns how many it got (0 when none is free).
    /// `settingAside`: the manager's own ask for a download it sets aside when refused, which
    /// ``release(_:host:)`` then reports, in the same step as the refusal (a slot given back
    /// in between would otherwise leave the download waiting for nothing to wake the manager).
    func acquire(upTo wanted: Int, host: String, settingAside: Bool = false) -> Int {
        state.withLock { state in
            let cap = state.cap(host, limit: limit)
            let granted = max(0, min(wanted, cap - state.inUse[host, default: 0]))
            if granted > 0 { state.inUse[host, default: 0] += granted }
            if granted < wanted, cap < limit, state.shares != nil { state.short[host, default: 0] += wanted - granted }
            if granted < wanted, settingAside { state.setAside.insert(host) }
            return granted
        }
    }

    /// Takes one slot of `host` if one is free and no download waits for the host (set aside):
    /// a running transfer's extra connection, taken as the host's free up, never ahead of a
    /// download in the queue. In a fleet, a refusal for want of a share is counted as a want
    /// of `wanting` slots (the connections the transfer lacks; the most any transfer of the
    /// host lacks): the next look asks for a share that large, which the others give as their
    /// own wants fall. (Counted as one, a transfer that started with fewer connections than it
    /// asked for was granted one more a look.)
    func acquireSpare(host: String, wanting: Int) -> Bool {
        state.withLock { state in
            guard !state.setAside.contains(host) else { return false }
            let cap = state.cap(host, limit: limit)
            guard state.inUse[host, default: 0] < cap else {
                if cap < limit, state.shares != nil { state.short[host, default: 0] = max(state.short[host, default: 0], max(1, wanting)) }
                return false
            }
            state.inUse[host, default: 0] += 1
            return true
        }
    }

    /// Gives `count` slots of `host` back; returns whether the manager has downloads set aside
    /// for `host`, which a caller outside it tells it (``DownloadManager/hostSlotsFreed()``).
    @discardableResult
    func release(_ count: Int, host: String) -> Bool {
        state.withLock { state in
            if count > 0 {
                let left = state.inUse[host, default: 0] - count
                state.inUse[host] = left > 0 ? left : nil
            }
            return state.setAside.contains(host)
        }
    }

    /// After the manager scheduled: of the hosts it set downloads aside for, those it still
    /// has some waiting for.
    func keepSetAside(_ hosts: Dictionary<String, some Any>.Keys) {
        state.withLock { state in
            if !state.setAside.isEmpty { state.setAside = state.setAside.filter { hosts.contains($0) } }
        }
    }

    /// Free slots of `host` right now.
    func available(_ host: String) -> Int {
        state.withLock { state in
            let cap = state.cap(host, limit: limit)
            return max(0, cap - state.inUse[host, default: 0])
        }
    }

    /// Whether this process shares the hosts with a fleet (``share(_:)``).
    var isShared: Bool { state.withLock { $0.shares != nil } }

    /// The connections this process would open to each host now, in a fleet: those open, the
    /// downloads set aside for the host (`blocked`), and the slots refused since the last call
    /// (extra connections of segmented transfers); every host it has a share of or wants one
    /// of when `everyHost` (another member may want some), else only those whose share differs.
    /// Forgets the slots refused.
    func wanted(blocked: [String: Int], everyHost: Bool) -> [String: HostWant] {
        state.withLock { state in
            guard let shares = state.shares else { return [:] }
            var wanted: [String: HostWant] = [:]
            let hosts = Set(state.inUse.keys).union(blocked.keys).union(state.short.keys).union(shares.keys).union(state.asked)
            for host in hosts {
                let open = state.inUse[host, default: 0]
                let want = min(limit, open + blocked[host, default: 0] + state.short[host, default: 0])
                if everyHost || want != shares[host, default: 0] || (want == 0) == state.asked.contains(host) {
                    wanted[host] = HostWant(want: want, open: open)
                }
            }
            return wanted
        }
    }

    /// From now on, this process opens no more to each host of `shares` than its share (those
    /// not named keep theirs; a host without one gets none); `asked` is what the store was told.
    /// The slots refused so far are forgotten: what they wanted is in the shares.
    func share(_ shares: [String: Int], asked: [String: HostWant]) {
        state.withLock { state in
            var all = state.shares ?? [:]
            for (host, share) in shares { all[host] = share > 0 ? share : nil }
            state.shares = all
            for (host, want) in asked {
                if want.want > 0 { state.asked.insert(host) } else { state.asked.remove(host) }
            }
            state.short = [:]
        }
    }

    /// Enters the fleet's counting: no host has a share until the store grants one.
    func startSharing() {
        state.withLock { state in
            if state.shares == nil { state.shares = [:] }
        }
    }

    /// The host a URL's connections count against (lowercased; empty for a malformed URL,
    /// which then fails on its own).
    static func host(of url: String) -> String { HTTPURL.connectionHost(of: url) }
}

/// A download's claim on hosts' slots: the runner asks it for extra connections, to its own
/// host (which holds the download's first slot) and to its mirrors'.
struct HostLease: ConnectionLease {
    let connections: HostConnections

    func acquire(upTo wanted: Int, host: String) -> Int { connections.acquire(upTo: wanted, host: host) }
    func acquireSpare(host: String, wanting: Int) -> Bool { connections.acquireSpare(host: host, wanting: wanting) }
    func release(_ count: Int, host: String) { connections.release(count, host: host) }
}
