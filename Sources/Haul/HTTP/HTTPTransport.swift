import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// An answer whose head has arrived; its body streams with backpressure.
struct HTTPAnswer: Sendable {
    var head: ResponseHead
    var body: HTTPClientResponse.Body
    /// The URL after redirects.
    var url: String
    /// Every header as sent, for what ``ResponseHead`` does not keep (tus's `Upload-Offset`).
    var headers = HTTPHeaders()
}

/// The engine's only door to the network, for one download: ``PlainHTTPClient`` (or
/// AsyncHTTPClient for HTTP/2 and SOCKS proxies) with the download's proxy, TLS trust,
/// credentials, cookies and identity.
///
/// Redirects are followed here (AsyncHTTPClient's own following is off), so that cookies set
/// on the way are kept and sent on, credentials go only to the URL's own origin, and the limit
/// is the download's.
struct HTTPTransport: Sendable {
    let clients: HTTPClients
    let cookies: CookieStore
    let credentials: CredentialSource
    let network: NetworkOptions
    /// The download's URL, as given (it may carry `user:password@`).
    let origin: String
    /// Each request on a connection of its own (HTTP/1.1, even with ``NetworkOptions/http2``):
    /// the download is segmented.
    var separateConnections = false

    static func makeClient(
        stallTimeout: Duration, rateLimit: Int64? = nil,
        route: HTTPClients.Route = .init(connectTimeout: .seconds(15))
    ) -> HTTPClient {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: TimeAmount(route.connectTimeout), read: TimeAmount(stallTimeout)))
        // AsyncHTTPClient's default of 8 connections per host would cap `-x 16` at 8.
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 32)
        // A refused connection or an unknown name is one failed try, counted and waited by the
        // engine's retries; by default the pool would keep trying until the request's deadline.
        configuration.connectionPool.retryConnectionEstablishment = false
        // The engine wants the bytes as stored: a gzip'd .tar.gz must stay gzip'd.
        configuration.decompression = .disabled
        // No spans: Haul traces nothing, and with the default (no-op) tracer every request still
        // parses its URL again and sets span attributes (2 % of a list of small files).
        configuration.tracing.tracer = nil
        // HTTP/1.1 unless asked: a big body costs AsyncHTTPClient 1.7 times the CPU over HTTP/2
        // (nginx's 8 KiB DATA frames each pass through its response stream), and `-x N` is for
        // servers that hold each connection to a rate (docs/ARCHITECTURE.md, "HTTP/2").
        configuration.httpVersion = route.http2 ? .automatic : .http1Only
        if let proxy = route.proxy {
            switch proxy.kind {
            case .http:
                let authorization = proxy.user.map { HTTPClient.Authorization.basic(username: $0, password: proxy.password ?? "") }
                configuration.proxy = .server(host: proxy.host, port: proxy.port, authorization: authorization)
            case .socks5:
                configuration.proxy = .socksServer(host: proxy.host, port: proxy.port)
            }
        }
        // AsyncHTTPClient hands the body over one read at a time (its high watermark is one
        // buffer), so the read size sets the pace: NIO's default tops out at 64 KiB, which
        // keeps the network and disk threads taking turns. Reads of up to 1 MiB let them overlap.
        // Under a rate limit, reads stay near a tenth of a second's worth, so the limit paces
        // smoothly instead of in bursts of a whole read.
        let allocator = receiveAllocator(rateLimit: rateLimit)
        configuration.http1_1ConnectionDebugInitializer = { channel in
            channel.setOption(ChannelOptions.recvAllocator, value: allocator)
        }
        configuration.http2ConnectionDebugInitializer = { channel in
            channel.setOption(ChannelOptions.recvAllocator, value: allocator)
        }
        return HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
    }

    static func receiveAllocator(rateLimit: Int64?) -> AdaptiveRecvByteBufferAllocator {
        guard let rate = rateLimit else {
            return AdaptiveRecvByteBufferAllocator(minimum: 16 << 10, initial: 64 << 10, maximum: 256 << 10)
        }
        let maximum = Int(min(max(rate / 10, 16 << 10), 1 << 20))
        return AdaptiveRecvByteBufferAllocator(minimum: 1 << 10, initial: min(16 << 10, maximum), maximum: maximum)
    }

    /// Redirect statuses that carry a `Location` to follow.
    private static let redirects: Set<Int> = [301, 302, 303, 307, 308]

    /// Sends one request, following redirects, and returns when the final answer's head arrives.
    ///
    /// A request with a `body` (an upload) is not sent on to where a redirect points: its
    /// answer, the redirect included, is the caller's to judge.
    func send(
        _ method: HTTPMethod, url: String, headers: [(String, String)], body: RequestBody? = nil, stallTimeout: Duration
    ) async throws(DownloadError) -> HTTPAnswer {
        let start = URLRedaction.redact(url)
        guard var current = HTTPURL(start) else { throw .invalidRequest("malformed URL \(start)") }
        let home = Origin(current)
        if let file = network.cookieFile { try cookies.load(file) }
        let authorization = try credentials.authorization(for: origin, host: current.host, network: network)
        var method = method
        var seen: Set<String> = []
        var redirectedTo = start
        for hop in 0... {
            // The URL as given until a redirect.
            let target = hop == 0 ? start : redirectedTo
            var request = HTTPClientRequest(url: target)
            request.method = method
            request.headers = requestHeaders(
                headers, to: current, start: start, sameOrigin: hop == 0 || Origin(current) == home, authorization: authorization)
            var response = try await execute(request, url: current, body: body, stallTimeout: stallTimeout)
            if response.status == .proxyAuthenticationRequired,
                let proxy = try network.proxy.server(scheme: current.scheme, host: current.host)
            {
                await Self.discard(response.body)
                throw Self.wantsCredentials(proxy)
            }
            if response.status == .badRequest, current.scheme == "https", network.tls.certificate == nil {
                // nginx (and others) finish the handshake without the certificate they asked
                // for, then answer 400 with a page that says so: a bare "400" tells nobody why.
                // The page is read here (an error's body is never written anywhere) and handed on.
                let body = await Self.smallBody(response.body)
                if let body, String(buffer: body).contains("SSL certificate") {
                    throw TLSFailure(reason: .clientCertificateRefused).error(host: current.host)
                }
                response = HTTPClientResponse(
                    version: response.version, status: response.status, headers: response.headers,
                    body: .bytes(body ?? ByteBuffer()))
            }
            cookies.receive(response.headers["set-cookie"], from: current)
            let status = Int(response.status.code)
            guard body == nil, Self.redirects.contains(status), let location = response.headers.first(name: "location") else {
                let head = ResponseHead(status: status, reason: response.status.reasonPhrase, headers: response.headers)
                return HTTPAnswer(head: head, body: response.body, url: target, headers: response.headers)
            }
            await Self.discard(response.body)
            guard hop < network.maxRedirects else {
                throw .redirect("too many redirects (more than \(network.maxRedirects))")
            }
            guard let absolute = URL(string: location, relativeTo: URL(string: target))?.absoluteURL,
                var components = URLComponents(url: absolute, resolvingAgainstBaseURL: true),
                let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https", components.host != nil
            else {
                throw .redirect("redirected to \(URLRedaction.redact(location)), which is not an http(s) URL")
            }
            components.fragment = nil
            let next = HTTPURL(components)
            redirectedTo = components.string ?? start
            // The same URL with the same cookies again can only loop.
            guard seen.insert(redirectedTo + "\n" + (cookies.header(for: next) ?? "")).inserted else {
                throw .redirect("redirect loop")
            }
            if status == 303, method != .HEAD { method = .GET }
            current = next
        }
        throw .redirect("redirect loop")
    }

    /// A request's headers: the identity, then the caller's `given` ones, then credentials and
    /// cookies. Credentials and cookies the caller gave go to the URL's own origin only (a
    /// redirect elsewhere must not carry them, `sameOrigin` false); the store's cookies go
    /// where they match.
    private func requestHeaders(
        _ given: [(String, String)], to url: HTTPURL, start: String, sameOrigin: Bool, authorization: String?
    ) -> HTTPHeaders {
        var headers = HTTPHeaders()
        headers.add(name: "User-Agent", value: network.userAgent ?? "haul/\(HaulVersion.string)")
        if let referer = network.referer { headers.add(name: "Referer", value: referer == "*" ? start : referer) }
        for (name, value) in given { headers.replaceOrAdd(name: name, value: value) }
        if !sameOrigin {
            for name in ["Authorization", "Cookie", "Proxy-Authorization"] { headers.remove(name: name) }
        } else if let authorization, !headers.contains(name: "Authorization") {
            headers.add(name: "Authorization", value: authorization)
        }
        if let cookie = cookies.header(for: url) {
            let given = headers.first(name: "Cookie")
            headers.replaceOrAdd(name: "Cookie", value: given.map { $0 + "; " + cookie } ?? cookie)
        }
        return headers
    }

    /// Whether requests for `url` may be pipelined (``heads(_:stallTimeout:)``): straight to
    /// the server over HTTP/1.1, since neither a proxy nor HTTP/2 is asked to keep a pipeline's
    /// order.
    func pipelines(_ url: String) -> Bool {
        guard let url = HTTPURL(URLRedaction.redact(url)), url.scheme == "http" || (url.scheme == "https" && !network.http2) else {
            return false
        }
        do { return try network.proxy.server(scheme: url.scheme, host: url.host) == nil } catch { return false }
    }

    /// Asks about many URLs of one server with a `HEAD` each, pipelined on one connection
    /// (``PlainHTTPClient/heads(host:port:tls:requests:connectTimeout:)``): each with the
    /// headers ``send(_:url:headers:body:stallTimeout:)`` would give it, its own URL the origin
    /// its credentials are for, and the cookies of each answer kept. Redirects are not followed:
    /// the answer is the caller's to judge.
    ///
    /// Returns nil for a request with no answer here, for the caller to send alone: the ones
    /// after an answer that ended the connection, or all of them when the URLs are not of one
    /// server or cannot be pipelined (``pipelines(_:)``).
    ///
    /// - Throws: what kept the first answer from coming (the server down, a TLS failure, a
    ///   stall), in words, as ``send(_:url:headers:body:stallTimeout:)`` would.
    func heads(_ requests: [(url: String, headers: [(String, String)])], stallTimeout: Duration) async throws(DownloadError) -> [ResponseHead?] {
        let none = [ResponseHead?](repeating: nil, count: requests.count)
        guard let first = requests.first, pipelines(first.url), let server = HTTPURL(URLRedaction.redact(first.url)) else { return none }
        let (scheme, host, port) = (server.scheme, server.bareHost, server.effectivePort)
        var urls: [HTTPURL] = []
        var sent: [(target: String, headers: HTTPHeaders)] = []
        urls.reserveCapacity(requests.count)
        sent.reserveCapacity(requests.count)
        if let file = network.cookieFile { try cookies.load(file) }
        for request in requests {
            let start = URLRedaction.redact(request.url)
            guard let url = HTTPURL(start), url.scheme == scheme, url.bareHost == host, url.effectivePort == port else { return none }
            let authorization = try credentials.authorization(for: request.url, host: url.host, network: network)
            urls.append(url)
            sent.append((url.target, requestHeaders(request.headers, to: url, start: start, sameOrigin: true, authorization: authorization)))
        }
        let tls = scheme == "https" ? try clients.tls(for: network.tls).context : nil
        let answers: [HTTPResponseHead?]
        do {
            answers = try await clients.plain.heads(host: host, port: port, tls: tls, requests: sent, connectTimeout: network.connectTimeout)
        } catch {
            throw Self.map(error, stallTimeout: stallTimeout, host: server.host, port: port, network: network)
        }
        return zip(answers, urls).map { answer, url in
            guard let answer else { return nil }
            cookies.receive(answer.headers["set-cookie"], from: url)
            return ResponseHead(status: Int(answer.status.code), reason: answer.status.reasonPhrase, headers: answer.headers)
        }
    }

    /// One request on the client for `url`'s route, with the download's TLS settings.
    private func execute(
        _ request: HTTPClientRequest, url: HTTPURL, body: RequestBody? = nil, stallTimeout: Duration
    ) async throws(DownloadError) -> HTTPClientResponse {
        var request = request
        let scheme = url.scheme
        let proxy = try network.proxy.server(scheme: scheme, host: url.host)
        let tls = scheme == "https" ? try clients.tls(for: network.tls) : nil
        // HTTP/2 is offered only on a download's one connection (docs/ARCHITECTURE.md, "HTTP/2").
        let http2 = network.http2 && !separateConnections
        do {
            if let tls, !http2, proxy == nil || proxy?.kind == .http {
                // The tunnel's credentials go on the CONNECT, to the proxy; nothing inside the
                // tunnel is the proxy's to read.
                let tunnel = proxy.map { proxy in
                    PlainHTTPClient.Tunnel(
                        host: url.bareHost, port: url.effectivePort,
                        proxyAuthorization: proxy.user.map { CredentialSource.basic($0, proxy.password ?? "") })
                }
                return try await clients.plain.execute(
                    request.method, host: proxy?.host ?? url.bareHost, port: proxy?.port ?? url.effectivePort,
                    tunnel: tunnel, tls: tls.context, target: url.target, headers: request.headers,
                    connectTimeout: network.connectTimeout, body: body)
            }
            if scheme == "http", let proxy, proxy.kind == .http {
                // RFC 9112 §3.2.2: a request for an http:// URL goes to the proxy whole, in
                // absolute form, as curl, wget and aria2 send it. A tunnel (CONNECT) is for
                // https:// only: stock proxies refuse CONNECT to any port but 443 (squid's
                // `deny CONNECT !SSL_ports`).
                var headers = request.headers
                let host = PlainHTTPClient.hostHeader(host: url.bareHost, port: url.effectivePort)
                headers.replaceOrAdd(name: "Host", value: host)
                if let user = proxy.user {
                    headers.replaceOrAdd(name: "Proxy-Authorization", value: CredentialSource.basic(user, proxy.password ?? ""))
                }
                return try await clients.plain.execute(
                    request.method, host: proxy.host, port: proxy.port,
                    target: "http://" + host + url.target, headers: headers, connectTimeout: network.connectTimeout, body: body)
            }
            if scheme == "http", proxy == nil {
                return try await clients.plain.execute(
                    request.method, host: url.bareHost, port: url.effectivePort,
                    target: url.target, headers: request.headers, connectTimeout: network.connectTimeout, body: body)
            }
            if let body { request.body = body.asyncHTTPClientBody }
            request.tlsConfiguration = tls?.configuration
            let client = clients.client(for: .init(proxy: proxy, connectTimeout: network.connectTimeout, http2: http2))
            return try await client.execute(request, timeout: .hours(24 * 365))
        } catch {
            if var failure = TLSFailure(error), case .untrusted = failure.reason, proxy == nil {
                // Say why, when the server can be asked again directly.
                failure.reason = .untrusted(detail: await TLSFailure.diagnose(host: url.host, port: url.effectivePort))
                throw failure.error(host: url.host, ca: network.tls.caCertificate)
            }
            throw Self.map(error, stallTimeout: stallTimeout, host: url.host, port: url.effectivePort, proxy: proxy, network: network)
        }
    }

    /// The whole body of a small answer (an error page), or nil past 16 KiB.
    private static func smallBody(_ body: HTTPClientResponse.Body) async -> ByteBuffer? {
        var collected = ByteBuffer()
        do {
            for try await buffer in body {
                guard collected.readableBytes + buffer.readableBytes <= 16 << 10 else { return nil }
                collected.writeImmutableBuffer(buffer)
            }
        } catch {
            return nil
        }
        return collected
    }

    /// Reads and drops a small answer body (a redirect's, an upload's answer) so that its
    /// connection can be reused; a big one is cut off by dropping it.
    static func discard(_ body: HTTPClientResponse.Body) async {
        var left = 64 << 10
        do {
            for try await buffer in body {
                left -= buffer.readableBytes
                if left < 0 { return }
            }
        } catch {}
    }

    /// A proxy's 407: the credentials are missing or refused. Not retried.
    static func wantsCredentials(_ proxy: ProxyServer) -> DownloadError {
        let message =
            proxy.user == nil
            ? "the proxy \(proxy.host):\(proxy.port) wants credentials: give them in the proxy URL or with --proxy-user and --proxy-passwd"
            : "the proxy \(proxy.host):\(proxy.port) refused its credentials (\(proxy.user ?? ""))"
        return DownloadError(kind: .network, message: message)
    }

    /// Turns transport errors into one line a person can act on.
    static func map(
        _ error: any Error, stallTimeout: Duration, host: String = "", port: Int = 0, proxy: ProxyServer? = nil,
        network: NetworkOptions = NetworkOptions()
    ) -> DownloadError {
        if let error = error as? DownloadError { return error }
        if error is CancellationError { return .cancelled }
        let through = proxy.map { " through the proxy \($0.host):\($0.port)" } ?? ""
        if let tls = TLSFailure(error) { return tls.error(host: host, ca: network.tls.caCertificate) }
        if let error = error as? ProxyTunnelFailure {
            let named = proxy.map { "the proxy \($0.host):\($0.port)" } ?? "the proxy"
            switch error.reason {
            case .wantsCredentials:
                return proxy.map(Self.wantsCredentials) ?? .network("a proxy wants credentials")
            case .refused:
                // Not retried: the proxy's rules or its credentials say no, and will again.
                return DownloadError(kind: .network, message: "\(named) refused the tunnel to \(host):\(port) (check its rules and credentials)")
            case .noAnswer:
                return .network("\(named) did not answer")
            case .closed:
                return .network("\(named) closed the connection instead of opening a tunnel to \(host):\(port)")
            }
        }
        if let error = error as? NIOSSLError, error == .uncleanShutdown {
            return .network("the server closed the connection before the whole body arrived (without ending TLS)")
        }
        if let error = error as? HTTPClientError {
            switch error {
            case .readTimeout: return .stalled(after: stallTimeout)
            case .connectTimeout:
                return .network(
                    "cannot connect to \(host)\(through): no answer within \(network.connectTimeout.formattedSeconds) (--connect-timeout)",
                    reason: .connectTimeout)
            case .invalidURL, .emptyHost, .emptyScheme:
                return .invalidRequest("unsupported or malformed URL")
            case .remoteConnectionClosed: return .network("the server closed the connection")
            case .cancelled: return .cancelled
            case .socksHandshakeTimeout:
                return .network("the SOCKS proxy \(proxy.map { "\($0.host):\($0.port)" } ?? "") did not answer")
            case .httpProxyHandshakeTimeout:
                return .network("the proxy \(proxy.map { "\($0.host):\($0.port)" } ?? "") did not answer")
            case .proxyAuthenticationRequired:
                return proxy.map(Self.wantsCredentials) ?? .network("a proxy wants credentials")
            case .invalidProxyResponse:
                // Not retried: the proxy's rules or its credentials say no, and will again.
                let through = proxy.map { "the proxy \($0.host):\($0.port)" } ?? "the proxy"
                return DownloadError(kind: .network, message: "\(through) refused the tunnel to \(host):\(port) (check its rules and credentials)")
            default:
                return .network(Self.words(error))
            }
        }
        if let error = error as? ChannelError {
            switch error {
            case .connectTimeout:
                return .network(
                    "cannot connect to \(host)\(through): no answer within \(network.connectTimeout.formattedSeconds) (--connect-timeout)",
                    reason: .connectTimeout)
            case .eof, .ioOnClosedChannel, .alreadyClosed, .outputClosed:
                return .network("the server closed the connection")
            default:
                return .network(Self.words(error))
            }
        }
        if error is ServerClosedConnection { return .network("the server closed the connection") }
        if let error = error as? HTTPParserError {
            // The parser's word for a connection that ended inside a body (shorter than its
            // Content-Length): not a malformed answer, a cut one, worth another try.
            if error == .invalidEOFState { return .network("the server closed the connection before the whole body arrived") }
            return .network("the server's answer is not valid HTTP/1.1")
        }
        if let error = error as? IOError {
            return .network("cannot connect to \(host)\(through): \(String(cString: strerror(error.errnoCode)))")
        }
        if let error = error as? NIOConnectionError {
            if let first = error.connectionErrors.first?.error as? IOError {
                let target = proxy.map { "the proxy \($0.host):\($0.port)" } ?? host
                return .network("cannot connect to \(target): \(String(cString: strerror(first.errnoCode)))")
            }
            if error.dnsAAAAError != nil || error.dnsAError != nil {
                return .network("cannot resolve the name \(error.host)", reason: .nameNotResolved)
            }
            return .network("cannot connect to \(error.host):\(error.port)")
        }
        if let error = error as? SocketAddressError {
            switch error {
            case .unknown(let name, _): return .network("cannot resolve the name \(name)", reason: .nameNotResolved)
            default: return .network("cannot resolve \(host)", reason: .nameNotResolved)
            }
        }
        return .network(Self.words(error))
    }

    /// An error's own description without Swift's type dump: the case name, spaced out.
    static func words(_ error: any Error) -> String {
        var text = String(describing: error)
        if let paren = text.firstIndex(of: "(") { text = String(text[..<paren]) }
        text = text.replacingOccurrences(of: "HTTPClientError.", with: "")
        var spaced = ""
        for character in text {
            if character.isUppercase, !spaced.isEmpty { spaced.append(" ") }
            spaced.append(Character(character.lowercased()))
        }
        return spaced
    }
}

/// Scheme, host and port: where credentials may go.
struct Origin: Equatable {
    var scheme: String
    var host: String
    var port: Int

    init(_ url: HTTPURL) {
        scheme = url.scheme
        host = url.host.lowercased()
        port = url.effectivePort
    }
}

/// The version reported in the User-Agent and by `haul --version`.
public enum HaulVersion {
    /// Semantic version string.
    public static let string = "0.1.0"
}
