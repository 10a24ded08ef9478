import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1

/// Answers a WebSocket handshake that the ``RequestGate`` refuses with `403` and the line that
/// says why (as a refused `POST` gets), and logs the refusal.
///
/// hummingbird-websocket answers every handshake its `shouldUpgrade` declines with a bare `400`
/// and logs nothing (the writer is private to it), so an AriaNg user on another origin saw
/// only "Cannot connect to aria2!". This handler sits between the HTTP decoder and the upgrade
/// handler and sees a connection's first request before the upgrader does. The upgrader looks
/// at that first request only (a later `Upgrade` on the connection is redirected and closed),
/// so once a first request has passed, the handler leaves the pipeline.
final class WebSocketHandshakeGate: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let gate: RequestGate
    private let logger: Logger
    /// Whether the connection's first request was refused (and answered here), or true once
    /// it is known; false when it passed or none came.
    let refused: EventLoopPromise<Bool>
    private var decided = false

    init(gate: RequestGate, logger: Logger, refused: EventLoopPromise<Bool>) {
        self.gate = gate
        self.logger = logger
        self.refused = refused
    }

    private func decide(_ refusing: Bool) {
        guard !decided else { return }
        decided = true
        refused.succeed(refusing)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        decide(false)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if decided { return }  // the rest of a refused request
        guard case .head(let head) = unwrapInboundIn(data), Self.isHandshake(head),
            let reason = gate.refusal(
                host: head.headers.first(name: "Host"), origin: head.headers.first(name: "Origin"),
                path: String(head.uri.prefix { $0 != "?" }), fetchSite: head.headers.first(name: "Sec-Fetch-Site"))
        else {
            decide(false)
            context.fireChannelRead(data)
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            return
        }
        decide(true)
        let origin = head.headers.first(name: "Origin") ?? "(none)"
        logger.notice("refused a WebSocket connection from \(context.remoteAddress?.ipAddress ?? "?") (Origin \(origin)): \(reason)")
        let answer: JSONValue = ["error": ["message": .string(reason)]]
        let body = context.channel.allocator.buffer(bytes: answer.bytes)
        let headers = HTTPHeaders([
            ("Content-Type", "application/json; charset=utf-8"),
            ("Content-Length", String(body.readableBytes)), ("Connection", "close"),
        ])
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .forbidden, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }

    static func isHandshake(_ head: HTTPRequestHead) -> Bool {
        head.headers["Upgrade"].contains { $0.lowercased() == "websocket" }
    }

    /// `base` (an HTTP/1 channel that may upgrade to WebSocket) with the gate in its pipeline.
    static func guarding<Base: ServerChildChannel>(_ base: Base, gate: RequestGate, logger: Logger) -> some ServerChildChannel {
        Guarded(base: base, gate: gate, logger: logger)
    }

    struct Guarded<Base: ServerChildChannel>: ServerChildChannel {
        let base: Base
        let gate: RequestGate
        let logger: Logger

        struct Value: ServerChildChannelValue {
            let base: Base.Value
            let refused: EventLoopFuture<Bool>
            var channel: any Channel { base.channel }
        }

        func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
            let (gate, daemonLogger) = (gate, self.logger)
            return base.setup(channel: channel, logger: logger).flatMapThrowing { value in
                let operations = channel.pipeline.syncOperations
                let decoder = try operations.context(handlerType: ByteToMessageHandler<HTTPRequestDecoder>.self)
                let handler = WebSocketHandshakeGate(gate: gate, logger: daemonLogger, refused: channel.eventLoop.makePromise())
                try operations.addHandler(handler, position: .after(decoder.handler))
                return Value(base: value, refused: handler.refused.futureResult)
            }
        }

        func handle(value: Value, logger: Logger) async {
            // A refused handshake is answered and closed by the gate; the upgrader, left without
            // its request, would only log its closing as an error.
            if (try? await value.refused.get()) == true { return }
            await base.handle(value: value.base, logger: logger)
        }
    }
}
