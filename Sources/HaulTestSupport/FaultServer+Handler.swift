import NIOCore
import NIOHTTP1

/// Answers the requests of one connection, one at a time, by the plans of the route table.
///
/// Confined to its channel's event loop; the route table is the only shared state.
final class FaultConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = ByteBuffer

    /// The response being sent.
    private struct InFlight {
        var sender: BodySender
        let path: String
        let chunked: Bool
        let keepAlive: Bool
        let countsBytes: Bool
    }

    private let routes: SharedRouteTable
    private var head: HTTPRequestHead?
    /// Complete requests not answered yet (pipelining).
    private var pending: [HTTPRequestHead] = []
    private var inFlight: InFlight? {
        didSet {
            let was = oldValue?.countsBytes == true
            let now = inFlight?.countsBytes == true
            if was != now { routes.withLock { now ? $0.bodyStarted() : $0.bodyEnded() } }
        }
    }
    private var isActive = true
    /// An answer is waiting out its route's ``Route/answerDelay``.
    private var delaying = false

    init(routes: SharedRouteTable) {
        self.routes = routes
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let requestHead):
            head = requestHead
        case .body:
            break
        case .end:
            if let head { pending.append(head) }
            head = nil
            startNext(context: context)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        isActive = false
        inFlight = nil
        pending = []
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // Malformed requests and resets from clients that gave up: nothing to answer.
        context.close(promise: nil)
    }

    private func startNext(context: ChannelHandlerContext) {
        guard isActive, inFlight == nil, !delaying, !pending.isEmpty else { return }
        let request = pending.removeFirst()
        let path = String(request.uri.prefix { $0 != "?" })
        let plan = routes.withLock {
            $0.begin(
                path: path,
                target: request.uri,
                method: request.method.rawValue,
                headers: request.headers.map { ($0.name, $0.value) }
            )
        }
        if let delay = plan.delay {
            // Busy until then: the next request waits behind this one, as on a real server.
            delaying = true
            context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(delay)) {
                self.delaying = false
                self.answer(request, path: path, plan: plan, context: context)
            }
            return
        }
        answer(request, path: path, plan: plan, context: context)
    }

    private func answer(_ request: HTTPRequestHead, path: String, plan: ResponsePlan, context: ChannelHandlerContext) {
        guard isActive else { return }
        var text = "HTTP/1.1 \(plan.status) \(ResponsePlan.reasonPhrase(plan.status))\r\n"
        for (name, value) in plan.headers { text += "\(name): \(value)\r\n" }
        if !request.isKeepAlive { text += "Connection: close\r\n" }
        text += "\r\n"
        // Flushed at once so the head goes out even when the body stalls at byte 0.
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: text)), promise: nil)
        inFlight = InFlight(
            sender: BodySender(body: plan.body, stop: plan.stop, bytesPerSecond: plan.bytesPerSecond),
            path: path,
            chunked: plan.chunked,
            keepAlive: request.isKeepAlive,
            countsBytes: plan.servesContent
        )
        pump(context: context)
    }

    /// Performs the sender's next action; called again when a write completes or a pause ends.
    private func pump(context: ChannelHandlerContext) {
        guard isActive, var flight = inFlight else { return }
        let action = flight.sender.next(now: .now())
        inFlight = flight
        switch action {
        case .write(let bytes):
            var buffer = context.channel.allocator.buffer(capacity: bytes.count + 12)
            if flight.chunked { buffer.writeString(String(bytes.count, radix: 16) + "\r\n") }
            buffer.writeBytes(bytes)
            if flight.chunked { buffer.writeString("\r\n") }
            context.writeAndFlush(wrapOutboundOut(buffer)).assumeIsolated().whenSuccess {
                if flight.countsBytes { self.routes.withLock { $0.recordSent(flight.path, bytes.count) } }
                // A write the socket takes at once completes inline; pumping from here would
                // recurse once per slice and keep every slice's buffer alive until the body ends.
                context.eventLoop.assumeIsolated().execute { self.pump(context: context) }
            }
        case .wait(let deadline):
            context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { self.pump(context: context) }
        case .cut:
            // Every issued byte has been written (we only get here from a write's success), so
            // closing now leaves exactly `cutAfter` body bytes on the wire.
            inFlight = nil
            context.close(promise: nil)
        case .stall:
            break  // Silent until the client gives up or the server shuts down.
        case .finish:
            let tail = ByteBuffer(string: flight.chunked ? "0\r\n\r\n" : "")
            context.writeAndFlush(wrapOutboundOut(tail)).assumeIsolated().whenSuccess {
                self.inFlight = nil
                if flight.keepAlive {
                    self.startNext(context: context)
                } else {
                    context.close(promise: nil)
                }
            }
        }
    }
}
