import Foundation

extension NginxServer {
    /// How to start an ``NginxServer``: everything but the folder it serves.
    ///
    /// Each option adds locations that serve the same folder as `/` (`/auth/a.bin` is the file
    /// `a.bin`) behind one more condition:
    ///
    /// | option | location | answers |
    /// | --- | --- | --- |
    /// | `limitRate` | `/limited/` | the file, at `limitRate` bytes per second per connection |
    /// | (always) | `/noranges/` | the file, whole, whatever range is asked (`max_ranges 0`) |
    /// | (always) | `/stalled/` | the file, its first 64 KiB at once and then a byte a second |
    /// | `basicAuth` | `/auth/` | `401` with `WWW-Authenticate: Basic realm="haul-test"` unless the request carries these credentials |
    /// | `cookie` | `/cookie/` | `403` unless the request carries the cookie `name=value` |
    /// | `cookie` | `/setcookie/F` | `302` to `/cookie/F` with `Set-Cookie: name=value; Path=/` |
    /// | `tls` with `clientCA` | `/mtls/` | `403` unless the client presented a certificate signed by `clientCA` (one signed by another CA gets nginx's `400`) |
    /// | `redirectTarget` | `/redirect-to/F` | `302` to `redirectTarget` + `F` |
    /// | `redirectTarget` and `basicAuth` | `/auth/redirect-to/F` | the same `302`, once the credentials are right (`401` before) |
    /// | `webDAV` | `/dav/F` | WebDAV `PUT` (nginx's dav module): stores the body as the file `F`, `201`/`204` |
    ///
    /// ```swift
    /// let certs = try TestCertificates.shared()
    /// let other = try await NginxServer.start(root: folder, options: .init())
    /// let options = NginxServer.Options(
    ///     tls: .testServer(certs), basicAuth: TestCredentials(user: "alice", password: "s3cret"),
    ///     cookie: .init(name: "session", value: "abc"), redirectTarget: other.url("/", host: "localhost"))
    /// ```
    public struct Options: Sendable {
        /// Bytes per second per connection for paths under `/limited/` (nginx `limit_rate`).
        public var limitRate: Int?
        /// Serve HTTPS (and HTTP/2 by ALPN, unless turned off) instead of plain HTTP.
        public var tls: TLS?
        /// Demand these credentials (HTTP Basic) under `/auth/`. The password is hashed with
        /// `openssl passwd -apr1`, so this needs openssl.
        public var basicAuth: TestCredentials?
        /// Demand this cookie under `/cookie/`; `/setcookie/` sets it.
        public var cookie: Cookie?
        /// An absolute URL prefix that `/redirect-to/F` redirects to (`302`, `Location:
        /// redirectTarget + F`), e.g. another server's `url("/")`.
        ///
        /// To test what crosses origins, give the other server another host name
        /// (`other.url("/", host: "localhost")`): cookies are kept per host, not per port, so a
        /// client rightly sends a cookie of `127.0.0.1:A` to `127.0.0.1:B`.
        public var redirectTarget: String?
        /// Write an access log that ``NginxServer/accessLog()`` reads back.
        public var accessLog: Bool
        /// Take `PUT`s under `/dav/` into the served folder (nginx's `dav_methods PUT`, any size).
        public var webDAV: Bool

        public init(
            limitRate: Int? = nil, tls: TLS? = nil, basicAuth: TestCredentials? = nil, cookie: Cookie? = nil,
            redirectTarget: String? = nil, accessLog: Bool = true, webDAV: Bool = false
        ) {
            self.webDAV = webDAV
            self.limitRate = limitRate
            self.tls = tls
            self.basicAuth = basicAuth
            self.cookie = cookie
            self.redirectTarget = redirectTarget
            self.accessLog = accessLog
        }

