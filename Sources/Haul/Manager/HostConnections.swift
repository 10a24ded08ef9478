import Foundation
import Synchronization

/// Counts open connections per host so that a long list does not hammer one server.
///
/// A download holds one slot for as long as it runs (the manager starts it only when one is
/// free); a segmented transfer takes extra slots for its other connections only while some
/// are free, and gives them back when its connections end. Nobody waits for a slot while
/// holding one, so there is no deadlock.
final class HostConnections: Sendable {
    let limit: Int
    private let inUse = Mutex<[String: Int]>([:])

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Takes up to `wanted` slots for `host` and returns how many it got (0 when none is free).
    func acquire(upTo wanted: Int, host: String) -> Int {
        inUse.withLock { inUse in
            let granted = max(0, min(wanted, limit - inUse[host, default: 0]))
            if granted > 0 { inUse[host, default: 0] += granted }
            return granted
        }
    }

    func release(_ count: Int, host: String) {
        guard count > 0 else { return }
        inUse.withLock { inUse in
            let left = inUse[host, default: 0] - count
            inUse[host] = left > 0 ? left : nil
        }
    }

    /// Free slots of `host` right now.
    func available(_ host: String) -> Int {
        inUse.withLock { max(0, limit - $0[host, default: 0]) }
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
    func release(_ count: Int, host: String) { connections.release(count, host: host) }
}
