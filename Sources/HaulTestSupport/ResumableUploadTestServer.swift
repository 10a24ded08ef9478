import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOPosix
import NIOResumableUpload
import Synchronization

/// A throwaway server of the IETF draft "Resumable Uploads for HTTP" on 127.0.0.1: Apple's
/// NIOResumableUpload (swift-nio-extras) in front of a small handler that writes each upload to
/// ``folder`` under its URL's last path component, the way the package's own demo sets it up.
///
/// NIOResumableUpload speaks interop versions 3, 5 and 6 of the draft; a server started with
/// `interopVersions` takes only those (``start(interopVersions:)``). It keeps its uploads in
/// memory: an upload survives its client (a cut connection, a `kill -9`), not the server.
///
/// ```swift
/// try await ResumableUploadTestServer.withServer { server in
///     // ... upload a.bin to server.url("a.bin") ...
///     let stored = try Data(contentsOf: server.folder.appendingPathComponent("a.bin"))
///     #expect(server.received().bytes == Int64(stored.count))
/// }
/// ```
public final class ResumableUploadTestServer: Sendable {
    /// One request as it arrived: its method and the draft's headers it carried.
    public struct Request: Sendable, Hashable {
        /// `POST`, `PATCH`, `HEAD`, `OPTIONS`, …
        public var method: String
        /// `Upload-Draft-Interop-Version`, nil when it had none.
        public var interopVersion: String?
        /// `Upload-Complete`, nil when it had none.
        public var uploadComplete: String?
        /// `Upload-Incomplete` (interop version 3), nil when it had none.
        public var uploadIncomplete: String?
        /// `Content-Type`, nil when it had none.
        public var contentType: String?
    }

    /// What the server has received so far.
    public struct Received: Sendable, Hashable {
        /// Request body bytes read from the sockets, every request and cut off ones included.
        public var bytes: Int64
        /// Uploads begun (their first request reached the handler that writes the file).
        public var creations: Int
        /// Uploads whose last byte arrived (the handler saw their end).
        public var completions: Int
        /// Requests by method (`HEAD`, `PATCH`, `POST`, `OPTIONS`, …).
        public var methods: [String: Int]
        /// Connections the server cut (``cutConnection(afterBytes:)``).
        public var cuts: Int
        /// Every request, in the order they arrived.
        public var requests: [Request]
    }

    /// The port it listens on, on 127.0.0.1.
    public let port: Int
    /// Where uploads land, as their bytes arrive.
    public let folder: URL
    private let directory: URL
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    private let shared: Shared
    private let isShutDown = Mutex(false)

    /// The counts and the cut, shared by every connection's handlers.
    final class Shared: Sendable {
        struct State {
            var received = Received(bytes: 0, creations: 0, completions: 0, methods: [:], cuts: 0, requests: [])
            var cutAt: Int64?
        }

        let state = Mutex(State())
        /// Made once the port is known: the upload URLs it hands out are absolute.
        let context = Mutex<HTTPResumableUploadContext?>(nil)
    }

    private init(port: Int, directory: URL, folder: URL, group: MultiThreadedEventLoopGroup, channel: any Channel, shared: Shared) {
        self.port = port
        self.directory = directory
        self.folder = folder
        self.group = group
        self.channel = channel
        self.shared = shared
    }

    /// The upload target for a file named `name`: `http://127.0.0.1:PORT/files/NAME`.
    public func url(_ name: String) -> String { "http://127.0.0.1:\(port)/files/\(name)" }

