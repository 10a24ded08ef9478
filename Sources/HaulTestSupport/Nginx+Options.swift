import Foundation

extension NginxServer {
    /// How to start an ``NginxServer``: everything but the folder it serves.
    ///
    /// ```swift
    /// let options = NginxServer.Options(limitRate: 64 * 1024, tls: .testServer(try TestCertificates.shared()))
    /// ```
    public struct Options: Sendable {
        /// Bytes per second per connection for paths under `/limited/` (nginx `limit_rate`).
        public var limitRate: Int?
        /// Serve HTTPS (and HTTP/2 by ALPN, unless turned off) instead of plain HTTP.
        public var tls: TLS?
        /// Write an access log that ``NginxServer/accessLog()`` reads back.
        public var accessLog: Bool

        public init(limitRate: Int? = nil, tls: TLS? = nil, accessLog: Bool = true) {
            self.limitRate = limitRate
            self.tls = tls
            self.accessLog = accessLog
        }

        func validate() throws {
            if let limitRate, limitRate < 0 {
                throw NginxServerError.invalidOptions("limitRate must not be negative, not \(limitRate)")
            }
            if let tls {
                for path in [tls.certificate, tls.key] {
                    try Self.checkQuotable(path, what: "TLS file path")
                    guard FileManager.default.isReadableFile(atPath: path) else {
                        throw NginxServerError.invalidOptions("cannot read TLS file \(path)")
                    }
                }
            }
        }

        /// A value written between double quotes in nginx's config must not end the quotes or
        /// name a variable.
        static func checkQuotable(_ value: String, what: String) throws {
            let bad = value.unicodeScalars.first { "\"\\$;{}\n\r".unicodeScalars.contains($0) }
            if value.isEmpty || bad != nil {
                throw NginxServerError.invalidOptions("\(what) \(String(reflecting: value)) cannot go in an nginx config")
            }
        }
    }

    /// The certificate nginx presents, and whether it offers HTTP/2.
    ///
    /// ```swift
    /// let certs = try TestCertificates.shared()
    /// let good = NginxServer.TLS.testServer(certs)      // 127.0.0.1 and localhost, HTTP/2
    /// let expired = NginxServer.TLS(certs.expired)      // a client must refuse it
    /// let h1 = NginxServer.TLS(certs.server, http2: false)
    /// ```
    public struct TLS: Sendable {
        /// The server certificate (PEM; a chain may follow it).
        public var certificate: String
        /// Its private key (PEM).
        public var key: String
        /// Offer `h2` by ALPN besides `http/1.1`.
        public var http2: Bool

        public init(certificate: String, key: String, http2: Bool = true) {
            self.certificate = certificate
            self.key = key
            self.http2 = http2
        }

        /// Presents `pair` (one of ``TestCertificates``' server, expired or wrong-name pairs).
        public init(_ pair: TestCertificates.Pair, http2: Bool = true) {
            self.init(certificate: pair.certificate, key: pair.key, http2: http2)
        }

        /// The test server certificate (`127.0.0.1` and `localhost`, signed by the test CA), HTTP/2 on.
        public static func testServer(_ certificates: TestCertificates) -> TLS {
            TLS(certificates.server)
        }
    }
}
