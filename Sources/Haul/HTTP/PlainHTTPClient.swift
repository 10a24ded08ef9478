import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

/// Requests over HTTP/1.1 (their bodies, if any, streamed with backpressure), on NIO channels with a keep-alive pool of its own:
/// plain HTTP straight to the server or to an HTTP proxy (in absolute form), and HTTPS straight
/// to the server or through an HTTP proxy's tunnel (`CONNECT`), with NIOSSL's handler in front
/// of the same HTTP handlers. The path of nearly every request: HTTP/2 and SOCKS proxies stay
/// with AsyncHTTPClient.
///
/// AsyncHTTPClient spends more per request than a small file costs to move: a transaction
/// with its state machines, a task to register its cancellation, a deadline timer, a read
/// timer armed and cancelled for every read, and an async producer for the body. Here a
/// request is one exchange object and a write; the body parts of a small answer are read
/// without a continuation; and stalls and idle connections are watched by one timer per
/// connection.
final class PlainHTTPClient: Sendable {
    /// What a connection is for: connections with equal keys serve each other's requests.
    struct Key: Hashable, Sendable {
        /// Where the TCP connection goes: the server, or the proxy.
        var host: String
        var port: Int
        /// The server behind the proxy at ``host``:``port``, reached through a tunnel.
        var tunnel: Tunnel?
        /// TLS with the server.
        var tls: TLS?

        /// The server the requests are for.
        var server: (host: String, port: Int) {
            guard let tunnel else { return (host, port) }
            return (tunnel.host, tunnel.port)
        }
    }

    /// A server reached through an HTTP proxy's `CONNECT`.
    struct Tunnel: Hashable, Sendable {
        var host: String
        var port: Int
        /// The `Proxy-Authorization` of the `CONNECT`: tunnels opened with other credentials
        /// are other connections, so credentials the proxy would refuse are never passed over.
        var proxyAuthorization: String?
    }

    /// The TLS settings of a connection: a context made once per set of ``TLSOptions`` (by
    /// ``HTTPClients``), so the same context means the same trust and client certificate.
    struct TLS: Hashable, Sendable {
        let context: NIOSSLContext

