import Synchronization

/// The paths downloads of this process chose and have not put their files at yet, each with
/// the URL it was chosen for and how many downloads of it hold it. Nothing on disk tells them:
/// a small file downloads into a part file without a name, and a named one is renamed away the
/// moment its file is in place. Two URLs of a list whose files share a name each step around
/// the other's choice (``DestinationResolver``) instead of both taking `name.1.ext`, the second
/// then finding a file in its way at the end (60 such URLs at -j 16 lost a quarter of their
/// files), and a file put in place never takes a claimed name (``FileCommitter``). Two
/// downloads of one URL share a path: the part file's lock orders them.
enum PathClaims {
    private static let claims = Mutex<[String: (url: String, holders: Int)]>([:])

    /// Claims `path` for a download of `url`; false (nothing claimed) when a download of another
    /// URL holds it, unless `shared`.
    @discardableResult
    static func claim(_ path: String, for url: String, shared: Bool = false) -> Bool {
        claims.withLock { claims in
            if let held = claims[path] {
                guard shared || held.url == url else { return false }
                claims[path] = (held.url, held.holders + 1)
            } else {
                claims[path] = (url, 1)
            }
            return true
        }
    }

    /// Whether a download of this process holds `path`.
    static func isClaimed(_ path: String) -> Bool { claims.withLock { $0[path] != nil } }

    /// Gives up one hold of `path`.
    static func release(_ path: String) {
        claims.withLock { claims in
            guard let held = claims[path] else { return }
            claims[path] = held.holders > 1 ? (held.url, held.holders - 1) : nil
        }
    }
}
