import Foundation
import Haul
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

/// `haul daemon`: a ``DownloadManager`` on the shared store, driven over aria2's JSON-RPC
/// (HTTP POST and WebSocket on `/jsonrpc`), with a web page at `/`.
///
/// SIGTERM and SIGINT stop every transfer, save its ranges, and return; the downloads that
/// were running continue at the next start, as after `kill -9`.
public enum Daemon {
    public struct Configuration: Sendable {
        /// The state folder (store, lock, `daemon.json`).
        public var stateDirectory: String
        /// The address to listen on; anything but loopback needs a ``secret``.
        public var address = "127.0.0.1"
        /// The port; 0 picks a free one (written to `daemon.json`).
        public var port = 6800
        /// aria2's `--rpc-secret`: every call must start with `token:SECRET`.
        public var secret: String?
        /// Answer web pages from any origin (aria2's `--rpc-allow-origin-all`); otherwise a
        /// request from another origin's page is refused.
        public var allowOriginAll = false
        /// Where downloads go without a `dir` option.
        public var directory: String
        public var maxConcurrentDownloads = 5
        public var maxConnectionsPerHost = 16
        /// Connections per download (aria2's `split`).
        public var connections = 4
        /// A rate limit shared by every download (aria2's `--max-overall-download-limit`).
        public var rateLimit: Int64?
        public var stallTimeout: Duration = .seconds(30)
        /// aria2's `--on-download-complete` and `--on-download-error`.
        public var onDownloadComplete: String?
        public var onDownloadError: String?

        public init(stateDirectory: String, directory: String) {
            self.stateDirectory = stateDirectory
            self.directory = directory
        }

        var isLoopback: Bool { Daemon.isLoopback(address) }
    }

    /// The queue in the store that the daemon's downloads live in.
    public static let queue = "daemon"

