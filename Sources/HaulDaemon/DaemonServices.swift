import Foundation
import Haul
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

/// The daemon's HTTP and WebSocket listener. On shutdown it stops taking connections, lets
/// requests in flight finish for a moment, then closes whatever a client keeps open.
final class Listener: Service {
    let configuration: Daemon.Configuration
    let rpc: Aria2RPC
    let notifier: Notifier
    let metrics: DaemonMetrics
    let logger: Logger
    let onRunning: @Sendable (DaemonEndpoint) -> Void
    let names: DaemonNames
    let connections = DaemonConnections()
    private let listening = Mutex(false)

    /// How long requests in flight may take once the daemon is stopping.
    static let grace: Duration = .seconds(2)

    init(
        configuration: Daemon.Configuration, rpc: Aria2RPC, notifier: Notifier, metrics: DaemonMetrics, logger: Logger,
        onRunning: @escaping @Sendable (DaemonEndpoint) -> Void
    ) {
        self.configuration = configuration
        self.rpc = rpc
        self.notifier = notifier
        self.metrics = metrics
        self.logger = logger
        self.onRunning = onRunning
        names = DaemonNames(address: configuration.address, allowed: configuration.allowedHosts)
    }

    /// Whether it got as far as listening (a failure before that is a bind failure).
    var isListening: Bool { listening.withLock { $0 } }

    func run() async throws {
        let gate = RequestGate(names: names, allowOriginAll: configuration.allowOriginAll)
        let router = DaemonRoutes.router(rpc: rpc, gate: gate, metrics: metrics)
        let webSocketResponder = DaemonRoutes.webSocketRouter(rpc: rpc, notifier: notifier, gate: gate).buildResponder()
        let channelConfiguration = HTTP1WebSocketUpgradeChannel.Configuration(
            http1: .init(idleTimeout: .seconds(60)), ws: .init(maxFrameSize: 1 << 20))
        let (connections, logger) = (connections, logger)
        let server = HTTPServerBuilder { responder in
            connections.tracking(
                WebSocketHandshakeGate.guarding(
                    HTTP1WebSocketUpgradeChannel(
                        responder: responder, webSocketResponder: webSocketResponder, configuration: channelConfiguration),
                    gate: gate, logger: logger))
        }
        let configuration = configuration
        let app = Application(
            router: router, server: server,
            configuration: .init(address: .hostname(configuration.address, port: configuration.port), serverName: "haul"),
            onServerRunning: { [self] channel in
                let port = channel.localAddress?.port ?? configuration.port
                names.setPort(port)
                listening.withLock { $0 = true }
                let endpoint = DaemonEndpoint(pid: getpid(), address: configuration.address, port: port, secret: configuration.secret)
                do { try endpoint.write(stateDirectory: configuration.stateDirectory) } catch {
                    logger.error(
                        "cannot write \(DaemonEndpoint.path(in: configuration.stateDirectory)): \(error); haul add and haul ls will not find this daemon")
                }
                onRunning(endpoint)
            },
            logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.run() }
            group.addTask {
                // Until the listener is told to stop; cancelled when it ended by itself.
                try await gracefulShutdown()
                try await Task.sleep(for: Self.grace)
                if connections.count > 0 { self.logger.notice("stopping: closing \(connections.count) client connection(s) still open") }
                connections.closeAll()
            }
            _ = try await group.next()
            group.cancelAll()
        }
    }
}

/// On shutdown, first of all stops every transfer and saves its state (or when cancelled,
/// which is how the group ends after a failure elsewhere).
struct ManagerService: Service {
    let manager: DownloadManager
    let downloader: Downloader

    func run() async throws {
        try? await gracefulShutdown()
        await manager.shutdown()
        try await downloader.shutdown()
    }
}

/// aria2's `shutdown` method: once its answer has gone out, this service returns, which
/// shuts the group down gracefully.
final class ShutdownRequests: Service {
    private let stream: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation

    init() {
        (stream, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    func request() { continuation.yield() }

    func run() async throws {
        for await _ in stream.cancelOnGracefulShutdown() {
            // Let the answer to `shutdown` reach its client first.
            try await Task.sleep(for: .milliseconds(100))
            return
        }
    }
}
