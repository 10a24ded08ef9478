import Foundation
import HaulDaemon

/// Paging through the daemon's lists, which aria2 hands out `offset`/`num` at a time: the
/// client commands see every download however many there are.
extension DaemonClient {
    /// Downloads asked for per call: small enough for one quick answer, big enough that
    /// 100,000 downloads take 100 calls.
    static let pageSize = 1000

    /// What ``everyDownload(keys:stopped:)`` found.
    struct Listing {
        var downloads: [RemoteDownload] = []
        /// How many the daemon counted before listing (`getGlobalStat`).
        var expected = 0
        /// Downloads moved between lists while they were paged through (one that starts leaves
        /// the waiting list), so some may be missing.
        var changedMeanwhile: Bool { downloads.count != expected }
    }

    /// Active, then waiting and paused, then (with `stopped`) stopped downloads, each once;
    /// with only `keys` of each (nil: all of them).
    func everyDownload(keys: [String]?, stopped: Bool = true) async throws(ClientFailure) -> Listing {
        let keys = keys.map { $0.contains("gid") ? $0 : ["gid"] + $0 }
        let keyList = keys.map { JSONValue.array($0.map { .string($0) }) }
        func params(_ list: [JSONValue]) -> [JSONValue] { list + (keyList.map { [$0] } ?? []) }
        let page = JSONValue.int(Int64(Self.pageSize))
        var calls: [(method: String, params: [JSONValue])] = [
            ("aria2.getGlobalStat", []), ("aria2.tellActive", params([])), ("aria2.tellWaiting", params([0, page])),
        ]
        if stopped { calls.append(("aria2.tellStopped", params([0, page]))) }
        let first = try await multicall(calls)
        let stat = (try? first[0].get()) ?? [:]
        var listing = Listing()
        listing.expected =
            Int(stat["numActive"]?.integer ?? 0) + Int(stat["numWaiting"]?.integer ?? 0)
            + (stopped ? Int(stat["numStopped"]?.integer ?? 0) : 0)
        var seen = Set<String>()
        func take(_ downloads: [RemoteDownload]) {
            for download in downloads where seen.insert(download.gid).inserted { listing.downloads.append(download) }
        }
        take(try downloads(first[1], of: "aria2.tellActive"))
        let lists = stopped ? ["aria2.tellWaiting", "aria2.tellStopped"] : ["aria2.tellWaiting"]
        for (index, method) in lists.enumerated() {
            var batch = try downloads(first[2 + index], of: method)
            var offset = 0
            take(batch)
            // Bounded: a list that keeps growing as fast as it is read still ends.
            while batch.count == Self.pageSize, offset < 100 * listing.expected + Self.pageSize {
                offset += Self.pageSize
                batch = try downloads(try await multicall([(method, params([.int(Int64(offset)), page]))])[0], of: method)
                take(batch)
            }
        }
        return listing
    }

    /// Calls `method` with each GID, `pageSize` calls to a multicall. Returns the refusals.
    func each(_ method: String, _ gids: [String]) async throws(ClientFailure) -> [(gid: String, error: RPCError)] {
        var refused: [(gid: String, error: RPCError)] = []
        var start = 0
        while start < gids.count {
            let chunk = gids[start..<min(gids.count, start + Self.pageSize)]
            let results = try await multicall(chunk.map { (method, [.string($0)]) })
            for (gid, result) in zip(chunk, results) {
                if case .failure(let error) = result { refused.append((gid, error)) }
            }
            start += Self.pageSize
        }
        return refused
    }
}
