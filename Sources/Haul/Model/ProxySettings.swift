import Foundation

/// Which proxy a URL goes through, as aria2 and curl decide it: the proxy for the URL's scheme
/// (`http` or `https`), else the one for all, unless the host is in ``noProxy``.
///
/// Proxy URLs are `http://[user:password@]host[:port]` (port 80 by default; `http://` may be
/// left out) or `socks5://host[:port]` / `socks5h://host[:port]` (port 1080 by default). An
/// HTTP proxy gets `http` URLs in absolute form and tunnels `https` ones with `CONNECT`; a SOCKS5
/// proxy connects to the server's name (both schemes let the proxy resolve it).
///
/// ```swift
/// let settings = ProxySettings.environment(ProcessInfo.processInfo.environment)
/// ```
public struct ProxySettings: Sendable, Hashable, Codable {
    /// The proxy for every URL without one of its own (aria2's `--all-proxy`, curl's `-x`).
    public var all: String?
    /// The proxy for `http` URLs (aria2's `--http-proxy`).
    public var http: String?
    /// The proxy for `https` URLs (aria2's `--https-proxy`).
    public var https: String?
    /// Hosts reached directly: names (also matching their subdomains; a leading dot is
    /// optional), IP addresses, or `*` for every host (aria2's `--no-proxy`, `$no_proxy`).
    public var noProxy: [String] = []
    /// Credentials for the proxy when its URL has none (aria2's `--all-proxy-user`).
    public var user: String?
    /// The password that goes with ``user`` (aria2's `--all-proxy-passwd`).
    public var password: String?

    /// No proxy.
    public init() {}

    /// Proxies for every URL (`all`), or by scheme, except for the hosts in `noProxy`.
    public init(all: String? = nil, http: String? = nil, https: String? = nil, noProxy: [String] = []) {
        self.all = all
        self.http = http
        self.https = https
        self.noProxy = noProxy
    }

    /// Reads what was stored; a field that is missing keeps its default.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        all = try container.decodeIfPresent(String.self, forKey: .all)
        http = try container.decodeIfPresent(String.self, forKey: .http)
        https = try container.decodeIfPresent(String.self, forKey: .https)
        noProxy = try container.decodeIfPresent([String].self, forKey: .noProxy) ?? []
        user = try container.decodeIfPresent(String.self, forKey: .user)
        password = try container.decodeIfPresent(String.self, forKey: .password)
    }

    private enum CodingKeys: String, CodingKey {
        case all, http, https, noProxy, user, password
    }

    /// Writes only what is set, which ``init(from:)`` reads back.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(all, forKey: .all)
        try container.encodeIfPresent(http, forKey: .http)
        try container.encodeIfPresent(https, forKey: .https)
        if !noProxy.isEmpty { try container.encode(noProxy, forKey: .noProxy) }
        try container.encodeIfPresent(user, forKey: .user)
        try container.encodeIfPresent(password, forKey: .password)
    }

    /// Whether no proxy is set at all.
    public var isEmpty: Bool { all == nil && http == nil && https == nil }

    /// The proxies the environment names, read as curl reads them: `http_proxy` (lower case
    /// only: `HTTP_PROXY` can be set by a web server's CGI caller), `https_proxy` or
    /// `HTTPS_PROXY`, `all_proxy` or `ALL_PROXY`, `no_proxy` or `NO_PROXY`. Empty values count as unset.
    public static func environment(_ environment: [String: String]) -> ProxySettings {
        func value(_ names: String...) -> String? {
            names.lazy.compactMap { environment[$0] }.first { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
        }
        var settings = ProxySettings()
        settings.http = value("http_proxy")
        settings.https = value("https_proxy", "HTTPS_PROXY")
        settings.all = value("all_proxy", "ALL_PROXY")
        settings.noProxy = Self.list(value("no_proxy", "NO_PROXY") ?? "")
        return settings
    }

    /// A `no_proxy` list: entries separated by commas or spaces.
    public static func list(_ text: String) -> [String] {
        text.split(whereSeparator: { $0 == "," || $0 == " " }).map(String.init)
    }

    /// The proxy for a URL with this scheme and host, or nil to connect directly.
    ///
    /// - Throws: ``DownloadError`` (``DownloadError/Kind/invalidRequest``) for a proxy URL that
    ///   cannot be used.
    func server(scheme: String, host: String) throws(DownloadError) -> ProxyServer? {
        let chosen = (scheme == "https" ? https : http) ?? all
        guard let chosen, !bypasses(host) else { return nil }
        var server = try ProxyServer(parsing: chosen)
        if server.user == nil, let user {
            server.user = user
            server.password = password ?? ""
        }
        return server
    }

    /// Whether `host` is reached directly.
    func bypasses(_ host: String) -> Bool {
        let host = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        return noProxy.contains { entry in
            var entry = entry.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[] "))
            if entry == "*" { return true }
            if entry.hasPrefix(".") { entry.removeFirst() }
            guard !entry.isEmpty else { return false }
            return host == entry || host.hasSuffix("." + entry)
        }
    }

    func validate() throws(DownloadError) {
        for url in [all, http, https].compactMap({ $0 }) { _ = try ProxyServer(parsing: url) }
        if password != nil, user == nil { throw .invalidRequest("a proxy password needs a proxy user name") }
    }
}

/// One proxy, parsed from its URL.
struct ProxyServer: Sendable, Hashable {
    enum Kind: Sendable, Hashable { case http, socks5 }

    var kind: Kind
    var host: String
    var port: Int
    var user: String?
    var password: String?

    init(parsing text: String) throws(DownloadError) {
        let shown = URLRedaction.redact(text)
        let withScheme = text.contains("://") ? text : "http://" + text
        guard let components = URLComponents(string: withScheme), let host = components.host, !host.isEmpty else {
            throw .invalidRequest("not a proxy URL: \(shown)")
        }
        switch components.scheme?.lowercased() {
        case "http":
            kind = .http
        case "socks5", "socks5h":
            kind = .socks5
            if components.user != nil {
                throw .invalidRequest("SOCKS5 proxies with a user name are not supported (\(shown)); use one without, or an HTTP proxy")
            }
        case "https":
            throw .invalidRequest("TLS to the proxy itself (https:// proxy URLs) is not supported (\(shown)); use http://")
        case let other:
            throw .invalidRequest("unsupported proxy type \(other ?? "")://: use http:// or socks5:// (\(shown))")
        }
        self.host = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        port = components.port ?? (kind == .http ? 80 : 1080)
        guard (1...65535).contains(port) else { throw .invalidRequest("bad port in proxy URL \(shown)") }
        user = components.user.map { $0.removingPercentEncoding ?? $0 }
        password = components.password.map { $0.removingPercentEncoding ?? $0 }
    }
}
