import Foundation

extension NginxServer {
    /// One line of the access log: what a request carried and what nginx answered.
    ///
    /// Header fields are `""` when the request did not carry the header (or, for the TLS ones,
    /// was not over TLS). nginx writes a line once it has sent the whole answer; wait for it with
    /// ``NginxServer/accessLog(waitingFor:timeout:)``.
    public struct AccessLogEntry: Sendable, Hashable, Decodable {
        /// `HTTP/1.1`, `HTTP/2.0`, `HTTP/1.0` (nginx `$server_protocol`).
        public var serverProtocol: String
        /// The request line as sent: `GET /a.bin HTTP/1.1` (`$request`).
        public var request: String
        /// `GET`, `HEAD`, … (`$request_method`).
        public var method: String
        /// The target as sent, query included: `/a.bin?x=1` (`$request_uri`).
        public var uri: String
        /// The status nginx answered.
        public var status: Int
        /// Body bytes sent, headers not counted (`$body_bytes_sent`).
        public var bodyBytesSent: Int
        /// The `Host` header (or HTTP/2 `:authority`).
        public var host: String
        /// The `Authorization` header, e.g. `Basic YWxpY2U6czNjcmV0`.
        public var authorization: String
        /// The `Cookie` header, e.g. `session=abc; theme=dark`.
        public var cookie: String
        /// The `User-Agent` header.
        public var userAgent: String
        /// The `Referer` header.
        public var referer: String
        /// The `Range` header.
        public var range: String
        /// The `Via` header: ``ForwardProxy`` adds `1.1 haul-test-proxy (tinyproxy/…)` to what it
        /// forwards.
        public var via: String
        /// `TLSv1.3`, `TLSv1.2`, or `""` without TLS (`$ssl_protocol`).
        public var sslProtocol: String
        /// The name the client asked for in TLS's SNI, `""` when it sent none or without TLS
        /// (`$ssl_server_name`).
        public var sslServerName: String
        /// `SUCCESS` when the client presented a certificate the client CA signed, `NONE` when it
        /// presented none, `FAILED:…` otherwise; `""` without TLS or client CA (`$ssl_client_verify`).
        public var sslClientVerify: String
        /// The `Location` header nginx answered with (a redirect's target), else `""`.
        public var location: String
        /// The `Set-Cookie` header nginx answered with, else `""`.
        public var setCookie: String
        /// nginx's serial number of the connection: entries with the same number came over one
        /// connection.
        public var connection: Int
        /// The request arrived pipelined: sent before the answer to the one before it on its
        /// connection (`$pipe` is `p`).
        public var pipelined: Bool

        /// The log_format, as JSON with `escape=json` (quotes and control bytes escaped).
        static let format =
            #"{"serverProtocol":"$server_protocol","request":"$request","method":"$request_method","uri":"$request_uri","status":"$status","bodyBytesSent":"$body_bytes_sent","host":"$http_host","authorization":"$http_authorization","cookie":"$http_cookie","userAgent":"$http_user_agent","referer":"$http_referer","range":"$http_range","via":"$http_via","sslProtocol":"$ssl_protocol","sslServerName":"$ssl_server_name","sslClientVerify":"$ssl_client_verify","location":"$sent_http_location","setCookie":"$sent_http_set_cookie","connection":"$connection","pipe":"$pipe"}"#

        private enum CodingKeys: String, CodingKey {
            case serverProtocol, request, method, uri, status, bodyBytesSent, host, authorization, cookie
            case userAgent, referer, range, via, sslProtocol, sslServerName, sslClientVerify, location, setCookie, connection, pipe
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            func text(_ key: CodingKeys) throws -> String { try c.decodeIfPresent(String.self, forKey: key) ?? "" }
            func number(_ key: CodingKeys) throws -> Int {
                let value = try text(key)
                guard let number = Int(value) else {
                    throw DecodingError.dataCorruptedError(forKey: key, in: c, debugDescription: "not a number: \(value)")
                }
                return number
            }
            serverProtocol = try text(.serverProtocol)
            request = try text(.request)
            method = try text(.method)
            uri = try text(.uri)
            status = try number(.status)
            bodyBytesSent = try number(.bodyBytesSent)
            host = try text(.host)
            authorization = try text(.authorization)
            cookie = try text(.cookie)
            userAgent = try text(.userAgent)
            referer = try text(.referer)
            range = try text(.range)
            via = try text(.via)
            sslProtocol = try text(.sslProtocol)
            sslServerName = try text(.sslServerName)
            sslClientVerify = try text(.sslClientVerify)
            location = try text(.location)
            setCookie = try text(.setCookie)
            connection = try number(.connection)
            pipelined = try text(.pipe) == "p"
        }

        /// The path of ``uri``, without the query.
        public var path: String { String(uri.prefix { $0 != "?" }) }
    }

    /// Every request nginx has finished so far, oldest first; empty when started without an
    /// access log.
    ///
    /// ```swift
    /// let entries = nginx.accessLog()
    /// #expect(entries.filter { $0.path == "/a.bin" }.allSatisfy { $0.authorization.isEmpty })
    /// ```
    public func accessLog() -> [AccessLogEntry] {
        Self.parseAccessLog(accessLogText())
    }

    /// Waits until the access log holds at least `count` entries (nginx writes one after it has
    /// sent the whole answer, which may be a moment after the client has read it), then returns
    /// them all. Returns what there is after `timeout`.
    public func accessLog(waitingFor count: Int, timeout: Duration = .seconds(5)) async -> [AccessLogEntry] {
        let deadline = ContinuousClock.now + timeout
        while true {
            let entries = accessLog()
            if entries.count >= count || ContinuousClock.now >= deadline { return entries }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    /// The access log as nginx wrote it, for a failure message.
    public func accessLogText() -> String {
        (try? String(contentsOf: directory.appendingPathComponent("access.log"), encoding: .utf8)) ?? ""
    }

    /// nginx's error log, for a failure message.
    public func errorLogText() -> String {
        (try? String(contentsOf: directory.appendingPathComponent("error.log"), encoding: .utf8)) ?? ""
    }

    /// One JSON object a line; a last line without its newline is still being written and is
    /// left for the next read.
    static func parseAccessLog(_ text: String) -> [AccessLogEntry] {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        lines.removeLast()  // "" after the final newline, or an unfinished line
        let decoder = JSONDecoder()
        return lines.compactMap { line in
            try? decoder.decode(AccessLogEntry.self, from: Data(line.utf8))
        }
    }
}
