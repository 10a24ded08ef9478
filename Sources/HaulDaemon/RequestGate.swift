import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import Synchronization

/// Refuses what a browser could send on behalf of another site, before any route runs.
///
/// - The `Host` must be exactly one of the daemon's own names, port included
///   (``DaemonNames``): a DNS-rebinding page reaches the daemon under its own domain name,
///   never under one of these.
/// - An `Origin` must be the daemon's own (`http://` and one of those names), unless
///   `--rpc-allow-origin-all`. `Origin: null` (a sandboxed frame, a `file:` page) is another origin.
/// - `/jsonrpc` and `/metrics` refuse a request that the browser's fetch metadata marks as sent by another
///   site (`Sec-Fetch-Site: cross-site` or `same-site`): that covers `<img>`, `<script>` and
///   form loads, which carry no `Origin`.
///
/// The GET form of `/jsonrpc` is read-only besides (see ``Aria2RPC/readOnlyMethods``).
struct RequestGate: RouterMiddleware {
    typealias Context = DaemonRequestContext
    let names: DaemonNames
    let allowOriginAll: Bool

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if allowOriginAll, request.method == .options {
            try checkHost(request)
            var headers: HTTPFields = [
                .accessControlAllowOrigin: "*", .accessControlAllowMethods: "POST, GET, OPTIONS",
                .accessControlMaxAge: "1728000",
            ]
            if let asked = request.headers[.accessControlRequestHeaders] { headers[.accessControlAllowHeaders] = asked }
            return Response(status: .ok, headers: headers)
        }
        do { try check(request) } catch {
            // Said once on the daemon's side too: the page's user sees only that it failed.
            context.logger.notice("refused \(request.method) \(request.uri.path) from \(context.remoteAddress?.ipAddress ?? "?"): \(error.body ?? "")")
            throw error
        }
        var response = try await next(request, context)
        if allowOriginAll { response.headers[.accessControlAllowOrigin] = "*" }
        return response
    }

    /// Throws a 403 that says why, for a request a web page of another site could have sent.
    func check(_ request: Request) throws(HTTPError) {
        if let reason = refusal(
            host: request.head.authority, origin: request.headers[.origin], path: request.uri.path,
            fetchSite: request.headers[.secFetchSite])
        {
            throw HTTPError(.forbidden, message: reason)
        }
    }

    func checkHost(_ request: Request) throws(HTTPError) {
        if let reason = refusal(host: request.head.authority) { throw HTTPError(.forbidden, message: reason) }
    }

    /// Why a request with these headers is refused (answered `403`), or nil when it is not.
    /// Shared by the HTTP routes and the WebSocket handshake (``WebSocketHandshakeGate``).
    func refusal(host: String?, origin: String?, path: String, fetchSite: String?) -> String? {
        if let reason = refusal(host: host) { return reason }
        if allowOriginAll { return nil }
        if let origin, !names.isOwn(origin: origin) {
            return "requests from web pages at \(origin) are refused; start the daemon with --rpc-allow-origin-all to allow them"
        }
        if path.hasPrefix("/jsonrpc") || path == "/metrics", let fetchSite, fetchSite == "cross-site" || fetchSite == "same-site" {
            return "requests sent by web pages of another site are refused; start the daemon with --rpc-allow-origin-all to allow them"
        }
        return nil
    }

    func refusal(host: String?) -> String? {
        let host = host ?? ""
        guard names.accepts(host: host) else {
            return "Host \(host.isEmpty ? "(none)" : host) refused: this daemon answers to \(names.description) only (add a name with --rpc-allow-host)"
        }
        return nil
    }
}

extension HTTPField.Name {
    /// Fetch metadata (W3C): where the request came from, as the browser saw it.
    static let secFetchSite = HTTPField.Name("Sec-Fetch-Site")!
}

/// The names a client may use to reach the daemon, each with the port: `127.0.0.1`,
/// `localhost` and `[::1]`, the listen address, for a wildcard address the machine's own
/// addresses and host name, and the names given with `--rpc-allow-host`. Compared exactly
/// (case-insensitively), never by prefix.
final class DaemonNames: Sendable, CustomStringConvertible {
    private let hosts: [String]
    private let extra: [String]
    private let port = Mutex(0)
    private let accepted = Mutex<Set<String>>([])

    /// - Parameters:
    ///   - address: the listen address.
    ///   - allowed: more names, each `HOST` (with the daemon's port) or `HOST:PORT`.
    init(address: String, allowed: [String] = []) {
        var hosts = ["127.0.0.1", "localhost", "::1"]
        switch address {
        case "0.0.0.0", "::", "":
            hosts += Self.localAddresses() + Self.hostNames()
        default:
            hosts.append(address)
        }
        self.hosts = hosts.map(Self.bracketed)
        extra = allowed.map { $0.lowercased() }
    }

    /// Called once the listener knows its port (0 asks for a free one).
    func setPort(_ port: Int) {
        self.port.withLock { $0 = port }
        var set = Set<String>()
        for host in hosts {
            set.insert("\(host):\(port)".lowercased())
            // A browser leaves out the default port.
            if port == 80 { set.insert(host.lowercased()) }
        }
        for name in extra {
            set.insert(Self.hasPort(name) ? name : "\(name):\(port)")
            if port == 80, !Self.hasPort(name) { set.insert(name) }
        }
        accepted.withLock { $0 = set }
    }

    func accepts(host: String) -> Bool {
        accepted.withLock { $0.contains(host.lowercased()) }
    }

    /// Whether an `Origin` header names the daemon itself.
    func isOwn(origin: String) -> Bool {
        let lowered = origin.lowercased()
        guard lowered.hasPrefix("http://") else { return false }
        return accepts(host: String(lowered.dropFirst("http://".count)))
    }

    var description: String {
        let port = port.withLock { $0 }
        return (hosts.prefix(4).map { "\($0):\(port)" } + extra).joined(separator: ", ")
    }

    static func bracketed(_ host: String) -> String {
        host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
    }

    static func hasPort(_ name: String) -> Bool {
        if name.hasPrefix("[") { return name.contains("]:") }
        return name.contains(":")
    }

    /// Every address of this machine's interfaces.
    static func localAddresses() -> [String] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(list) }
        var addresses: [String] = []
        for entry in sequence(first: first, next: { $0.pointee.ifa_next }) {
            guard let address = entry.pointee.ifa_addr else { continue }
            let family = Int32(address.pointee.sa_family)
            guard family == AF_INET || family == AF_INET6 else { continue }
            var buffer = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            let length = socklen_t(family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
            guard getnameinfo(address, length, &buffer, socklen_t(buffer.count), nil, 0, NI_NUMERICHOST) == 0 else { continue }
            let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            // A link-local IPv6 address carries its zone (`fe80::1%eth0`); browsers cannot send that.
            if !text.contains("%") { addresses.append(text) }
        }
        return addresses
    }

    /// The machine's host name, and with `.local` for mDNS.
    static func hostNames() -> [String] {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return [] }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? [] : [name, name + ".local"]
    }
}
