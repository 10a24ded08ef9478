import ArgumentParser
import Foundation
import Haul
import HaulDaemon

/// Proxies, TLS, credentials, cookies and identity: the flags `haul get`, `haul add` and
/// `haul daemon` share, under aria2's names (with curl's where users expect them). They fill a
/// download's ``NetworkOptions``.
struct NetworkFlags: ParsableArguments {
    @Option(
        name: [.customLong("all-proxy"), .customLong("proxy")],
        help: ArgumentHelp(
            "Proxy for every URL: http://[USER:PASS@]HOST[:PORT] or socks5://HOST[:PORT]. Default: $https_proxy, $http_proxy, $all_proxy.",
            valueName: "url"))
    var allProxy: String?

    @Option(help: ArgumentHelp("Proxy for http:// URLs (overrides --all-proxy).", valueName: "url"))
    var httpProxy: String?

    @Option(help: ArgumentHelp("Proxy for https:// URLs (overrides --all-proxy).", valueName: "url"))
    var httpsProxy: String?

    @Option(
        help: ArgumentHelp(
            "Hosts reached without a proxy, comma-separated: names (and their subdomains), addresses, or * (default: $no_proxy).", valueName: "list"))
    var noProxy: String?

    @Option(name: [.customLong("proxy-user"), .customLong("all-proxy-user")], help: "User name for the proxy, when its URL has none.")
    var proxyUser: String?

    @Option(
        name: [.customLong("proxy-passwd"), .customLong("all-proxy-passwd")], help: "Password for the proxy (or $HAUL_PROXY_PASSWD, which stays out of ps).")
    var proxyPassword: String?

    @Option(help: ArgumentHelp("Trust the CA certificates in this PEM file too (a company or private CA).", valueName: "file"))
    var caCertificate: String?

    @Option(help: ArgumentHelp("false: accept any TLS certificate, as -k does (default true).", valueName: "true|false"))
    var checkCertificate: Bool?

    @Flag(name: [.customShort("k"), .long], help: "Accept any TLS certificate (insecure: anyone on the way can read and change the download).")
    var insecure = false

    @Option(help: ArgumentHelp("Client certificate (PEM) for servers that ask for one; with --private-key.", valueName: "file"))
    var certificate: String?

    @Option(help: ArgumentHelp("The client certificate's private key (unencrypted PEM).", valueName: "file"))
    var privateKey: String?

    @Option(help: "User name for Basic authentication, sent to the URL's own host only (credentials in the URL win).")
    var httpUser: String?

    @Option(help: "Password for Basic authentication (or $HAUL_HTTP_PASSWD, which stays out of ps).")
    var httpPasswd: String?

    @Flag(name: [.customShort("n"), .long], help: "Look the host up in ~/.netrc when the URL and the options give no credentials.")
    var netrc = false

    @Option(help: ArgumentHelp("The .netrc file to read (implies --netrc).", valueName: "file"))
    var netrcPath: String?

    @Option(help: ArgumentHelp("Send cookies from this file (Netscape format, as curl, wget and aria2 write it).", valueName: "file"))
    var loadCookies: String?

    @Option(name: [.customShort("U"), .long], help: "The User-Agent header (default haul/VERSION).")
    var userAgent: String?

    @Option(help: "The Referer header; * sends the download's own URL.")
    var referer: String?

    @Option(help: "Seconds to wait for a connection (and a proxy's or TLS handshake) before a try fails (default 15).")
    var connectTimeout: Double?

    @Option(help: "Redirects followed before giving up (default 10).")
    var maxRedirects: Int?

    @Flag(help: "Offer HTTP/2 over TLS to downloads on one connection (default: HTTP/1.1, cheaper for big files; -x N always opens N HTTP/1.1 connections).")
    var http2 = false

    /// Whether any TLS check is switched off (the caller prints a warning).
    var skipsCertificateCheck: Bool { insecure || checkCertificate == false }

    /// Sets what was given on `network`; without proxy flags, the environment's proxies.
    func apply(to network: inout NetworkOptions, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        let fromEnvironment = ProxySettings.environment(environment)
        if allProxy != nil || httpProxy != nil || httpsProxy != nil {
            network.proxy = ProxySettings(all: allProxy, http: httpProxy, https: httpsProxy, noProxy: fromEnvironment.noProxy)
        } else {
            network.proxy = fromEnvironment
        }
        if let noProxy { network.proxy.noProxy = ProxySettings.list(noProxy) }
        network.proxy.user = proxyUser
        network.proxy.password = proxyPasswordGiven(environment)
        network.tls.caCertificate = caCertificate.map(Self.absolute)
        network.tls.verify = !skipsCertificateCheck
        network.tls.certificate = certificate.map(Self.absolute)
        network.tls.privateKey = privateKey.map(Self.absolute)
        network.user = httpUser
        network.password = httpPasswordGiven(environment)
        network.useNetrc = netrc || netrcPath != nil
        network.netrcPath = netrcPath.map(Self.absolute)
        network.cookieFile = loadCookies.map(Self.absolute)
        network.userAgent = userAgent
        network.referer = referer
        if let connectTimeout {
            guard connectTimeout > 0, connectTimeout <= 3600 else { throw ValidationError("--connect-timeout must be between 0 and 3600 seconds") }
            network.connectTimeout = .milliseconds(Int64(connectTimeout * 1000))
        }
        if let maxRedirects { network.maxRedirects = maxRedirects }
        network.http2 = http2
    }

    /// The proxy's password: `--proxy-passwd`, else `$HAUL_PROXY_PASSWD` (an argument is seen by
    /// every user of the machine in `ps`; the environment is not).
    func proxyPasswordGiven(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        proxyPassword ?? environment["HAUL_PROXY_PASSWD"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The Basic password: `--http-passwd`, else `$HAUL_HTTP_PASSWD` when `--http-user` is given.
    func httpPasswordGiven(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        httpPasswd ?? (httpUser != nil ? environment["HAUL_HTTP_PASSWD"].flatMap { $0.isEmpty ? nil : $0 } : nil)
    }

    /// The same options as aria2 names them, for `haul add`. Files are made absolute: the
    /// daemon runs in another folder.
    var aria2Options: [String: JSONValue] {
        var options: [String: JSONValue] = [:]
        let pairs: [(String, String?)] = [
            ("all-proxy", allProxy), ("http-proxy", httpProxy), ("https-proxy", httpsProxy), ("no-proxy", noProxy),
            ("all-proxy-user", proxyUser), ("all-proxy-passwd", proxyPasswordGiven()),
            ("ca-certificate", caCertificate.map(Self.absolute)), ("certificate", certificate.map(Self.absolute)),
            ("private-key", privateKey.map(Self.absolute)), ("http-user", httpUser), ("http-passwd", httpPasswordGiven()),
            ("netrc-path", netrcPath.map(Self.absolute)), ("load-cookies", loadCookies.map(Self.absolute)),
            ("user-agent", userAgent), ("referer", referer),
            ("connect-timeout", connectTimeout.map { String(Int($0.rounded(.up))) }),
            ("max-redirect", maxRedirects.map(String.init)),
        ]
        for (name, value) in pairs { if let value { options[name] = .string(value) } }
        if skipsCertificateCheck { options["check-certificate"] = "false" }
        if netrc { options["no-netrc"] = "false" }
        if http2 { options["http2"] = "true" }
        return options
    }

    static func absolute(_ path: String) -> String { DownloadRequest.absolutePath(path) }
}
