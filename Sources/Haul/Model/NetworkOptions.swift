import Foundation

/// How a download reaches its server and who it says it is: proxies, TLS trust, credentials,
/// cookies, identity, and how long to wait for a connection. Part of ``DownloadRequest``; the
/// command line, the daemon's RPC options (under aria2's names) and library callers fill it.
///
/// ```swift
/// var request = DownloadRequest(url: "https://intranet.example/f.iso", directory: ".")
/// request.network.proxy = try ProxySettings(all: "http://proxy.example:3128")
/// request.network.tls.caCertificate = "/etc/company/ca.pem"
/// request.network.useNetrc = true
/// ```
public struct NetworkOptions: Sendable, Hashable, Codable {
    /// Which proxy each URL goes through.
    public var proxy = ProxySettings()
    /// Which servers to trust, and the client certificate to show.
    public var tls = TLSOptions()
    /// Basic credentials for the URL's own origin (aria2's `--http-user`); credentials in the
    /// URL (`https://user:pass@host/`) win.
    public var user: String?
    /// The password that goes with ``user`` (aria2's `--http-passwd`).
    public var password: String?
    /// Look the URL's host up in a `.netrc` file when no other credentials are given (curl's
    /// `-n`; aria2 reads it by default).
    public var useNetrc = false
    /// The `.netrc` file (default `~/.netrc`).
    public var netrcPath: String?
    /// Cookies to send, from a file in the Netscape format curl, wget and aria2 write
    /// (aria2's `--load-cookies`). Cookies the server sets during the download are added.
    public var cookieFile: String?
    /// The `User-Agent` header (default `haul/VERSION`).
    public var userAgent: String?
    /// The `Referer` header; `*` sends the download's own URL (as aria2 does).
    public var referer: String?
    /// How long to wait for a TCP connection (and the proxy's or TLS handshake) before a try fails.
    public var connectTimeout: Duration = .seconds(15)
    /// Redirects followed before giving up.
    public var maxRedirects = 10
    /// Offer HTTP/2 over TLS (by ALPN) to downloads on one connection (curl's `--http2`). Off by
    /// default: over HTTP/1.1 a big body costs a third of the CPU less here, and a segmented
    /// download always opens one HTTP/1.1 connection per segment.
    public var http2 = false

    /// The defaults: nothing set.
    public init() {}

