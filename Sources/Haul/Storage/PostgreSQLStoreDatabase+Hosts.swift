import Foundation
import PostgresNIO

/// `--max-connections-per-host` across a fleet: each member holds a share of each host's
/// connections, in `fleetHost`, and opens no more than its share.
extension PostgreSQLStoreDatabase {
    /// Sets this member's shares of the hosts in `wanted` (how many connections it would use to
    /// each, and has open) and returns them: what `limit` leaves after the other live members'
    /// slots, and, while others want more than they hold, no more than an even split
    /// (`⌈limit ÷ members wanting⌉`): a member holding more gives back as its connections end.
    /// A member's slots are its share, or the connections it still has open when those are more
    /// (its share just shrank), so the connections open to a host never add up to more than
    /// `limit`. One member at a time (an advisory lock of the queue's, tried: nil when another
    /// member holds it, to ask again later, so that a member cut off in the middle holds nobody
    /// up). A host wanted 0 is given back.
    func shareHosts(_ queue: String, limit: Int, wanted: [String: HostWant]) async throws(DownloadError) -> [String: Int]? {
        guard !wanted.isEmpty else { return [:] }
        let (logger, member) = (logger, member)
        let hosts = wanted.keys.sorted()
        do {
            return try await transaction(rows: hosts.count) { connection in
                guard try await Self.tryLock("haul.hosts", of: queue, on: connection, logger: logger) else { return nil }
                let others = try await connection.query(
                    """
                    SELECT h.host, h.slots, h.wanted FROM fleetHost h
                    JOIN fleetMember m ON m.queue = h.queue AND m.member = h.member
                    WHERE h.queue = \(queue) AND h.host = ANY(\(hosts)) AND h.member <> \(member.id)
                    AND m.leaseUntil >= extract(epoch from clock_timestamp())
                    """, logger: logger)
                var held: [String: Int] = [:]
                var wanting: [String: Int] = [:]
                for try await (host, slots, want) in others.decode((String, Int64, Int64).self) {
                    held[host, default: 0] += Int(slots)
                    if want > slots { wanting[host, default: 0] += 1 }
                }
                var shares: [String: Int] = [:]
                for host in hosts {
                    var share = min(limit, wanted[host]?.want ?? 0, max(0, limit - held[host, default: 0]))
                    if let others = wanting[host] { share = min(share, (limit + others) / (others + 1)) }
                    shares[host] = share
                }
                let kept = hosts.filter { (wanted[$0]?.want ?? 0) > 0 || (wanted[$0]?.open ?? 0) > 0 }
                let given = hosts.filter { !kept.contains($0) }
                if !kept.isEmpty {
                    let slots = kept.map { Int64(max(shares[$0] ?? 0, wanted[$0]?.open ?? 0)) }
                    let wants = kept.map { Int64(min(limit, wanted[$0]?.want ?? 0)) }
                    try await connection.query(
                        """
                        INSERT INTO fleetHost (queue, host, member, slots, wanted)
                        SELECT \(queue), h, \(member.id), s, w FROM unnest(\(kept)::text[], \(slots)::bigint[], \(wants)::bigint[]) AS t(h, s, w)
                        ON CONFLICT (queue, host, member) DO UPDATE SET slots = EXCLUDED.slots, wanted = EXCLUDED.wanted
                        """, logger: logger)
                }
                if !given.isEmpty {
                    try await connection.query(
                        "DELETE FROM fleetHost WHERE queue = \(queue) AND member = \(member.id) AND host = ANY(\(given))", logger: logger)
                }
                return shares
            }
        } catch {
            throw .io("cannot share the hosts' connections with the fleet in \(location): \(reason(error)); \(advice(error))")
        }
    }
}
