import Synchronization

/// Routes, their fault counters and statistics, as a plain value; ``SharedRouteTable`` guards it.
struct RouteTable {
    private struct Entry {
        var route: Route
        /// Digest of `route.content`, computed once per content change rather than per request.
        var digest: String
        /// How many times the content changed; moves Last-Modified.
        var version: Int
        var requestsSeen = 0
        var contentGets = 0

        var validators: ContentValidators {
            ContentValidators(route.validators, digest: digest, version: version)
        }

        /// Re-derives the digest after the content may have changed.
        mutating func contentMayHaveChanged() {
            let newDigest = ContentValidators.digest(of: route.content)
            if newDigest != digest { (digest, version) = (newDigest, version + 1) }
        }
    }

    private var entries: [String: Entry] = [:]
    private var stats: [String: RouteStats] = [:]
    /// Content body bytes written across all paths.
    private(set) var totalBodyBytesSent = 0
    /// Content bodies (200/206) being sent right now, and the most there ever were at once.
    private(set) var bodiesInFlight = 0
    private(set) var peakBodiesInFlight = 0

    /// Installs `route`, restarting its fault counters; statistics and the content version carry over.
    mutating func serve(_ path: String, _ route: Route) {
        var entry = Entry(route: route, digest: entries[path]?.digest ?? "", version: entries[path]?.version ?? -1)
        entry.contentMayHaveChanged()
        entries[path] = entry
    }

    /// Mutates the route for `path` in place; does nothing for an unknown path.
    mutating func update(_ path: String, _ change: (inout Route) -> Void) {
        guard var entry = entries.removeValue(forKey: path) else { return }
        change(&entry.route)
        entry.contentMayHaveChanged()
        entries[path] = entry
    }

    /// The ETag and Last-Modified the route of `path` sends now.
    func validators(_ path: String) -> (etag: String?, lastModified: String?) {
        guard let validators = entries[path]?.validators else { return (nil, nil) }
        return (validators.etag, validators.lastModified)
    }

    /// Statistics for `path`.
    func stats(_ path: String) -> RouteStats {
        stats[path] ?? RouteStats()
    }

    /// Plans the response to a request, records the request and advances the route's counters.
    mutating func begin(path: String, target: String, method: String, headers: [(String, String)]) -> ResponsePlan {
        var request = RecordedRequest(method: method, target: target, headers: headers, status: 0)
        guard var entry = entries.removeValue(forKey: path) else {
            let plan = ResponsePlan.errorPage(404, isHead: method == "HEAD")
            request.status = plan.status
            stats[path, default: RouteStats()].requests.append(request)
            return plan
        }
        let history = RouteHistory(
            requestIndex: entry.requestsSeen,
            contentGetsBefore: entry.contentGets,
            validators: entry.validators
        )
        var plan = ResponsePlan(
            method: method,
            range: request.header("Range"),
            ifRange: request.header("If-Range"),
            conditions: .init(ifNoneMatch: request.header("If-None-Match"), ifModifiedSince: request.header("If-Modified-Since")),
            route: entry.route,
            history: history,
            header: request.header
        )
        plan.delay = entry.route.answerDelay
        entry.requestsSeen += 1
        if plan.servesContent {
            entry.contentGets += 1
            // The plan already holds the old bytes, so the first response finishes with them.
            if let next = entry.route.contentAfterFirstGet {
                entry.route.content = next
                entry.route.contentAfterFirstGet = nil
                entry.contentMayHaveChanged()
            }
        }
        entries[path] = entry
        request.status = plan.status
        stats[path, default: RouteStats()].requests.append(request)
        return plan
    }

    mutating func bodyStarted() {
        bodiesInFlight += 1
        peakBodiesInFlight = max(peakBodiesInFlight, bodiesInFlight)
    }

    mutating func bodyEnded() {
        bodiesInFlight -= 1
    }

    /// Counts `count` content bytes written for `path`.
    mutating func recordSent(_ path: String, _ count: Int) {
        stats[path, default: RouteStats()].bodyBytesSent += count
        totalBodyBytesSent += count
    }
}

/// The route table shared by a ``FaultServer`` and its connections.
final class SharedRouteTable: Sendable {
    private let table = Mutex(RouteTable())

    /// Runs `body` with exclusive access to the table.
    func withLock<Result: Sendable>(_ body: (inout RouteTable) -> Result) -> Result {
        table.withLock { body(&$0) }
    }
}
