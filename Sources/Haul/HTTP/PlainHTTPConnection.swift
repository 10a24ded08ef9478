import NIOCore
import NIOHTTP1
import NIOSSL
import Synchronization

/// One keep-alive HTTP/1.1 connection of a ``PlainHTTPClient``: one exchange at a time.
final class PlainHTTPConnection: Sendable {
    let channel: any Channel
    let key: PlainHTTPClient.Key
    private let handler: NIOLoopBound<PlainHTTPHandler>

    init(channel: any Channel, key: PlainHTTPClient.Key, handler: PlainHTTPHandler) {
        self.channel = channel
        self.key = key
        self.handler = NIOLoopBound(handler, eventLoop: channel.eventLoop)
    }

    /// Sends `head` and starts reading its answer into `exchange`; with `hasBody`, the request
    /// stays open for ``write(_:)``'s parts and its end.
    func send(_ head: HTTPRequestHead, for exchange: PlainHTTPExchange, hasBody: Bool = false) {
        onLoop { $0.begin(exchange, head: head, hasBody: hasBody) }
    }

    /// Writes a part of a request body (or its end); the future completes once the bytes are
    /// handed to the kernel, which is the backpressure an upload waits on.
    func write(_ part: HTTPClientRequestPart) -> EventLoopFuture<Void> {
        let promise = channel.eventLoop.makePromise(of: Void.self)
        onLoop { $0.write(part, promise: promise) }
        return promise.futureResult
    }

    /// Writes `body` from `offset` on, each chunk read on the connection's loop with the body's
    /// ``RequestBody/readNow`` as the socket takes the one before. Returns how far it got: the
    /// body's length, or where `readNow` declined (the caller reads that chunk and comes back).
    /// Cancelling the task closes the connection.
    func pump(_ body: RequestBody, from offset: Int64) async throws -> Int64 {
        let promise = channel.eventLoop.makePromise(of: Int64.self)
        onLoop { $0.pump(body, from: offset, promise: promise) }
        return try await withTaskCancellationHandler {
            try await promise.futureResult.get()
        } onCancel: {
            close()
        }
    }

    /// Sends `heads` (requests without a body) in one write, pipelined, and reads their
    /// answers in turn into `exchanges`, one for each (RFC 9112 §9.3.2: the server answers them
    /// in order). The connection goes back to the pool after the last answer.
    func send(pipelined heads: [HTTPRequestHead], for exchanges: [PlainHTTPExchange]) {
        onLoop { $0.begin(pipelined: Array(zip(exchanges, heads))) }
    }

    /// The reader has room again after the channel paused.
    func resumeReading() {
        onLoop { $0.resumeReading() }
    }

    /// Runs `body` with the handler on the channel's loop: at once when already there.
    private func onLoop(_ body: @escaping @Sendable (PlainHTTPHandler) -> Void) {
        if channel.eventLoop.inEventLoop {
            body(handler.value)
        } else {
            let handler = self.handler
            channel.eventLoop.execute { body(handler.value) }
        }
    }

    var isActive: Bool { channel.isActive }

    func close() {
        channel.close(promise: nil)
    }
}

