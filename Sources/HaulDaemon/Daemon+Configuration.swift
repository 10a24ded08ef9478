import Foundation
import Haul

extension Daemon {
    /// How `haul daemon` listens, whom it answers, and how its downloads run.
    public struct Configuration: Sendable {
        /// The state folder (store, lock, `daemon.json`).
        public var stateDirectory: String
        /// Where the queue is kept: SQLite in ``stateDirectory`` (the default), or a PostgreSQL
        /// server. The state folder keeps the lock and `daemon.json` either way.
        public var store = StoreLocation.stateDirectory
        /// The address to listen on; anything but loopback needs a ``secret``.
        public var address = "127.0.0.1"
        /// The port; 0 picks a free one (written to `daemon.json`).
        public var port = 6800
        /// aria2's `--rpc-secret`: every call must start with `token:SECRET`. Without one, the
        /// daemon writes only inside ``directory``.
        public var secret: String?
        /// Answer web pages from any origin (aria2's `--rpc-allow-origin-all`); otherwise a
        /// request from another origin's page is refused.
        public var allowOriginAll = false
        /// Names besides loopback and the listen address that clients may reach the daemon by
        /// (`HOST` with the daemon's port, or `HOST:PORT`): a tunnel's, a proxy's.
        public var allowedHosts: [String] = []
        /// Where downloads go without a `dir` option.
        public var directory: String
        public var maxConcurrentDownloads = 5
        public var maxConnectionsPerHost = 16
        /// Connections per download (aria2's `split`).
        public var connections = 4
        /// What every download gets unless its call says otherwise (aria2's global options):
        /// tries, retry wait, minimum split size, rate limit, headers, overwriting. Its URL and
        /// destination are not used.
        public var defaults = DownloadRequest(url: "", directory: "")
        /// A rate limit shared by every download (aria2's `--max-overall-download-limit`).
        public var rateLimit: Int64?
        public var stallTimeout: Duration = .seconds(30)
        /// Where the cookies are written when the daemon stops (aria2's `--save-cookies`).
        public var saveCookies: String?
        /// aria2's `--on-download-complete` and `--on-download-error`.
        public var onDownloadComplete: String?
        public var onDownloadError: String?
        /// The aria2 names of the options given on the command line (`max-concurrent-downloads`,
        /// `dir`, `split`, …). Options saved by `changeGlobalOption` apply over the defaults at
        /// start, except these: what the command line says wins, and the log says so.
        public var explicitOptions: Set<String> = []

        public init(stateDirectory: String, directory: String) {
            self.stateDirectory = stateDirectory
            self.directory = directory
        }

        var isLoopback: Bool { Daemon.isLoopback(address) }

        var hasSecret: Bool { !(secret ?? "").isEmpty }
    }

    /// A one-line reason the daemon cannot start.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    static func isLoopback(_ host: String) -> Bool {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return bare == "localhost" || bare == "::1" || bare.hasPrefix("127.")
    }
}