    /// A one-line reason the daemon cannot start.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    static func isLoopback(_ host: String) -> Bool {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return bare == "localhost" || bare == "::1" || bare.hasPrefix("127.")
    }

    /// Runs until SIGTERM, SIGINT or aria2's `shutdown` method. Calls `onRunning` once it listens.
    public static func run(_ configuration: Configuration, logger: Logger,
                           onRunning: @escaping @Sendable (DaemonEndpoint) -> Void = { _ in }) async throws {
        if !configuration.isLoopback, (configuration.secret ?? "").isEmpty {
            throw Failure(description: "refusing to listen on \(configuration.address) without --rpc-secret: anyone who can reach it could make this machine download and write files; set a secret or listen on 127.0.0.1")
        }
        let lock = try StateLock(stateDirectory: configuration.stateDirectory)
        defer { lock.release() }

        var engine = Downloader.Configuration(stateDirectory: configuration.stateDirectory)
        engine.rateLimit = configuration.rateLimit
        engine.stallTimeout = configuration.stallTimeout
        engine.logger = logger
        let downloader: Downloader
        do { downloader = try Downloader(engine) } catch { throw Failure(description: error.description) }
        let manager = DownloadManager(downloader: downloader, configuration: .init(
            maxConcurrentDownloads: configuration.maxConcurrentDownloads,
            maxConnectionsPerHost: configuration.maxConnectionsPerHost, queue: queue))
        let notifier = Notifier(hooks: .init(onComplete: configuration.onDownloadComplete, onError: configuration.onDownloadError),
                                logger: logger)
        let following = Task { await notifier.follow(manager) }
        do { try await manager.restore() } catch {
            try? await downloader.shutdown()
            throw Failure(description: error.description)
        }

        let shutdown = ShutdownTrigger()
        let listening = Mutex(false)
        var globals = GlobalOptions(dir: Aria2Options.absolute(configuration.directory))
        globals.split = configuration.connections
        globals.maxConnectionPerServer = configuration.connections
        let rpc = Aria2RPC(manager: manager, downloader: downloader, secret: configuration.secret, globals: globals,
                           requestShutdown: { shutdown.trigger() })
        let gate = RequestGate(loopbackOnly: configuration.isLoopback, allowOriginAll: configuration.allowOriginAll)
        let app = Application(
            router: Self.router(rpc: rpc, gate: gate),
            server: .http1WebSocketUpgrade(
                webSocketRouter: Self.webSocketRouter(rpc: rpc, notifier: notifier, gate: gate),
                configuration: .init(http1: .init(idleTimeout: .seconds(60)), ws: .init(maxFrameSize: 1 << 20))),
            configuration: .init(address: .hostname(configuration.address, port: configuration.port), serverName: "haul"),
            onServerRunning: { channel in
                listening.withLock { $0 = true }
                let endpoint = DaemonEndpoint(pid: getpid(), address: configuration.address,
                                              port: channel.localAddress?.port ?? configuration.port, secret: configuration.secret)
                do { try endpoint.write(stateDirectory: configuration.stateDirectory) } catch {
                    logger.error("cannot write \(DaemonEndpoint.path(in: configuration.stateDirectory)): \(error); haul add and haul ls will not find this daemon")
                }
                onRunning(endpoint)
            },
            logger: logger)
        var services = ServiceGroupConfiguration(
            // Shut down last to first: the manager saves every download first, then WebSocket
            // clients are let go and the server stops.
            services: [app, WebSocketCloser(notifier: notifier),
                       ManagerService(manager: manager, downloader: downloader) {
                           // Hummingbird waits without end for a connection that never sends a
                           // request (a browser's spare one), even when cancelled. Everything is
                           // saved by now, so leave as a finished daemon would.
                           Task.detached {
                               try? await Task.sleep(for: .seconds(5))
                               DaemonEndpoint.remove(stateDirectory: configuration.stateDirectory)
                               logger.notice("stopped; a client kept a connection open, so it was dropped")
                               exit(0)
                           }
                       }],
            gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        // A client that keeps a connection open (a browser's spare one) must not keep the daemon alive.
        services.maximumGracefulShutdownDuration = .seconds(3)
        let group = ServiceGroup(configuration: services)
        shutdown.set(group)
        defer { DaemonEndpoint.remove(stateDirectory: configuration.stateDirectory) }
        do {
            try await group.run()
        } catch {
            await manager.shutdown()
            try? await downloader.shutdown()
            guard listening.withLock({ $0 }) else {
                throw Failure(description: "cannot listen on \(configuration.address):\(configuration.port): \(Self.reason(error)); is another daemon running? Choose another --rpc-listen-port")
            }
            logger.debug("stopped: \(error)")
        }
        await following.value
    }

    static func reason(_ error: any Error) -> String {
        if let error = error as? IOError { return String(cString: strerror(error.errnoCode)) }
        return "\(error)"
    }

    // MARK: Routes

    static func router(rpc: Aria2RPC, gate: RequestGate) -> Router<BasicWebSocketRequestContext> {
        let router = Router(context: BasicWebSocketRequestContext.self)
        router.add(middleware: gate)
        WebAssets.addRoutes(to: router)
        router.post("/jsonrpc") { request, _ in
            let body = try await request.body.collect(upTo: 4 << 20)
            return answer(await rpc.respond(to: body.readableBytesView))
        }
        // aria2's GET form: /jsonrpc?method=M&id=I&params=BASE64(JSON list).
        router.get("/jsonrpc") { request, _ in
            var call: [String: JSONValue] = ["jsonrpc": "2.0"]
            if let method = request.uri.queryParameters.get("method") { call["method"] = .string(method) }
            if let id = request.uri.queryParameters.get("id") { call["id"] = .string(id) }
            if let encoded = request.uri.queryParameters.get("params") {
                let padded = encoded.padding(toLength: (encoded.count + 3) / 4 * 4, withPad: "=", startingAt: 0)
                guard let data = Data(base64Encoded: padded), let params = try? JSONValue.parse(data) else {
                    return answer(Aria2RPC.answer(id: call["id"] ?? .null, .failure(.parseError)))
                }
                call["params"] = params
            }
            return answer(await rpc.respond(to: JSONValue.object(call).data))
        }
        return router
    }

    /// The HTTP answer, with aria2's statuses: 200, or 400 and 500 for an error (a batch is 200).
    static func answer(_ answer: JSONValue) -> Response {
        let status = answer["error"].map { error in
            RPCError(code: Int(error["code"]?.integer ?? 1), message: "").httpStatus
        } ?? 200
        return Response(status: .init(code: status), headers: [.contentType: "application/json-rpc", .cacheControl: "no-cache"],
                        body: .init(byteBuffer: ByteBuffer(bytes: answer.bytes)))
    }

    static func webSocketRouter(rpc: Aria2RPC, notifier: Notifier, gate: RequestGate) -> Router<BasicWebSocketRequestContext> {
        let router = Router(context: BasicWebSocketRequestContext.self)
        router.ws("/jsonrpc", shouldUpgrade: { request, _ in
            try gate.check(request)
            return .upgrade([:])
        }) { inbound, outbound, _ in
            // Ends when the daemon stops (see `WebSocketCloser`), so the socket closes then.
            let notifications = await notifier.subscribe()
            // One writer, so a long answer split into frames never interleaves with a notification.
            let (messages, queue) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .unbounded)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await message in messages { try await outbound.writeTextMessage(message) }
                }
                group.addTask {
                    for await notification in notifications { queue.yield(notification.description) }
                }
                group.addTask {
                    for try await message in inbound.messages(maxSize: 4 << 20) {
                        let text: String
                        switch message {
                        case .text(let string): text = string
                        case .binary(let buffer): text = String(buffer: buffer)
                        }
                        queue.yield(await rpc.respond(to: Data(text.utf8)).description)
                    }
                }
                // The client left, the daemon is stopping, or a write failed: end the rest.
                _ = try await group.next()
                queue.finish()
                group.cancelAll()
            }
        }
        return router
    }
}