/// The last handler of a plain connection's pipeline: feeds the current exchange (and the
/// pipelined ones after it, in turn), asks for reads while it has room, hands the connection
/// back when the last answer ends with the connection kept alive, and notices when the server
/// has sent nothing for the stall timeout.
final class PlainHTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private let stallTimeout: Duration
    private let idleTimeout: TimeAmount
    /// Where a kept-alive connection goes back to.
    private let release: @Sendable (PlainHTTPConnection) -> Void
    private let forget: @Sendable (PlainHTTPConnection) -> Void
    var connection: PlainHTTPConnection?

    private var context: ChannelHandlerContext?
    private var exchange: PlainHTTPExchange?
    /// Requests sent after the current one, pipelined, whose answers follow its answer.
    private var waiting = CircularBuffer<PlainHTTPExchange>()
    private var keepAlive = true
    /// The request's last part (its end) is written: until then the connection is in the middle
    /// of a request and cannot serve another, even after an early answer.
    private var requestEnded = true
    /// The answer's body has neither a length nor chunks: only the connection's end ends it.
    private var endsAtClose = false
    /// A read was asked for and has not completed.
    private var reading = false
    /// When the server last sent something, or the handler last started waiting for it.
    private var lastActivity = NIODeadline.now()
    private var watchdog: RepeatedTask?
    /// The request body being written from the loop (``pump(_:from:promise:)``).
    private var pumping: Pump?

    private struct Pump {
        let length: Int64
        let readNow: @Sendable (Int64, inout ByteBuffer) -> Bool
        var sent: Int64
        let promise: EventLoopPromise<Int64>
        /// Two buffers taken in turn: the one written before is usually out of NIO's hands by
        /// the time it is read into again, and its memory is reused.
        var buffers: [ByteBuffer]
        var next = 0
    }

    /// The most chunks one turn of the loop writes before letting the loop's other channels
    /// run: a socket that keeps taking bytes never holds the loop for long.
    private static let chunksPerTurn = 16

    init(
        stallTimeout: Duration, idleTimeout: TimeAmount,
        release: @escaping @Sendable (PlainHTTPConnection) -> Void,
        forget: @escaping @Sendable (PlainHTTPConnection) -> Void
    ) {
        self.stallTimeout = stallTimeout
        self.idleTimeout = idleTimeout
        self.release = release
        self.forget = forget
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        // One timer for the connection's whole life, not one per request: stall and idle
        // checks a few times per stall timeout.
        let interval = TimeAmount.nanoseconds(max(min(TimeAmount(stallTimeout).nanoseconds / 4, 1_000_000_000), 10_000_000))
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        watchdog = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
            loopBound.value.check()
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        pumping.take()?.promise.fail(ChannelError.ioOnClosedChannel)
        watchdog?.cancel()
        watchdog = nil
        self.context = nil
        // The connection holds this handler: the pair goes when the channel does.
        connection = nil
    }

    func begin(_ exchange: PlainHTTPExchange, head: HTTPRequestHead, hasBody: Bool) {
        guard let context, context.channel.isActive else {
            exchange.fail(ChannelError.ioOnClosedChannel)
            return
        }
        self.exchange = exchange
        keepAlive = head.isKeepAlive
        endsAtClose = false
        lastActivity = .now()
        requestEnded = !hasBody
        if hasBody {
            context.writeAndFlush(wrapOutboundOut(.head(head)), promise: nil)
        } else {
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
        read(context)
    }

    /// Writes every request of `pipelined` (none with a body) and flushes once; their answers
    /// feed the exchanges in the same order.
    func begin(pipelined: [(PlainHTTPExchange, HTTPRequestHead)]) {
        guard let first = pipelined.first?.0 else { return }
        guard let context, context.channel.isActive else {
            for (exchange, _) in pipelined { exchange.fail(ChannelError.ioOnClosedChannel) }
            return
        }
        exchange = first
        keepAlive = pipelined.allSatisfy { $0.1.isKeepAlive }
        endsAtClose = false
        lastActivity = .now()
        requestEnded = true
        waiting.append(contentsOf: pipelined.dropFirst().map(\.0))
        for (_, head) in pipelined {
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.write(wrapOutboundOut(.end(nil)), promise: nil)
        }
        context.flush()
        read(context)
    }

    /// Fails the exchanges pipelined after the current one: their answers will not come.
    private func failWaiting(_ error: any Error) {
        while let next = waiting.popFirst() { next.fail(error) }
    }

    /// Writes a part of the request's body. A server reading the body is not a stalled one
    /// though it sends nothing: each part it takes counts as activity, so only a server that
    /// neither reads nor answers for the stall timeout fails the exchange.
    func write(_ part: HTTPClientRequestPart, promise: EventLoopPromise<Void>) {
        guard let context, context.channel.isActive else {
            promise.fail(ChannelError.ioOnClosedChannel)
            return
        }
        lastActivity = .now()
        if case .end = part { requestEnded = true }
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        promise.futureResult.whenSuccess { loopBound.value.lastActivity = .now() }
        context.writeAndFlush(wrapOutboundOut(part), promise: promise)
    }

    /// Writes `body` from `offset` on while the channel is writable and its `readNow` reads;
    /// completes `promise` with how far it got, or fails it when the connection goes.
    func pump(_ body: RequestBody, from offset: Int64, promise: EventLoopPromise<Int64>) {
        guard let context, context.channel.isActive, let readNow = body.readNow, pumping == nil else {
            promise.fail(ChannelError.ioOnClosedChannel)
            return
        }
        // Empty: `readNow` gives each the memory it wants the first time, reused after.
        pumping = Pump(length: body.length, readNow: readNow, sent: offset, promise: promise, buffers: [ByteBuffer(), ByteBuffer()])
        pumpMore(context)
    }

    private func pumpMore(_ context: ChannelHandlerContext) {
        guard var pump = pumping.take() else { return }
        var chunks = 0
        var declined = false
        while pump.sent < pump.length, context.channel.isWritable, chunks < Self.chunksPerTurn {
            var buffer = pump.buffers[pump.next]
            pump.buffers[pump.next] = ByteBuffer()  // the only reference while it is read into
            guard pump.readNow(pump.sent, &buffer) else {
                pump.buffers[pump.next] = buffer
                declined = true
                break
            }
            pump.sent += Int64(buffer.readableBytes)
            pump.buffers[pump.next] = buffer
            pump.next ^= 1
            chunks += 1
            lastActivity = .now()
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        }
        if declined || pump.sent >= pump.length {
            pump.promise.succeed(pump.sent)
        } else {
            pumping = pump
            // Not writable: `channelWritabilityChanged` goes on. A full turn: the loop's next.
            if context.channel.isWritable {
                let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
                context.eventLoop.execute {
                    guard let context = loopBound.value.context else { return }
                    loopBound.value.pumpMore(context)
                }
            }
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { pumpMore(context) }
        context.fireChannelWritabilityChanged()
    }

    func resumeReading() {
        guard let context, exchange != nil, !reading else { return }
        read(context)
    }

    private func read(_ context: ChannelHandlerContext) {
        reading = true
        lastActivity = .now()
        context.read()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let exchange else {
            // Sent between requests, unasked (a 408 before an idle close): what follows on
            // this connection could not be told from the next answer.
            context.close(promise: nil)
            return
        }
        switch unwrapInboundIn(data) {
        case .head(let head):
            keepAlive = keepAlive && head.isKeepAlive
            endsAtClose = !head.headers.contains(name: "Content-Length") && !head.headers.contains(name: "Transfer-Encoding")
            exchange.received(head)
        case .body(let part):
            exchange.received(part)
        case .end:
            self.exchange = nil
            if !waiting.isEmpty {
                // The next pipelined answer follows, unless the server ends the connection here.
                if keepAlive {
                    self.exchange = waiting.removeFirst()
                    endsAtClose = false
                } else {
                    failWaiting(ServerClosedConnection())
                    context.close(promise: nil)
                }
            } else if keepAlive, requestEnded, let connection {
                // Back in the pool before the reader hears of the end: its next request finds it there.
                release(connection)
            } else {
                context.close(promise: nil)
            }
            exchange.receivedEnd()
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        reading = false
        lastActivity = .now()
        if let exchange {
            if exchange.wantsMore() { read(context) }
        } else if context.channel.isActive {
            // Kept alive and idle: still read, so bytes the server sends unasked end the
            // connection (`channelRead`) rather than pass for the next request's answer, and
            // the next request's read is already asked for (two `epoll_ctl` a request fewer).
            context.read()
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A TLS connection closed without TLS's own goodbye (close_notify), which many servers
        // skip: before an answer or inside a body of known length, the connection's end and the
        // HTTP parser say what it means (a stale connection, a body cut short). Only a body that
        // ends with the connection cannot tell a cut from its end without it (RFC 8446 §6.1).
        if let tls = error as? NIOSSLError, tls == .uncleanShutdown, !(exchange?.answered == true && endsAtClose) { return }
        exchange?.fail(error)
        exchange = nil
        failWaiting(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        pumping.take()?.promise.fail(ChannelError.ioOnClosedChannel)
        exchange?.fail(ServerClosedConnection())
        exchange = nil
        failWaiting(ServerClosedConnection())
        watchdog?.cancel()
        watchdog = nil
        if let connection { forget(connection) }
        context.fireChannelInactive()
    }

    /// Fails an exchange the server stopped feeding; closes a connection idle too long.
    private func check() {
        guard let context else { return }
        let quiet = NIODeadline.now() - lastActivity
        if let exchange {
            guard reading, quiet >= TimeAmount(stallTimeout) else { return }
            exchange.fail(DownloadError.stalled(after: stallTimeout))
            self.exchange = nil
            failWaiting(DownloadError.stalled(after: stallTimeout))
            context.close(promise: nil)
        } else if quiet >= idleTimeout {
            context.close(promise: nil)
        }
    }
}

/// The server closed the connection before the answer ended.
struct ServerClosedConnection: Error {}
