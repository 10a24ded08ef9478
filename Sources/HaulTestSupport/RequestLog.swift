/// One request as the server saw it, with the status it answered.
public struct RecordedRequest: Sendable {
    /// The request method ("GET", "HEAD", …).
    public var method: String
    /// The request target as sent, query string included.
    public var target: String
    /// The request headers in the order received.
    public var headers: [(String, String)]
    /// The status the server answered with.
    public var status: Int

    /// The first value of header `name`, compared case-insensitively.
    public func header(_ name: String) -> String? {
        let name = name.lowercased()
        return headers.first { $0.0.lowercased() == name }?.1
    }
}

/// What the server saw and sent for one path.
public struct RouteStats: Sendable {
    /// Requests in arrival order, including HEAD, failures and 404s.
    public var requests: [RecordedRequest] = []
    /// Content body bytes (200/206 payloads) whose write to the socket succeeded.
    ///
    /// Error pages are not counted, so a download that resumes perfectly sends exactly the
    /// content length in total, whatever failures came before.
    public var bodyBytesSent: Int = 0

    /// Requests with method GET.
    public var getCount: Int { requests.count { $0.method == "GET" } }
}
