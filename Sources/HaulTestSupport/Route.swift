/// How a ``FaultServer`` answers requests for one path: the content plus the faults to inject.
///
/// ```swift
/// var route = Route(content: bytes)
/// route.cutFirstAfter = 1_000   // first GET dies after 1 000 body bytes
/// server.serve("/file.bin", route)
/// ```
public struct Route: Sendable {
    /// The representation served by GET (and described by HEAD).
    public var content: [UInt8]
    /// Content swapped in once the first content-serving GET (200/206) has begun; nil = never changes.
    ///
    /// The first response keeps sending the old bytes; every later request sees the new ones.
    public var contentAfterFirstGet: [UInt8]?
    /// false: always 200 with the full body, even when the request carries Range.
    public var honoursRange: Bool = true
    /// Honour Range on only this many content GETs; every later GET gets the whole file (200),
    /// like a server that stops honouring ranges midway. nil: no such limit.
    public var honoursRangeForFirstGets: Int?
    /// false: ignore If-Range and serve 206 even when the validator does not match.
    public var honoursIfRange: Bool = true
    /// Which validators (ETag, Last-Modified) the responses carry.
    public var validators: Validators = .strongETagAndLastModified
    /// Every GET response: close the connection after this many body bytes.
    public var cutAfter: Int?
    /// Only the first GET response is cut after this many body bytes.
    public var cutFirstAfter: Int?
    /// Every GET response: after this many body bytes send nothing more but keep the connection open.
    public var stallAfter: Int?
    /// Only the first GET response stalls after this many body bytes.
    public var stallFirstAfter: Int?
    /// Trickle the body at about this many bytes per second.
    public var bytesPerSecond: Int?
    /// Every answer's head goes out this long after its request (the server thinks).
    public var answerDelay: Duration?
    /// The first K requests for this route (any method) answer ``failureStatus``.
    public var failFirst: Int = 0
    /// The status of the ``failFirst`` failures.
    public var failureStatus: Int = 503
    /// Retry-After value sent with error responses ("2" or an HTTP-date).
    public var retryAfter: String?
    /// Always answer this status with a small HTML error body.
    public var status: Int?
    /// Answer ``redirectStatus`` with this Location (absolute URL or path).
    public var redirectTo: String?
    /// The status used for ``redirectTo``.
    public var redirectStatus: Int = 302
    /// Sent verbatim as Content-Disposition on HEAD and GET.
    public var contentDisposition: String?
    /// Transfer-Encoding: chunked, no Content-Length, no Accept-Ranges, Range never honoured.
    public var chunked: Bool = false
    /// Answer a Range request with a 206 whose start is shifted by one byte (header and body agree, request does not).
    public var wrongContentRange: Bool = false
    /// Answer every Range request with 416 (Content-Range: bytes */LEN).
    public var alwaysRangeNotSatisfiable: Bool = false
    /// false: HEAD answers 405.
    public var headAllowed: Bool = true
    /// Answer `OPTIONS` with `200` and no body (plus `responseHeaders`), instead of `405`.
    public var optionsAllowed: Bool = false
    /// HEAD lies: send this Content-Length instead of the real one.
    public var headContentLength: Int?
    /// Send "Accept-Ranges: bytes" on 200, 206 and HEAD.
    public var advertisesRanges: Bool = true
    /// Answer If-None-Match and If-Modified-Since with 304 when the content is the same.
    public var honoursConditions = true
    /// The Content-Type of the content (a test serving a web page sets `text/html`).
    public var contentType = "application/octet-stream"
    /// Headers a request must carry (name, and a text its value must contain), or it is
    /// answered 401 with `WWW-Authenticate` (for `Authorization`) or 403: a server
    /// that needs a login or a cookie.
    public var requiredHeaders: [(name: String, contains: String)] = []
    /// Extra headers on every answer of this route, e.g. `Set-Cookie`.
    public var responseHeaders: [(String, String)] = []

    /// A route that serves `content` with strong validators and no faults.
    public init(content: [UInt8]) {
        self.content = content
    }

    /// Which validators a route sends.
    public enum Validators: Sendable {
        /// Neither ETag nor Last-Modified.
        case none
        /// A strong ETag and Last-Modified.
        case strongETagAndLastModified
        /// Last-Modified only.
        case lastModifiedOnly
        /// A weak ETag (W/"…") only.
        case weakETagOnly
    }
}
