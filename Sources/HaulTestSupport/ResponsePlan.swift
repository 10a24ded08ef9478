import NIOHTTP1

/// What a route's history contributes to the next response.
struct RouteHistory {
    /// Requests (any method) for this route before this one, since it was last installed.
    var requestIndex: Int
    /// Content-serving GETs (200/206) begun before this one.
    var contentGetsBefore: Int
    /// Validators of the current content.
    var validators: ContentValidators
}

/// The status, headers and body of one response, decided from the request and the route alone.
struct ResponsePlan {
    var status: Int
    var headers: [(String, String)]
    /// Body bytes to send; empty for HEAD.
    var body: ArraySlice<UInt8> = []
    /// Frame the body with chunked transfer coding.
    var chunked = false
    /// Where the body stops early, if it does.
    var stop: BodySender.Stop?
    /// Trickle rate for the body.
    var bytesPerSecond: Int?
    /// How long the answer waits before its head goes out.
    var delay: Duration?
    /// A GET answered from the content (200/206): counts as a content GET and towards bytes sent.
    var servesContent = false

    /// A request's conditions on the representation (RFC 9110 §13.1).
    struct Conditions {
        var ifNoneMatch: String?
        var ifModifiedSince: String?

        /// Whether the client already has the current representation: If-None-Match matches
        /// (weak comparison) or, without it, If-Modified-Since is our Last-Modified.
        func notModified(_ validators: ContentValidators) -> Bool {
            if let ifNoneMatch {
                guard let etag = validators.etag else { return false }
                let bare = { (tag: String) in tag.hasPrefix("W/") ? String(tag.dropFirst(2)) : tag }
                return ifNoneMatch.split(separator: ",").contains { candidate in
                    let tag = String(candidate).trimmingSpaces
                    return tag == "*" || bare(tag) == bare(etag)
                }
            }
            if let ifModifiedSince, let lastModified = validators.lastModified { return ifModifiedSince == lastModified }
            return false
        }
    }

    /// Decides the response; precedence is method, failFirst, required headers, headAllowed, status, redirect,
    /// conditions, content.
    init(
        method: String, range: String?, ifRange: String?, conditions: Conditions = .init(), route: Route, history: RouteHistory,
        header: (String) -> String? = { _ in nil }
    ) {
        let isHead = method == "HEAD"
        let missing = route.requiredHeaders.first { header($0.name)?.contains($0.contains) != true }
        if method == "OPTIONS" && route.optionsAllowed {
            self.init(status: 200, headers: [("Content-Length", "0")])
        } else if !isHead && method != "GET" {
            self = .errorPage(405, extra: [("Allow", "GET, HEAD")], isHead: false)
        } else if history.requestIndex < route.failFirst {
            self = .errorPage(route.failureStatus, extra: Self.retryAfter(route), isHead: isHead)
        } else if let missing {
            let challenge = missing.name.lowercased() == "authorization"
            self = .errorPage(challenge ? 401 : 403, extra: challenge ? [("WWW-Authenticate", "Basic realm=\"test\"")] : [], isHead: isHead)
        } else if isHead && !route.headAllowed {
            self = .errorPage(405, extra: [("Allow", "GET")], isHead: isHead)
        } else if let status = route.status {
            self = .errorPage(status, extra: Self.retryAfter(route), isHead: isHead)
        } else if let location = route.redirectTo {
            self.init(status: route.redirectStatus, headers: [("Location", location), ("Content-Length", "0")])
        } else if route.honoursConditions, conditions.notModified(history.validators) {
            var headers: [(String, String)] = []
            if let etag = history.validators.etag { headers.append(("ETag", etag)) }
            if let date = history.validators.lastModified { headers.append(("Last-Modified", date)) }
            self.init(status: 304, headers: headers)
        } else {
            self.init(content: route, isHead: isHead, range: range, ifRange: ifRange, history: history)
        }
        headers += route.responseHeaders
    }

    init(status: Int, headers: [(String, String)]) {
        self.status = status
        self.headers = headers
    }

    /// A small HTML error page, e.g. for 503 or 404.
    static func errorPage(_ status: Int, extra: [(String, String)] = [], isHead: Bool) -> ResponsePlan {
        let page = Array("<html><body><h1>\(status) \(reasonPhrase(status))</h1></body></html>\n".utf8)
        var plan = ResponsePlan(
            status: status,
            headers: [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", "\(page.count)")] + extra
        )
        plan.body = isHead ? [] : page[...]
        return plan
    }

    private static func retryAfter(_ route: Route) -> [(String, String)] {
        route.retryAfter.map { [("Retry-After", $0)] } ?? []
    }

    private init(content route: Route, isHead: Bool, range: String?, ifRange: String?, history: RouteHistory) {
        let length = route.content.count
        var headers = [("Content-Type", route.contentType)]
        if let etag = history.validators.etag { headers.append(("ETag", etag)) }
        if let date = history.validators.lastModified { headers.append(("Last-Modified", date)) }
        if let disposition = route.contentDisposition { headers.append(("Content-Disposition", disposition)) }
        if route.advertisesRanges && !route.chunked { headers.append(("Accept-Ranges", "bytes")) }

        var status = 200
        var served = 0..<length
        // If-Range is evaluated before Range: a failed match means "send everything" (RFC 9110 §13.1.5).
        let rangeApplies =
            !isHead && !route.chunked && route.honoursRange && range != nil
            && route.honoursRangeForFirstGets.map { history.contentGetsBefore < $0 } ?? true
            && (!route.honoursIfRange || ifRange.map(history.validators.ifRangeMatches) ?? true)
        if rangeApplies, let range {
            let request = route.alwaysRangeNotSatisfiable ? .unsatisfiable : ByteRangeRequest(header: range, length: length)
            switch request {
            case .ignored:
                break
            case .unsatisfiable:
                self = .errorPage(416, extra: [("Content-Range", "bytes */\(length)")], isHead: false)
                return
            case .satisfiable(let bytes):
                var first = bytes.lowerBound
                if route.wrongContentRange { first = first < bytes.upperBound ? first + 1 : max(0, first - 1) }
                status = 206
                served = first..<(bytes.upperBound + 1)
                headers.append(("Content-Range", "bytes \(first)-\(bytes.upperBound)/\(length)"))
            }
        }
        if route.chunked {
            headers.append(("Transfer-Encoding", "chunked"))
        } else {
            let declared = isHead ? (route.headContentLength ?? length) : served.count
            headers.append(("Content-Length", "\(declared)"))
        }
        self.init(status: status, headers: headers)
        guard !isHead else { return }
        let isFirstGet = history.contentGetsBefore == 0
        body = route.content[served]
        chunked = route.chunked
        stop = BodySender.Stop(
            cutAfter: route.cutAfter ?? (isFirstGet ? route.cutFirstAfter : nil),
            stallAfter: route.stallAfter ?? (isFirstGet ? route.stallFirstAfter : nil)
        )
        bytesPerSecond = route.bytesPerSecond
        servesContent = true
    }

    /// The reason phrase for the status line ("Service Unavailable").
    static func reasonPhrase(_ status: Int) -> String {
        let phrase = HTTPResponseStatus(statusCode: status).reasonPhrase
        return phrase.isEmpty ? "Status \(status)" : phrase
    }
}