        func validate() throws {
            if let limitRate, limitRate < 0 {
                throw NginxServerError.invalidOptions("limitRate must not be negative, not \(limitRate)")
            }
            if let tls {
                for path in [tls.certificate, tls.key] + (tls.clientCA.map { [$0] } ?? []) {
                    try Self.checkQuotable(path, what: "TLS file path")
                    guard FileManager.default.isReadableFile(atPath: path) else {
                        throw NginxServerError.invalidOptions("cannot read TLS file \(path)")
                    }
                }
            }
            if let basicAuth {
                let user = basicAuth.user.unicodeScalars, password = basicAuth.password.unicodeScalars
                if user.isEmpty || user.contains(where: { $0 == ":" || $0.properties.generalCategory == .control })
                    || password.contains(where: { $0 == "\n" || $0 == "\r" })
                {
                    throw NginxServerError.invalidOptions(
                        "basicAuth needs a user without ':' or control characters and a password without line breaks")
                }
            }
            if let cookie {
                let nameOK =
                    !cookie.name.isEmpty
                    && cookie.name.unicodeScalars.allSatisfy {
                        $0.isASCII && (CharacterSet.alphanumerics.contains($0) || $0 == "_")
                    }
                let valueOK =
                    !cookie.value.isEmpty
                    && cookie.value.unicodeScalars.allSatisfy {
                        $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "._~+/=-".unicodeScalars.contains($0))
                    }
                guard nameOK, valueOK else {
                    throw NginxServerError.invalidOptions(
                        "cookie name must be letters, digits and '_' (an nginx variable name) and its value letters, digits and ._~+/=-, not \(cookie.name)=\(cookie.value)"
                    )
                }
            }
            if let redirectTarget {
                try Self.checkQuotable(redirectTarget, what: "redirectTarget")
                guard redirectTarget.hasPrefix("http://") || redirectTarget.hasPrefix("https://"),
                    !redirectTarget.contains(" ")
                else {
                    throw NginxServerError.invalidOptions("redirectTarget must be an absolute http(s) URL, not \(redirectTarget)")
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

    /// The certificate nginx presents, whether it offers HTTP/2, and which client certificates
    /// `/mtls/` accepts.
    ///
    /// ```swift
    /// let certs = try TestCertificates.shared()
    /// let good = NginxServer.TLS.testServer(certs)      // 127.0.0.1 and localhost, HTTP/2, /mtls/
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
        /// Ask every client for a certificate (`ssl_verify_client optional`: a client without one
        /// is still served) and serve `/mtls/` only to those whose certificate this CA (PEM) signed.
        public var clientCA: String?
        /// With ``clientCA``, refuse every request without a certificate it signed
        /// (`ssl_verify_client on`): nginx then answers `400` ("No required SSL certificate was
        /// sent"), as servers that demand client certificates do.
        public var requiresClientCertificate = false

        public init(certificate: String, key: String, http2: Bool = true, clientCA: String? = nil) {
            self.certificate = certificate
            self.key = key
            self.http2 = http2
            self.clientCA = clientCA
        }

        /// Presents `pair` (one of ``TestCertificates``' server, expired or wrong-name pairs).
        public init(_ pair: TestCertificates.Pair, http2: Bool = true, clientCA: String? = nil) {
            self.init(certificate: pair.certificate, key: pair.key, http2: http2, clientCA: clientCA)
        }

        /// The test server certificate (`127.0.0.1` and `localhost`, signed by the test CA),
        /// HTTP/2 on, and `/mtls/` for client certificates of the test CA (``TestCertificates/client``).
        public static func testServer(_ certificates: TestCertificates) -> TLS {
            TLS(certificates.server, clientCA: certificates.ca.certificate)
        }
    }

    /// The cookie `/cookie/` demands and `/setcookie/` sets.
    public struct Cookie: Sendable, Hashable {
        /// Letters, digits and `_` (nginx reads it as `$cookie_NAME`).
        public var name: String
        /// Letters, digits and `._~+/=-`.
        public var value: String

        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }

        /// `name=value`, as a `Cookie` header carries it.
        public var header: String { "\(name)=\(value)" }
    }
}
