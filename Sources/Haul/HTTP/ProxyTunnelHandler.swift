import NIOCore
import NIOHTTP1

/// Asks an HTTP proxy for a tunnel (`CONNECT host:port`, RFC 9110 §9.3.6) on a new connection
/// of a ``PlainHTTPClient``, then leaves the pipeline with its codec: the connection is a byte
/// stream to the server from then on, ready for TLS.
///
/// The connection reads only when asked (``ChannelOptions/autoRead`` is off), so the handler
/// asks for each read of the proxy's answer itself.
final class ProxyTunnelHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = Never
    typealias OutboundOut = HTTPClientRequestPart

    private enum State {
        case sent
        /// A 2xx head arrived; the tunnel is open once its (empty) answer ends.
        case accepted
        case done
    }

    private let head: HTTPRequestHead
    private let deadline: NIODeadline
    private let promise: EventLoopPromise<Void>
    private var state = State.sent
    private var timeout: Scheduled<Void>?

    private init(head: HTTPRequestHead, deadline: NIODeadline, promise: EventLoopPromise<Void>) {
        self.head = head
        self.deadline = deadline
        self.promise = promise
    }

    /// Opens a tunnel to `tunnel` on `channel`, a connection to the proxy; the future succeeds
    /// when the proxy has said yes and the handlers are gone. Call on the channel's event loop.
    static func open(_ tunnel: PlainHTTPClient.Tunnel, on channel: any Channel, deadline: NIODeadline) -> EventLoopFuture<Void> {
        let authority = PlainHTTPClient.hostHeader(host: tunnel.host, port: tunnel.port, defaultPort: nil)
        var head = HTTPRequestHead(version: .http1_1, method: .CONNECT, uri: authority)
        head.headers.add(name: "Host", value: authority)
        if let authorization = tunnel.proxyAuthorization { head.headers.add(name: "Proxy-Authorization", value: authorization) }
        let encoder = HTTPRequestEncoder()
        // The decoder sees the CONNECT go out, so it knows a 2xx answer has no body.
        let decoder = ByteToMessageHandler(HTTPResponseDecoder(leftOverBytesStrategy: .dropBytes))
        let handler = ProxyTunnelHandler(head: head, deadline: deadline, promise: channel.eventLoop.makePromise())
        let pipeline = channel.pipeline.syncOperations
        do {
            try pipeline.addHandler(encoder)
            try pipeline.addHandler(decoder)
            try pipeline.addHandler(handler)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return handler.promise.futureResult.assumeIsolated().flatMap {
            pipeline.removeHandler(handler).assumeIsolated().flatMap {
                pipeline.removeHandler(decoder).assumeIsolated().flatMap { pipeline.removeHandler(encoder) }.nonisolated()
            }.nonisolated()
        }.nonisolated()
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timeout = context.eventLoop.scheduleTask(deadline: deadline) {
            let (handler, context) = loopBound.value
            handler.fail(ProxyTunnelFailure(reason: .noAnswer), context: context)
        }
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        context.read()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timeout?.cancel()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch (state, unwrapInboundIn(data)) {
        case (.sent, .head(let answer)):
            switch answer.status.code {
            case 200..<300: state = .accepted
            case 407: fail(ProxyTunnelFailure(reason: .wantsCredentials), context: context)
            default: fail(ProxyTunnelFailure(reason: .refused(status: Int(answer.status.code))), context: context)
            }
        case (.accepted, .end):
            state = .done
            timeout?.cancel()
            promise.succeed()
        case (.done, _):
            break
        default:
            // A body after a 2xx to CONNECT: not a tunnel.
            fail(ProxyTunnelFailure(reason: .refused(status: 200)), context: context)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if state != .done { context.read() }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(error, context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(ProxyTunnelFailure(reason: .closed), context: context)
        context.fireChannelInactive()
    }

    private func fail(_ error: any Error, context: ChannelHandlerContext) {
        guard state != .done else { return }
        state = .done
        timeout?.cancel()
        promise.fail(error)
        context.close(promise: nil)
    }
}

/// An HTTP proxy did not open the tunnel asked of it.
struct ProxyTunnelFailure: Error, Equatable {
    enum Reason: Equatable {
        /// 407: credentials missing or refused.
        case wantsCredentials
        /// Any other answer than 2xx: its rules say no.
        case refused(status: Int)
        /// No answer before the connect timeout.
        case noAnswer
        /// The proxy closed the connection before its answer ended.
        case closed
    }

    var reason: Reason
}
