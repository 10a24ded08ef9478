/// The downloads by what they fetch (URL and destination), so that adding the same request
/// again finds the download it already is.
///
/// It keeps a 64-bit digest of each request, not a copy of its two strings: 16 bytes a bucket
/// instead of 48, which is most of what a queue of 100,000 spent on it. A digest alone could
/// confuse two requests, so every answer is checked against the download itself (`fetches`);
/// a request whose digest is taken by a different one goes to a small overflow table.
struct RequestIndex {
    struct Key: Hashable {
        var destination: DownloadRequest.Destination
        var url: String

        init(_ request: DownloadRequest) {
            destination = request.destination
            url = request.url
        }
    }

    private var byDigest: [Int: DownloadID] = [:]
    private var overflow: [Key: DownloadID] = [:]
    /// The process's seeded hash (a digest is never stored); tests pass one that collides.
    private let digest: @Sendable (Key) -> Int

    init(digest: @escaping @Sendable (Key) -> Int = { $0.hashValue }) {
        self.digest = digest
    }

    /// Requests kept in the overflow table (for tests).
    var overflowCount: Int { overflow.count }

    /// The download that fetches `key`; `fetches(id, key)` tells whether download `id` does.
    func find(_ key: Key, fetches: (DownloadID, Key) -> Bool) -> DownloadID? {
        if let id = byDigest[digest(key)], fetches(id, key) { return id }
        return overflow.isEmpty ? nil : overflow[key]
    }

    /// Records that `id` fetches `key` (replacing whichever download did before).
    mutating func insert(_ key: Key, _ id: DownloadID, fetches: (DownloadID, Key) -> Bool) {
        let slot = digest(key)
        if let other = byDigest[slot], other != id, !fetches(other, key) {
            overflow[key] = id
        } else {
            byDigest[slot] = id
            if !overflow.isEmpty { overflow[key] = nil }
        }
    }

    /// Forgets that `id` fetches `key`, if it is the download recorded for it.
    mutating func remove(_ key: Key, _ id: DownloadID) {
        let slot = digest(key)
        if byDigest[slot] == id { byDigest[slot] = nil }
        if overflow[key] == id { overflow[key] = nil }
    }
}
