import NIOCore
import NIOSSL
import NIOTLS

/// Puts TLS on a new connection of a ``PlainHTTPClient`` (NIOSSL's client handler in front of
/// what comes after) and waits for the handshake, so that a certificate the client refuses fails
/// the connection, before any request is sent on it.
///
/// The connection reads only when asked (``ChannelOptions/autoRead`` is off): the handler asks
/// for the first read, and NIOSSL for the rest of the handshake's.
final class TLSHandshakeHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    private let deadline: NIODeadline
    private let promise: EventLoopPromise<Void>
    private var done = false
    private var timeout: Scheduled<Void>?

    private init(deadline: NIODeadline, promise: EventLoopPromise<Void>) {
        self.deadline = deadline
        self.promise = promise
    }

    /// Starts TLS with `serverName` on `channel`; the future succeeds when the handshake has
    /// and this handler is gone. Call on the channel's event loop.
    ///
    /// `serverName` goes in SNI and is the name the certificate must be for; an IP address is
    /// not sent in SNI (RFC 6066 §3), and NIOSSL checks the certificate against the address the
    /// connection reached instead, as AsyncHTTPClient does.
    static func start(on channel: any Channel, context: NIOSSLContext, serverName: String, deadline: NIODeadline) -> EventLoopFuture<Void> {
        let handler = TLSHandshakeHandler(deadline: deadline, promise: channel.eventLoop.makePromise())
        let pipeline = channel.pipeline.syncOperations
        do {
            let isAddress = (try? SocketAddress(ipAddress: serverName, port: 0)) != nil
            try pipeline.addHandler(NIOSSLClientHandler(context: context, serverHostname: isAddress ? nil : serverName))
            try pipeline.addHandler(handler)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return handler.promise.futureResult.assumeIsolated().flatMap { pipeline.removeHandler(handler) }.nonisolated()
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let limit = deadline - .now()
        timeout = context.eventLoop.scheduleTask(deadline: deadline) {
            let (handler, context) = loopBound.value
            handler.fail(ChannelError.connectTimeout(limit), context: context)
        }
        context.read()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timeout?.cancel()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event, !done {
            done = true
            timeout?.cancel()
            promise.succeed()
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(error, context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(ServerClosedConnection(), context: context)
        context.fireChannelInactive()
    }

    private func fail(_ error: any Error, context: ChannelHandlerContext) {
        guard !done else { return }
        done = true
        timeout?.cancel()
        promise.fail(error)
        context.close(promise: nil)
    }
}