    /// Binds a free port on 127.0.0.1 and starts serving.
    ///
    /// - Parameter interopVersions: The only interop versions of the draft it takes, nil for
    ///   NIOResumableUpload's own (3, 5 and 6). A request naming another is answered
    ///   `400 Bad Request` naming the last of these in `Upload-Draft-Interop-Version`, as
    ///   NIOResumableUpload answers a version it does not know.
    /// - Throws: The bind error if no port could be bound, or a file error for its temp folder.
    public static func start(interopVersions: [Int]? = nil) async throws -> ResumableUploadTestServer {
        let directory = try ServerSupport.makeDirectory("haul-resumable")
        let folder = directory.appendingPathComponent("uploads")
        // One thread of its own: shutting the group down closes every connection.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let shared = Shared()
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.backlog, value: 64)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        guard let context = shared.context.withLock({ $0 }) else { throw ChannelError.ioOnClosedChannel }
                        let sync = channel.pipeline.syncOperations
                        try sync.configureHTTPServerPipeline()
                        try sync.addHandler(ConnectionCutter(shared: shared))
                        if let interopVersions { try sync.addHandler(VersionGate(versions: interopVersions)) }
                        try sync.addHandler(HTTP1ToHTTPServerCodec(secure: false))
                        try sync.addHandler(
                            HTTPResumableUploadHandler(context: context) { upload in
                                // Without its writer an upload would vanish: closed, the client hears of it.
                                do {
                                    try upload.pipeline.syncOperations.addHandler(UploadWriter(folder: folder, shared: shared))
                                } catch {
                                    upload.close(promise: nil)
                                }
                            })
                    }
                }
                .bind(host: "127.0.0.1", port: 0)
                .get()
            guard let port = channel.localAddress?.port else { throw ChannelError.unknownLocalAddress }
            shared.context.withLock {
                $0 = HTTPResumableUploadContext(origin: "http://127.0.0.1:\(port)", path: "/resumable_upload/", timeout: .minutes(5))
            }
            return ResumableUploadTestServer(port: port, directory: directory, folder: folder, group: group, channel: channel, shared: shared)
        } catch {
            try? await group.shutdownGracefully()
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    /// Starts a server (taking only `interopVersions`, when given), runs `body` with it, and
    /// stops the server however `body` ends.
    public static func withServer<Result>(
        interopVersions: [Int]? = nil,
        isolation: isolated (any Actor)? = #isolation,
        _ body: (ResumableUploadTestServer) async throws -> Result
    ) async throws -> Result {
        let server = try await start(interopVersions: interopVersions)
        do {
            let result = try await body(server)
            await server.stop()
            return result
        } catch {
            await server.stop()
            throw error
        }
    }

    /// What the server has received so far.
    public func received() -> Received { shared.state.withLock { $0.received } }

    /// Closes the connection that brings the request body bytes past `bytes` (counted from
    /// the server's start, as ``Received/bytes``), once: a connection cut in the middle of an
    /// upload, which NIOResumableUpload keeps for the client to resume.
    public func cutConnection(afterBytes bytes: Int64) {
        shared.state.withLock { $0.cutAt = bytes }
    }

    /// Stops listening, closes every connection, stops the server's thread and removes its
    /// temp folder. Calling it again does nothing.
    public func stop() async {
        let alreadyDown = isShutDown.withLock { down in
            defer { down = true }
            return down
        }
        guard !alreadyDown else { return }
        try? await channel.close()
        try? await group.shutdownGracefully()
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Counts the request body bytes as they come off the socket, and cuts the connection that
/// brings them past the server's cut.
private final class ConnectionCutter: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    let shared: ResumableUploadTestServer.Shared

    init(shared: ResumableUploadTestServer.Shared) { self.shared = shared }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var cut = false
        switch unwrapInboundIn(data) {
        case .head(let head):
            let request = ResumableUploadTestServer.Request(
                method: head.method.rawValue, interopVersion: head.headers.first(name: "Upload-Draft-Interop-Version"),
                uploadComplete: head.headers.first(name: "Upload-Complete"),
                uploadIncomplete: head.headers.first(name: "Upload-Incomplete"), contentType: head.headers.first(name: "Content-Type"))
            shared.state.withLock {
                $0.received.methods[head.method.rawValue, default: 0] += 1
                $0.received.requests.append(request)
            }
        case .body(let body):
            cut = shared.state.withLock { state in
                state.received.bytes += Int64(body.readableBytes)
                guard let cutAt = state.cutAt, state.received.bytes >= cutAt else { return false }
                state.cutAt = nil
                state.received.cuts += 1
                return true
            }
        case .end:
            break
        }
        context.fireChannelRead(data)
        if cut { context.close(promise: nil) }
    }
}

/// Answers a request that names an interop version of the draft other than ``versions``
/// `400 Bad Request` naming the last of them, once its body is read, and passes on the others.
///
/// It reads on by itself while it refuses: NIOResumableUpload, behind it, lets a read through
/// only after a request it saw, and it sees none of these.
private final class VersionGate: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let versions: [Int]
    /// The request being refused: its body is dropped, its end answered.
    private var refusing = false

    init(versions: [Int]) { self.versions = versions }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            if let named = head.headers.first(name: "Upload-Draft-Interop-Version"), !versions.contains(where: { String($0) == named }) {
                refusing = true
                return context.read()
            }
        case .body:
            if refusing { return context.read() }
        case .end:
            if refusing {
                refusing = false
                var headers = HTTPHeaders([("Content-Length", "0")])
                if let latest = versions.last { headers.add(name: "Upload-Draft-Interop-Version", value: String(latest)) }
                context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .badRequest, headers: headers))), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
                return context.read()
            }
        }
        context.fireChannelRead(data)
    }
}

/// The application behind NIOResumableUpload: it sees one plain request per upload, however
/// many requests the client needed, and writes its body to a file named by the URL's last path
/// component.
private final class UploadWriter: ChannelInboundHandler {
    typealias InboundIn = HTTPRequestPart
    typealias OutboundOut = HTTPResponsePart

    let folder: URL
    let shared: ResumableUploadTestServer.Shared
    private var file: FileHandle?

    init(folder: URL, shared: ResumableUploadTestServer.Shared) {
        self.folder = folder
        self.shared = shared
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let request):
            switch request.method {
            case .post, .put:
                let name = (request.path ?? "").split(separator: "?").first.map { (String($0) as NSString).lastPathComponent } ?? ""
                guard !name.isEmpty, name != "/", name != "..", name != "." else { return respond(context, .badRequest) }
                let path = folder.appendingPathComponent(name).path
                guard FileManager.default.createFile(atPath: path, contents: nil), let handle = FileHandle(forWritingAtPath: path) else {
                    return respond(context, .internalServerError)
                }
                file = handle
                shared.state.withLock { $0.received.creations += 1 }
            case .options:
                respond(context, .noContent)
            default:
                respond(context, .methodNotAllowed)
            }
        case .body(let body):
            guard let file else { return }
            do {
                try body.withUnsafeReadableBytes { try file.write(contentsOf: $0) }
            } catch {
                // Answered once: the rest of the body, and its end, find no file.
                self.file = nil
                try? file.close()
                respond(context, .internalServerError)
            }
        case .end:
            guard let file else { return }
            self.file = nil
            do {
                try file.close()
            } catch {
                return respond(context, .internalServerError)
            }
            shared.state.withLock { $0.received.completions += 1 }
            respond(context, .created)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        try? file?.close()
        file = nil
        context.fireChannelInactive()
    }

    private func respond(_ context: ChannelHandlerContext, _ status: HTTPResponse.Status) {
        var response = HTTPResponse(status: status)
        if status != .noContent { response.headerFields[.contentLength] = "0" }
        context.write(wrapOutboundOut(.head(response)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}