        static func == (left: TLS, right: TLS) -> Bool { left.context === right.context }
        func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(context)) }
    }

    private struct Pool {
        var idle: [Key: [PlainHTTPConnection]] = [:]
        var live: [ObjectIdentifier: PlainHTTPConnection] = [:]
        var closed = false
        /// Connections made so far, all kinds.
        var opened = 0
    }

    /// How long a connection may wait in the pool (AsyncHTTPClient's setting in Haul).
    static let idleTimeout: TimeAmount = .seconds(60)
    /// Idle connections kept per server; more are closed as they come back.
    static let idleLimit = 32

    private let group: any EventLoopGroup
    private let stallTimeout: Duration
    private let allocator: AdaptiveRecvByteBufferAllocator
    private let pool = Mutex(Pool())

    init(group: any EventLoopGroup, stallTimeout: Duration, allocator: AdaptiveRecvByteBufferAllocator) {
        self.group = group
        self.stallTimeout = stallTimeout
        self.allocator = allocator
    }

    /// Sends a request and returns when its answer's head has arrived; the body streams.
    ///
    /// A kept-alive connection the server closed meanwhile fails before any byte of an answer;
    /// the request then goes again on another, as browsers and curl do for requests without a
    /// body. A request with a body goes again too: ``RequestBody`` is sent anew from its start,
    /// unless its method is not idempotent (`POST`, `PATCH`; RFC 9110 §9.2.2): the server may
    /// have taken part of it, and an upload's `PATCH` sent again from an offset the server has
    /// passed is a conflict (NIOResumableUpload drops the whole upload for it). The caller asks
    /// the server where it stands instead.
    ///
    /// - Parameters:
    ///   - host: where the connection goes: the server, or the proxy for a tunnel or for a
    ///     request in absolute form.
    ///   - tunnel: the server behind the proxy at `host`, reached through `CONNECT`.
    ///   - tls: TLS with the server.
    ///   - connectTimeout: for the TCP connection, the proxy's answer to `CONNECT` and the TLS
    ///     handshake together.
    ///   - body: the request's body, sent (with its `Content-Length`) before the answer is awaited.
    func execute(
        _ method: HTTPMethod, host: String, port: Int, tunnel: Tunnel? = nil, tls: TLS? = nil,
        target: String, headers: HTTPHeaders, connectTimeout: Duration, body: RequestBody? = nil
    ) async throws -> HTTPClientResponse {
        let key = Key(host: host, port: port, tunnel: tunnel, tls: tls)
        var head = HTTPRequestHead(version: .http1_1, method: method, uri: target, headers: headers)
        if !head.headers.contains(name: "Host") {
            let server = key.server
            head.headers.add(name: "Host", value: Self.hostHeader(host: server.host, port: server.port, defaultPort: tls == nil ? 80 : 443))
        }
        if let body { head.headers.replaceOrAdd(name: "Content-Length", value: String(body.length)) }
        while true {
            let (connection, pooled) = try await leaseOrConnect(key, timeout: connectTimeout)
            let exchange = PlainHTTPExchange(connection: connection)
            connection.send(head, for: exchange, hasBody: body != nil)
            do {
                if let body { try await Self.write(body, on: connection, exchange: exchange) }
                let answer = try await exchange.head()
                return HTTPClientResponse(
                    version: answer.version, status: answer.status, headers: answer.headers,
                    body: .stream(PlainHTTPBody(exchange)))
            } catch {
                let replayable = body == nil || (method != .POST && method != .PATCH)
                let stale =
                    pooled && replayable && !exchange.answered && !(error is CancellationError) && !(error is DownloadError)
                if !stale { throw error }
                connection.close()
            }
        }
    }

    /// Sends `HEAD` requests pipelined on one kept-alive connection, in one write, and returns
    /// their answers' heads in order (RFC 9112 §9.3.2), as lftp asks a server about many files.
    /// A request the connection did not answer (the server closed it first: it does not take
    /// pipelined requests, or went away) has nil, for the caller to ask again alone.
    ///
    /// A kept-alive connection the server closed meanwhile, before any answer, is replaced once,
    /// as ``execute(_:host:port:tunnel:tls:target:headers:connectTimeout:body:)`` does.
    ///
    /// - Parameters:
    ///   - host: the server (never a proxy: a proxy in between may not keep the order).
    ///   - requests: each one's target and headers.
    func heads(
        host: String, port: Int, tls: TLS? = nil, requests: [(target: String, headers: HTTPHeaders)], connectTimeout: Duration
    ) async throws -> [HTTPResponseHead?] {
        guard !requests.isEmpty else { return [] }
        let key = Key(host: host, port: port, tls: tls)
        let hostHeader = Self.hostHeader(host: host, port: port, defaultPort: tls == nil ? 80 : 443)
        let heads = requests.map { request in
            var head = HTTPRequestHead(version: .http1_1, method: .HEAD, uri: request.target, headers: request.headers)
            if !head.headers.contains(name: "Host") { head.headers.add(name: "Host", value: hostHeader) }
            return head
        }
        while true {
            let (connection, pooled) = try await leaseOrConnect(key, timeout: connectTimeout)
            let exchanges = heads.map { _ in PlainHTTPExchange(connection: connection) }
            connection.send(pipelined: heads, for: exchanges)
            var answers: [HTTPResponseHead?] = []
            answers.reserveCapacity(heads.count)
            var stale = false
            for exchange in exchanges {
                do {
                    answers.append(try await exchange.head())
                    // A HEAD's answer has no body: its end follows its head.
                    while try await exchange.next() != nil {}
                } catch {
                    if error is CancellationError { throw error }
                    guard answers.isEmpty else { break }  // the rest are the caller's to ask again
                    stale = pooled && !exchange.answered && !(error is DownloadError)
                    if !stale { throw error }
                    break
                }
            }
            if stale {
                connection.close()
                continue
            }
            return answers + Array(repeating: nil, count: heads.count - answers.count)
        }
    }

    /// Writes `body`: from the connection's loop while the body reads without waiting
    /// (``RequestBody/readNow``), else one chunk read while the one before is being written
    /// (two at most in flight: memory stays flat whatever the body's length).
    ///
    /// A server that answers before taking the whole body (an error, typically) and then
    /// stops reading is heard out: its answer is what the caller gets. A chunk that cannot be
    /// read (the file, the rate limiter's cancellation) closes the connection and is thrown.
    ///
    /// Not `sendfile(2)`: measured on loopback against nginx, the server spent a fifth more CPU
    /// taking a file's pages than copied bytes, and the upload took longer.
    private static func write(_ body: RequestBody, on connection: PlainHTTPConnection, exchange: PlainHTTPExchange) async throws {
        var sent: Int64 = 0
        var pending: EventLoopFuture<Void>?
        // The chunk `pending` carries, and the one before it, written already: its memory is
        // read into next (NIO holds no reference to a buffer once its write completed).
        var inFlight: ByteBuffer?
        var spare: ByteBuffer?
        while sent < body.length {
            if body.readNow != nil {
                do {
                    sent = try await connection.pump(body, from: sent)
                } catch {
                    connection.close()
                    if exchange.answered { return }
                    if Task.isCancelled { throw DownloadError.cancelled }
                    throw error
                }
                if sent >= body.length { break }
            }
            let chunk: ByteBuffer
            do {
                chunk = try await body.chunk(sent, spare.take())
                guard chunk.readableBytes > 0 else { throw RequestBodyEndedEarly() }
            } catch {
                connection.close()
                exchange.fail(error)
                throw error
            }
            sent += Int64(chunk.readableBytes)
            spare = inFlight.take()
            inFlight = chunk
            let written = connection.write(.body(.byteBuffer(chunk)))
            do { try await pending?.get() } catch {
                connection.close()
                if exchange.answered { return }
                throw error
            }
            pending = written
        }
        do {
            try await pending?.get()
            try await connection.write(.end(nil)).get()
        } catch {
            connection.close()
            if exchange.answered { return }
            throw error
        }
    }

    /// The `Host` header for `host` (an IPv6 address in brackets) and `port` (left out when it
    /// is the scheme's `defaultPort`).
    static func hostHeader(host: String, port: Int, defaultPort: Int? = 80) -> String {
        let name = host.utf8.contains(UInt8(ascii: ":")) ? "[\(host)]" : host
        return port == defaultPort ? name : "\(name):\(port)"
    }

    /// How many connections the client has made: a test's proof of the path a request took.
    var connectionsOpened: Int { pool.withLock { $0.opened } }

    /// Closes every connection.
    func shutdown() {
        let all = pool.withLock { pool in
            pool.closed = true
            pool.idle = [:]
            defer { pool.live = [:] }
            return Array(pool.live.values)
        }
        for connection in all { connection.close() }
    }

    /// An idle connection for `key` from the pool (`pooled`: the server may have closed it
    /// meanwhile), else a new one.
    private func leaseOrConnect(_ key: Key, timeout: Duration) async throws -> (connection: PlainHTTPConnection, pooled: Bool) {
        if let pooled = lease(key) { return (pooled, true) }
        return (try await connect(key, timeout: timeout), false)
    }

    private func lease(_ key: Key) -> PlainHTTPConnection? {
        pool.withLock { pool in
            while let connection = pool.idle[key]?.popLast() {
                if connection.isActive { return connection }
            }
            return nil
        }
    }

    private func release(_ connection: PlainHTTPConnection) {
        let kept = pool.withLock { pool in
            guard !pool.closed, pool.live[ObjectIdentifier(connection)] != nil,
                pool.idle[connection.key, default: []].count < Self.idleLimit
            else { return false }
            pool.idle[connection.key, default: []].append(connection)
            return true
        }
        if !kept { connection.close() }
    }

    private func forget(_ connection: PlainHTTPConnection) {
        pool.withLock { pool in
            pool.live[ObjectIdentifier(connection)] = nil
            pool.idle[connection.key]?.removeAll { $0 === connection }
        }
    }

    private func connect(_ key: Key, timeout: Duration) async throws -> PlainHTTPConnection {
        // The loop the asking task runs on, when it runs on one: its reads then wake no other thread.
        let loop = MultiThreadedEventLoopGroup.currentEventLoop ?? group.next()
        let (allocator, stallTimeout) = (self.allocator, self.stallTimeout)
        let deadline = NIODeadline.now() + TimeAmount(timeout)
        let release: @Sendable (PlainHTTPConnection) -> Void = { [weak self] in self?.release($0) }
        let forget: @Sendable (PlainHTTPConnection) -> Void = { [weak self] in self?.forget($0) }
        let future = ClientBootstrap(group: loop)
            .connectTimeout(TimeAmount(timeout))
            .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .channelOption(ChannelOptions.autoRead, value: false)
            .channelOption(ChannelOptions.recvAllocator, value: allocator)
            // Two reads per wake-up, not NIO's four: with the exchange's watermark, what one
            // connection holds stays near half a MiB (measured: 4 connections of a 1 GiB
            // download peaked 5 MiB lower and used less CPU than with four reads).
            .channelOption(ChannelOptions.maxMessagesPerRead, value: 2)
            .connect(host: key.host, port: key.port)
            .flatMap { channel in
                Self.secure(channel, key, deadline: deadline).map { channel }.flatMapErrorThrowing { error in
                    channel.close(promise: nil)
                    throw error
                }
            }
            .flatMapThrowing { channel in
                let handler = PlainHTTPHandler(
                    stallTimeout: stallTimeout, idleTimeout: Self.idleTimeout,
                    release: release, forget: forget)
                let connection = PlainHTTPConnection(channel: channel, key: key, handler: handler)
                handler.connection = connection
                try channel.pipeline.syncOperations.addHTTPClientHandlers()
                try channel.pipeline.syncOperations.addHandler(handler)
                return connection
            }
        let connection = try await Self.cancellably(future) { $0.close() }
        let open = pool.withLock { pool in
            if pool.closed { return false }
            pool.opened += 1
            pool.live[ObjectIdentifier(connection)] = connection
            return true
        }
        guard open, connection.isActive else {
            connection.close()
            throw open ? ServerClosedConnection() : CancellationError()
        }
        return connection
    }

    /// Opens the tunnel, then TLS, on a new connection, as `key` asks.
    private static func secure(_ channel: any Channel, _ key: Key, deadline: NIODeadline) -> EventLoopFuture<Void> {
        var ready = channel.eventLoop.makeSucceededVoidFuture()
        if let tunnel = key.tunnel {
            ready = ProxyTunnelHandler.open(tunnel, on: channel, deadline: deadline)
        }
        if let tls = key.tls {
            let serverName = key.server.host
            ready = ready.flatMap { TLSHandshakeHandler.start(on: channel, context: tls.context, serverName: serverName, deadline: deadline) }
        }
        return ready
    }

    /// Waits for `future` unless the task is cancelled first; what it brings after that goes
    /// to `discard`.
    private static func cancellably<Value: Sendable>(
        _ future: EventLoopFuture<Value>,
        discard: @escaping @Sendable (Value) -> Void
    ) async throws -> Value {
        let waiter = OnceContinuation<Value>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                waiter.set(continuation)
                future.whenComplete { result in
                    if !waiter.resume(with: result), case .success(let value) = result { discard(value) }
                }
            }
        } onCancel: {
            _ = waiter.resume(with: .failure(CancellationError()))
        }
    }
}

/// A continuation resumed by whichever comes first: the answer or the cancellation (which
/// may come before the continuation exists).
private final class OnceContinuation<Value: Sendable>: Sendable {
    private enum State {
        case idle
        case waiting(CheckedContinuation<Value, any Error>)
        case early(Result<Value, any Error>)
        case done
    }

    private let state = Mutex(State.idle)

    func set(_ continuation: CheckedContinuation<Value, any Error>) {
        let early = state.withLock { state -> Result<Value, any Error>? in
            if case .early(let result) = state {
                state = .done
                return result
            }
            state = .waiting(continuation)
            return nil
        }
        if let early { continuation.resume(with: early) }
    }

    /// Whether this result is the one that counted.
    func resume(with result: Result<Value, any Error>) -> Bool {
        let continuation = state.withLock { state -> CheckedContinuation<Value, any Error>?? in
            switch state {
            case .idle:
                state = .early(result)
                return .some(nil)
            case .waiting(let continuation):
                state = .done
                return .some(continuation)
            case .early, .done:
                return nil
            }
        }
        guard let continuation else { return false }
        continuation?.resume(with: result)
        return true
    }
}
