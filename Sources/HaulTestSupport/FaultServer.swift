import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// An HTTP/1.1 server on 127.0.0.1 that serves byte content with injected faults, for tests.
///
/// ```swift
/// let server = try await FaultServer.start()
/// var route = Route(content: bytes)
/// route.failFirst = 1
/// server.serve("/a.bin", route)
/// // … download server.url("/a.bin") …
/// #expect(server.stats("/a.bin").getCount == 2)
/// try await server.shutdown()
/// ```
public final class FaultServer: Sendable {
    /// The port the server listens on.
    public let port: Int
    /// The address it listens on.
    public let host: String
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    private let routes: SharedRouteTable
    private let isShutDown = Mutex(false)

    private init(port: Int, host: String, group: MultiThreadedEventLoopGroup, channel: any Channel, routes: SharedRouteTable) {
        self.port = port
        self.host = host
        self.group = group
        self.channel = channel
        self.routes = routes
    }

    /// Binds `host` (127.0.0.1, or `::1` for IPv6) on a free port and starts serving.
    ///
    /// - Throws: The bind error if no port could be bound.
    public static func start(host: String = "127.0.0.1") async throws -> FaultServer {
        // One thread of its own per server: shutting the group down closes every connection,
        // stalled ones included, without tracking them.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let routes = SharedRouteTable()
        do {
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.backlog, value: 256)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                // Trickled slices are tiny; Nagle plus delayed ACKs would hold them back ~40 ms.
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let decoder = HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes)
                        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(decoder))
                        try channel.pipeline.syncOperations.addHandler(FaultConnectionHandler(routes: routes))
                    }
                }
                .bind(host: host, port: 0)
                .get()
            guard let port = channel.localAddress?.port else {
                throw ChannelError.unknownLocalAddress
            }
            return FaultServer(port: port, host: host, group: group, channel: channel, routes: routes)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    /// Starts a server, runs `body` with it, and shuts the server down however `body` ends.
    public static func withServer<Result>(
        isolation: isolated (any Actor)? = #isolation,
        _ body: (FaultServer) async throws -> Result
    ) async throws -> Result {
        let server = try await start()
        do {
            let result = try await body(server)
            try await server.shutdown()
            return result
        } catch {
            try? await server.shutdown()
            throw error
        }
    }

    /// "http://127.0.0.1:PORT" (or "http://[::1]:PORT") + path (path starts with "/").
    public func url(_ path: String) -> String {
        "http://\(host.contains(":") ? "[\(host)]" : host):\(port)\(path)"
    }

    /// Installs or replaces the route for an exact path (query string ignored when matching).
    ///
    /// Replacing restarts the route's fault counters (`failFirst`, the "first GET" faults);
    /// its statistics are kept.
    public func serve(_ path: String, _ route: Route) {
        routes.withLock { $0.serve(path, route) }
    }

    /// Mutates the route in place (e.g. change content between two requests); ignored for an unknown path.
    public func update(_ path: String, _ change: (inout Route) -> Void) {
        routes.withLock { $0.update(path, change) }
    }

    /// The ETag and Last-Modified the route of `path` sends now.
    public func validators(_ path: String) -> (etag: String?, lastModified: String?) {
        routes.withLock { $0.validators(path) }
    }

    /// What the server saw and sent for a path.
    public func stats(_ path: String) -> RouteStats {
        routes.withLock { $0.stats(path) }
    }

    /// The most content bodies (200/206 answers) the server was sending at once, across all
    /// paths: how many connections a client really used.
    public var peakConcurrentBodies: Int {
        routes.withLock { $0.peakBodiesInFlight }
    }

    /// Content body bytes written to sockets across all paths.
    public var totalBodyBytesSent: Int {
        routes.withLock { $0.totalBodyBytesSent }
    }

    /// Stops listening, closes every connection (stalled ones too) and stops the server's thread.
    ///
    /// Calling it again does nothing.
    public func shutdown() async throws {
        let alreadyDown = isShutDown.withLock { down in
            defer { down = true }
            return down
        }
        guard !alreadyDown else { return }
        try? await channel.close()
        try await group.shutdownGracefully()
    }
}
