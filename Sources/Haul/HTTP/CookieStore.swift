import AsyncHTTPClient
import Foundation
import Synchronization

/// The cookies of one ``Downloader``, shared by its downloads as aria2 shares its cookie store:
/// those loaded from cookie files (the Netscape format curl, wget and aria2 read and write) and
/// those servers set during downloads, redirects included. Each request gets the ones that
/// match its URL (domain, path, `Secure`, not expired).
final class CookieStore: Sendable {
    struct Cookie: Sendable, Hashable {
        var domain: String
        /// Also sent to subdomains of ``domain`` (a `Domain` attribute, or a leading dot in a file).
        var includesSubdomains: Bool
        var path: String
        var secure: Bool
        var httpOnly: Bool
        /// Seconds since 1970; nil for a session cookie.
        var expires: Int64?
        var name: String
        var value: String

        /// What identifies a cookie: a newer one with the same key replaces it.
        var key: String { "\(domain)\t\(path)\t\(name)" }

        func matches(host: String, path requestPath: String, secure isSecure: Bool, now: Int64) -> Bool {
            if let expires, expires != 0, expires <= now { return false }
            if secure, !isSecure { return false }
            guard host == domain || (includesSubdomains && host.hasSuffix("." + domain)) else { return false }
            if requestPath == path { return true }
            guard requestPath.hasPrefix(path) else { return false }
            return path.hasSuffix("/") || requestPath.dropFirst(path.count).hasPrefix("/")
        }
    }

    private struct State {
        var cookies: [String: Cookie] = [:]
        var loadedFiles: Set<String> = []
    }

    private let state = Mutex(State())

    /// Reads a cookie file once per process; later calls for the same path do nothing.
    ///
    /// - Throws: ``DownloadError`` (``DownloadError/Kind/invalidRequest``) when it cannot be read.
    func load(_ path: String) throws(DownloadError) {
        if state.withLock({ $0.loadedFiles.contains(path) }) { return }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .invalidRequest("cannot read the cookie file \(path)")
        }
        let cookies = Self.parse(String(decoding: data, as: UTF8.self))
        state.withLock { state in
            guard state.loadedFiles.insert(path).inserted else { return }
            for cookie in cookies where state.cookies[cookie.key] == nil { state.cookies[cookie.key] = cookie }
        }
    }

    /// The `Cookie` header for `url`, or nil when no cookie matches.
    func header(for url: HTTPURL) -> String? {
        // Most downloads have no cookies at all: not even the URL is looked at then.
        if state.withLock({ $0.cookies.isEmpty }) { return nil }
        let host = url.host.lowercased()
        let path = url.path.isEmpty ? "/" : url.path
        let secure = url.scheme == "https"
        let now = Int64(Date().timeIntervalSince1970)
        let matching = state.withLock { state in
            state.cookies.values.filter { $0.matches(host: host, path: path, secure: secure, now: now) }
        }
        guard !matching.isEmpty else { return nil }
        // Longer paths first (RFC 6265 §5.4), then by name for a stable order.
        return matching.sorted { ($0.path.count, $1.name) > ($1.path.count, $0.name) }
            .map { "\($0.name)=\($0.value)" }.joined(separator: "; ")
    }

    /// Keeps the cookies of `Set-Cookie` headers from an answer for `url`. A cookie for another
    /// domain than the URL's (or a parent of it) is ignored, as browsers do.
    func receive(_ headers: [String], from url: HTTPURL) {
        guard !headers.isEmpty else { return }
        let host = url.host.lowercased()
        let now = Int64(Date().timeIntervalSince1970)
        var received: [Cookie] = []
        for header in headers {
            guard let parsed = HTTPClient.Cookie(header: header, defaultDomain: host) else { continue }
            let domain = parsed.domain ?? host
            guard host == domain || host.hasSuffix("." + domain) else { continue }
            var expires = parsed.expires.map { Int64($0.timeIntervalSince1970) }
            if let maxAge = parsed.maxAge { expires = now + Int64(maxAge) }
            received.append(
                Cookie(
                    domain: domain, includesSubdomains: domain != host, path: parsed.path,
                    secure: parsed.secure, httpOnly: parsed.httpOnly, expires: expires,
                    name: parsed.name, value: parsed.value))
        }
        state.withLock { state in
            for cookie in received {
                if let expires = cookie.expires, expires <= now {
                    state.cookies[cookie.key] = nil  // a server deletes a cookie by expiring it
                } else {
                    state.cookies[cookie.key] = cookie
                }
            }
        }
    }

    /// Writes every cookie not yet expired to `path` in the Netscape format (aria2's
    /// `--save-cookies`), readable by curl, wget and aria2. Written to a temporary file and
    /// renamed, mode 0600: cookies are credentials.
    func save(to path: String) throws(DownloadError) {
        let now = Int64(Date().timeIntervalSince1970)
        let cookies = state.withLock { Array($0.cookies.values) }
            .filter { $0.expires.map { $0 > now } ?? true }
            .sorted { ($0.domain, $0.path, $0.name) < ($1.domain, $1.path, $1.name) }
        var text = "# Netscape HTTP Cookie File\n# Written by haul.\n\n"
        for cookie in cookies {
            let domain = (cookie.httpOnly ? "#HttpOnly_" : "") + (cookie.includesSubdomains ? "." : "") + cookie.domain
            text +=
                [
                    domain, cookie.includesSubdomains ? "TRUE" : "FALSE", cookie.path, cookie.secure ? "TRUE" : "FALSE",
                    String(cookie.expires ?? 0), cookie.name, cookie.value,
                ].joined(separator: "\t") + "\n"
        }
        let temporary = path + ".haul-tmp"
        guard FileManager.default.createFile(atPath: temporary, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]),
            rename(temporary, path) == 0
        else {
            let code = errno
            unlink(temporary)
            throw .io("write cookies to", path: path, errno: code)
        }
    }

    /// The cookies of a Netscape-format file: seven tab-separated fields a line (domain,
    /// subdomains, path, secure, expiry, name, value); `#` starts a comment, except curl's
    /// `#HttpOnly_` prefix on a domain.
    static func parse(_ text: String) -> [Cookie] {
        var cookies: [Cookie] = []
        for rawLine in text.split(whereSeparator: \.isNewline) {
            var line = Substring(rawLine)
            var httpOnly = false
            if line.hasPrefix("#HttpOnly_") {
                httpOnly = true
                line = line.dropFirst("#HttpOnly_".count)
            } else if line.hasPrefix("#") || line.allSatisfy(\.isWhitespace) {
                continue
            }
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
            guard fields.count >= 7 else { continue }
            var domain = fields[0].lowercased()
            let dotted = domain.hasPrefix(".")
            if dotted { domain.removeFirst() }
            guard !domain.isEmpty else { continue }
            cookies.append(
                Cookie(
                    domain: domain, includesSubdomains: fields[1].uppercased() == "TRUE" || dotted,
                    path: fields[2].isEmpty ? "/" : String(fields[2]), secure: fields[3].uppercased() == "TRUE",
                    httpOnly: httpOnly, expires: Int64(fields[4]).flatMap { $0 == 0 ? nil : $0 },
                    name: String(fields[5]), value: fields[6...].joined(separator: "\t")))
        }
        return cookies
    }
}