    /// Reads what was stored; a field that is missing keeps its default.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = NetworkOptions()
        proxy = try container.decodeIfPresent(ProxySettings.self, forKey: .proxy) ?? defaults.proxy
        tls = try container.decodeIfPresent(TLSOptions.self, forKey: .tls) ?? defaults.tls
        user = try container.decodeIfPresent(String.self, forKey: .user)
        password = try container.decodeIfPresent(String.self, forKey: .password)
        useNetrc = try container.decodeIfPresent(Bool.self, forKey: .useNetrc) ?? defaults.useNetrc
        netrcPath = try container.decodeIfPresent(String.self, forKey: .netrcPath)
        cookieFile = try container.decodeIfPresent(String.self, forKey: .cookieFile)
        userAgent = try container.decodeIfPresent(String.self, forKey: .userAgent)
        referer = try container.decodeIfPresent(String.self, forKey: .referer)
        connectTimeout = try container.decodeIfPresent(Duration.self, forKey: .connectTimeout) ?? defaults.connectTimeout
        maxRedirects = try container.decodeIfPresent(Int.self, forKey: .maxRedirects) ?? defaults.maxRedirects
        http2 = try container.decodeIfPresent(Bool.self, forKey: .http2) ?? defaults.http2
    }

    private enum CodingKeys: String, CodingKey {
        case proxy, tls, user, password, useNetrc, netrcPath, cookieFile, userAgent, referer, connectTimeout, maxRedirects, http2
    }

    /// Writes only what differs from the defaults, which ``init(from:)`` fills back in: every
    /// stored download carries its options.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        let defaults = NetworkOptions()
        if proxy != defaults.proxy { try container.encode(proxy, forKey: .proxy) }
        if tls != defaults.tls { try container.encode(tls, forKey: .tls) }
        try container.encodeIfPresent(user, forKey: .user)
        try container.encodeIfPresent(password, forKey: .password)
        if useNetrc != defaults.useNetrc { try container.encode(useNetrc, forKey: .useNetrc) }
        try container.encodeIfPresent(netrcPath, forKey: .netrcPath)
        try container.encodeIfPresent(cookieFile, forKey: .cookieFile)
        try container.encodeIfPresent(userAgent, forKey: .userAgent)
        try container.encodeIfPresent(referer, forKey: .referer)
        if connectTimeout != defaults.connectTimeout { try container.encode(connectTimeout, forKey: .connectTimeout) }
        if maxRedirects != defaults.maxRedirects { try container.encode(maxRedirects, forKey: .maxRedirects) }
        if http2 != defaults.http2 { try container.encode(http2, forKey: .http2) }
    }

    /// Checks what can be checked before connecting: proxy URLs, files that must exist, sane numbers.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/invalidRequest`` naming what is wrong.
    public func validate() throws(DownloadError) {
        try proxy.validate()
        try tls.validate()
        if password != nil, user == nil { throw .invalidRequest("a password needs a user name (--http-user)") }
        for (name, value) in [("user agent", userAgent), ("referer", referer)] {
            if let value, value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                throw .invalidRequest("the \(name) contains control characters")
            }
        }
        if let cookieFile, !FileManager.default.isReadableFile(atPath: cookieFile) {
            throw .invalidRequest("cannot read the cookie file \(cookieFile)")
        }
        guard connectTimeout > .zero else { throw .invalidRequest("the connect timeout must be more than 0") }
        guard (0...100).contains(maxRedirects) else {
            throw .invalidRequest("max redirects must be between 0 and 100, not \(maxRedirects)")
        }
    }
}

/// Which TLS servers to trust, and which certificate to show to a server that asks for one.
public struct TLSOptions: Sendable, Hashable, Codable {
    /// A PEM file of CA certificates trusted on top of the system's (aria2's `--ca-certificate`).
    public var caCertificate: String?
    /// false: accept any certificate (curl's `-k`; aria2's `--check-certificate=false`).
    public var verify = true
    /// A client certificate (PEM) for servers that ask for one (aria2's `--certificate`).
    public var certificate: String?
    /// The client certificate's private key (PEM) (aria2's `--private-key`).
    public var privateKey: String?

    /// The defaults: nothing set.
    public init() {}

    /// Reads what was stored; a field that is missing keeps its default.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        caCertificate = try container.decodeIfPresent(String.self, forKey: .caCertificate)
        verify = try container.decodeIfPresent(Bool.self, forKey: .verify) ?? true
        certificate = try container.decodeIfPresent(String.self, forKey: .certificate)
        privateKey = try container.decodeIfPresent(String.self, forKey: .privateKey)
    }

    private enum CodingKeys: String, CodingKey {
        case caCertificate, verify, certificate, privateKey
    }

    /// Writes only what differs from the defaults, which ``init(from:)`` fills back in.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(caCertificate, forKey: .caCertificate)
        if !verify { try container.encode(verify, forKey: .verify) }
        try container.encodeIfPresent(certificate, forKey: .certificate)
        try container.encodeIfPresent(privateKey, forKey: .privateKey)
    }

    func validate() throws(DownloadError) {
        for (what, path) in [("CA certificate", caCertificate), ("client certificate", certificate), ("private key", privateKey)] {
            if let path, !FileManager.default.isReadableFile(atPath: path) {
                throw .invalidRequest("cannot read the \(what) file \(path)")
            }
        }
        if (certificate == nil) != (privateKey == nil) {
            throw .invalidRequest("a client certificate needs both --certificate and --private-key")
        }
    }
}