/// On shutdown, first of all stops every transfer and saves its state, then calls `saved`.
struct ManagerService: Service {
    let manager: DownloadManager
    let downloader: Downloader
    let saved: @Sendable () -> Void

    func run() async throws {
        try? await gracefulShutdown()
        await manager.shutdown()
        saved()
        try await downloader.shutdown()
    }
}

/// Ends every WebSocket client's notifications when the daemon starts stopping, which ends
/// its connection; the web server would otherwise wait for the clients to leave.
struct WebSocketCloser: Service {
    let notifier: Notifier

    func run() async throws {
        try? await gracefulShutdown()
        await notifier.close()
    }
}

/// Lets the `shutdown` method stop the service group after its answer has gone out.
final class ShutdownTrigger: Sendable {
    private let group = Mutex<ServiceGroup?>(nil)

    func set(_ serviceGroup: ServiceGroup) { group.withLock { $0 = serviceGroup } }

    func trigger() {
        guard let serviceGroup = group.withLock({ $0 }) else { return }
        Task {
            try? await Task.sleep(for: .milliseconds(100))
            await serviceGroup.triggerGracefulShutdown()
        }
    }
}

/// Refuses what a browser could send on behalf of another site: a page from another origin
/// (unless `--rpc-allow-origin-all`), and, on loopback, a Host that is not loopback (DNS rebinding).
struct RequestGate: RouterMiddleware {
    typealias Context = BasicWebSocketRequestContext
    let loopbackOnly: Bool
    let allowOriginAll: Bool

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if allowOriginAll, request.method == .options {
            var headers: HTTPFields = [
                .accessControlAllowOrigin: "*", .accessControlAllowMethods: "POST, GET, OPTIONS",
                .accessControlMaxAge: "1728000",
            ]
            if let asked = request.headers[.accessControlRequestHeaders] { headers[.accessControlAllowHeaders] = asked }
            return Response(status: .ok, headers: headers)
        }
        try check(request)
        var response = try await next(request, context)
        if allowOriginAll { response.headers[.accessControlAllowOrigin] = "*" }
        return response
    }

    func check(_ request: Request) throws {
        let host = request.head.authority ?? ""
        if loopbackOnly, !Daemon.isLoopback(Self.hostname(host)) {
            throw HTTPError(.forbidden, message: "Host \(host) refused: this daemon answers to 127.0.0.1 and localhost only")
        }
        if !allowOriginAll, let origin = request.headers[.origin], origin != "http://\(host)" {
            throw HTTPError(.forbidden, message: "requests from web pages at \(origin) are refused; start the daemon with --rpc-allow-origin-all to allow them")
        }
    }

    /// The host part of a Host header: `[::1]:6800` → `[::1]`, `localhost:6800` → `localhost`.
    static func hostname(_ authority: String) -> String {
        if authority.hasPrefix("["), let end = authority.firstIndex(of: "]") { return String(authority[...end]) }
        return String(authority.split(separator: ":", maxSplits: 1).first ?? "")
    }
}

/// One daemon per state folder: two would run the same queue twice.
final class StateLock: Sendable {
    private let fd: Int32

    init(stateDirectory: String) throws {
        do {
            try FileManager.default.createDirectory(atPath: stateDirectory, withIntermediateDirectories: true)
        } catch {
            throw Daemon.Failure(description: "cannot create the state folder \(stateDirectory): \(error.localizedDescription)")
        }
        let path = (stateDirectory as NSString).appendingPathComponent("daemon.lock")
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw Daemon.Failure(description: "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            let other = (try? DaemonEndpoint.read(stateDirectory: stateDirectory)).flatMap { $0 }
            let who = other.map { " (pid \($0.pid), listening on \($0.rpcURL))" } ?? ""
            throw Daemon.Failure(description: "another haul daemon\(who) is using the state folder \(stateDirectory); stop it first (haul shutdown or kill), or pass another --state-dir")
        }
    }

    func release() { close(fd) }
}
