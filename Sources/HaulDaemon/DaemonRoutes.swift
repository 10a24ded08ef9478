import Foundation
import Hummingbird
import HummingbirdWebSocket
import NIOCore

/// What the daemon answers on its port: the web page, aria2's JSON-RPC over HTTP (POST and
/// the read-only GET form) and over WebSocket, and Prometheus' `/metrics`, all behind the
/// ``RequestGate``.
enum DaemonRoutes {
    /// The largest request body or WebSocket message read (aria2's `--rpc-max-request-size` is 2 MiB).
    static let maxRequestSize = 4 << 20

    static func router(rpc: Aria2RPC, gate: RequestGate, metrics: DaemonMetrics) -> Router<DaemonRequestContext> {
        let router = Router(context: DaemonRequestContext.self)
        router.add(middleware: gate)
        WebAssets.addRoutes(to: router)
        // Prometheus' scrape. With a secret it must carry `Authorization: Bearer SECRET`.
        router.get("/metrics") { request, context in
            guard await rpc.allowsScrape(authorization: request.headers[.authorization], client: context.remoteAddress?.ipAddress) else {
                return Response(
                    status: .unauthorized,
                    headers: [.contentType: "text/plain; charset=utf-8", .wwwAuthenticate: "Bearer realm=\"haul\""],
                    body: .init(byteBuffer: ByteBuffer(string: scrapeRefused)))
            }
            let text = await metrics.exposition(of: rpc.manager)
            return Response(
                status: .ok, headers: [.contentType: DaemonMetrics.contentType, .cacheControl: "no-cache"],
                body: .init(byteBuffer: ByteBuffer(bytes: text)))
        }
        router.post("/jsonrpc") { request, context in
            let body: ByteBuffer
            do { body = try await request.body.collect(upTo: maxRequestSize) } catch is NIOTooManyBytesError {
                return answer(Aria2RPC.answer(id: .null, .failure(.tooLarge(maxRequestSize))), status: .contentTooLarge)
            }
            return answer(await rpc.respond(to: body.readableBytesView, client: context.remoteAddress?.ipAddress))
        }
        // aria2's GET form: /jsonrpc?method=M&id=I&params=BASE64(JSON list). A browser sends it
        // from <img> and <script> of any page without an Origin, so it only ever reads.
        router.get("/jsonrpc") { request, context in
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
            return answer(await rpc.respond(to: JSONValue.object(call).data, readOnly: true, client: context.remoteAddress?.ipAddress))
        }
        return router
    }

    /// The one line a scrape without the secret gets, with its `401`.
    static let scrapeRefused =
        "this daemon has an --rpc-secret: send it as Authorization: Bearer SECRET (Prometheus: authorization: credentials_file: FILE)\n"

    /// The HTTP answer, with aria2's statuses: 200, or 400 and 500 for an error (a batch is 200).
    static func answer(_ answer: JSONValue, status: HTTPResponse.Status? = nil) -> Response {
        let code =
            status?.code ?? answer["error"].map { error in
                RPCError(code: Int(error["code"]?.integer ?? 1), message: "").httpStatus
            } ?? 200
        return Response(
            status: .init(code: code), headers: [.contentType: "application/json-rpc", .cacheControl: "no-cache"],
            body: .init(byteBuffer: ByteBuffer(bytes: answer.bytes)))
    }

    static func webSocketRouter(rpc: Aria2RPC, notifier: Notifier, gate: RequestGate) -> Router<DaemonRequestContext> {
        let router = Router(context: DaemonRequestContext.self)
        router.ws(
            "/jsonrpc",
            shouldUpgrade: { request, _ in
                try gate.check(request)
                return .upgrade([:])
            }
        ) { inbound, outbound, context in
            let client = context.requestContext.remoteAddress?.ipAddress
            // Ends when the daemon stops (the notifier closes every stream), so the socket closes then.
            let notifications = notifier.subscribe()
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
                    for try await message in inbound.messages(maxSize: maxRequestSize) {
                        let text: String
                        switch message {
                        case .text(let string): text = string
                        case .binary(let buffer): text = String(buffer: buffer)
                        }
                        queue.yield(await rpc.respond(to: Data(text.utf8), client: client).description)
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

extension RPCError {
    /// A request body over the size the daemon reads.
    static func tooLarge(_ limit: Int) -> RPCError {
        RPCError(code: -32600, message: "Invalid Request: the body is larger than \(limit >> 20) MiB; send fewer calls at once")
    }
}
