import Foundation
import Haul
import Logging

/// aria2's JSON-RPC interface over a ``DownloadManager``: one request (or a batch) in, one
/// answer out, whatever carries it (HTTP POST or a WebSocket message).
///
/// Differences from aria2c, on purpose:
/// - `remove` also deletes the partial file (aria2 leaves it and its `.aria2` file behind).
/// - Several URIs of `addUri` are sources of one file, as in aria2: its segments are spread
///   over them, and `changeUri` edits the list. `addMetalink` adds one download for each file
///   of the document, from its `http`/`https` URLs; its `out` and `checksum` options are refused.
/// - `split` and `max-connection-per-server` both default to 4 (aria2: 5 and 1).
/// - Downloads, finished ones too, survive a restart of the daemon: the store is the session,
///   so `saveSession` has nothing left to do.
public actor Aria2RPC {
    /// What `shutdown` and `forceShutdown` ask the daemon to do once they have answered.
    public typealias ShutdownRequest = @Sendable () -> Void

    let manager: DownloadManager
    let downloader: Downloader
    /// The folder trees it keeps in sync (`haul.addMirror`).
    let mirrors: DaemonMirrors
    let secret: String?
    var globals: GlobalOptions {
        didSet { template = Aria2Options.template(globals) }
    }
    /// The request new downloads start from: ``globals`` made once into a request.
    private(set) var template: DownloadRequest
    let sessionID: String
    let requestShutdown: ShutdownRequest
    /// Where changes to the daemon-wide options are said (at `.notice`, shown by default).
    let logger: Logger
    /// When wrong tokens are answered, per client address.
    private var backoff = WrongTokenBackoff()
    /// In a fleet, the other daemons: calls about the downloads they hold are carried to them.
    var fleet: FleetLink?

    init(
        manager: DownloadManager, downloader: Downloader, secret: String?, globals: GlobalOptions,
        logger: Logger = Logger(label: "haul-daemon"), mirrors: DaemonMirrors? = nil,
        requestShutdown: @escaping ShutdownRequest
    ) {
        self.manager = manager
        self.downloader = downloader
        self.mirrors = mirrors ?? DaemonMirrors(downloader: downloader, settings: manager, logger: logger)
        self.secret = secret
        self.logger = logger
        self.globals = globals
        template = Aria2Options.template(globals)
        self.requestShutdown = requestShutdown
        sessionID = (0..<40).map { _ in String(Int.random(in: 0..<16), radix: 16) }.joined()
    }

    /// One of aria2's methods: who may call it and whether it changes anything.
    struct Method: Sendable {
        enum Access: Sendable {
            /// Answers without the secret, as in aria2 (a multicall's calls carry their own); reads only.
            case open
            /// Needs the secret; reads only, so the GET form of `/jsonrpc` may call it.
            case reads
            /// Needs the secret and changes the daemon's state: `POST` and WebSocket only.
            case changes
        }

        let name: String
        let access: Access
    }

    /// aria2's methods, each named once, in aria2's order, then Haul's own (`system.listMethods`). The GET form
    /// answers only those that read: a browser sends that form from `<img>` and `<script>` of
    /// any page, so it must change nothing.
    static let table: [Method] = [
        .init(name: "aria2.addUri", access: .changes), .init(name: "aria2.addTorrent", access: .changes),
        .init(name: "aria2.getPeers", access: .reads), .init(name: "aria2.addMetalink", access: .changes),
        .init(name: "aria2.remove", access: .changes), .init(name: "aria2.pause", access: .changes),
        .init(name: "aria2.forcePause", access: .changes), .init(name: "aria2.pauseAll", access: .changes),
        .init(name: "aria2.forcePauseAll", access: .changes), .init(name: "aria2.unpause", access: .changes),
        .init(name: "aria2.unpauseAll", access: .changes), .init(name: "aria2.forceRemove", access: .changes),
        .init(name: "aria2.changePosition", access: .changes), .init(name: "aria2.tellStatus", access: .reads),
        .init(name: "aria2.getUris", access: .reads), .init(name: "aria2.getFiles", access: .reads),
        .init(name: "aria2.getServers", access: .reads), .init(name: "aria2.tellActive", access: .reads),
        .init(name: "aria2.tellWaiting", access: .reads), .init(name: "aria2.tellStopped", access: .reads),
        .init(name: "aria2.getOption", access: .reads), .init(name: "aria2.changeUri", access: .changes),
        .init(name: "aria2.changeOption", access: .changes), .init(name: "aria2.getGlobalOption", access: .reads),
        .init(name: "aria2.changeGlobalOption", access: .changes), .init(name: "aria2.purgeDownloadResult", access: .changes),
        .init(name: "aria2.removeDownloadResult", access: .changes), .init(name: "aria2.getVersion", access: .reads),
        .init(name: "aria2.getSessionInfo", access: .reads), .init(name: "aria2.shutdown", access: .changes),
        .init(name: "aria2.forceShutdown", access: .changes), .init(name: "aria2.getGlobalStat", access: .reads),
        .init(name: "aria2.saveSession", access: .changes), .init(name: "system.multicall", access: .open),
        .init(name: "system.listMethods", access: .open), .init(name: "system.listNotifications", access: .open),
        // Haul's own, name-spaced: folder trees kept in sync.
        .init(name: "haul.addMirror", access: .changes), .init(name: "haul.tellMirrors", access: .reads),
        .init(name: "haul.removeMirror", access: .changes), .init(name: "haul.runMirror", access: .changes),
        // Uploads, queued with the downloads.
        .init(name: "haul.addUpload", access: .changes), .init(name: "haul.tellUploads", access: .reads),
    ]

    /// aria2's methods about one download (its GID first) that the daemon holding it answers:
    /// in a fleet, carried to it (``carry(_:_:_:)``).
    static let carried: Set<String> = [
        "aria2.remove", "aria2.forceRemove", "aria2.pause", "aria2.forcePause", "aria2.unpause", "aria2.tellStatus",
        "aria2.getUris", "aria2.getFiles", "aria2.getServers", "aria2.changePosition", "aria2.changeUri", "aria2.getOption",
        "aria2.changeOption", "aria2.removeDownloadResult",
        // The whole queue's, carried to every daemon (carryEverywhere).
        "aria2.pauseAll", "aria2.forcePauseAll", "aria2.unpauseAll", "aria2.purgeDownloadResult",
    ]

    /// aria2's methods that take an upload's GID as well as a download's.
    static let uploadControls: Set<String> = [
        "aria2.tellStatus", "aria2.remove", "aria2.forceRemove", "aria2.pause", "aria2.forcePause", "aria2.unpause", "aria2.removeDownloadResult",
    ]

    /// The methods' names, in ``table``'s order.
    static let methods = table.map(\.name)

    static let notifications = [
        "aria2.onDownloadStart", "aria2.onDownloadPause", "aria2.onDownloadStop", "aria2.onDownloadComplete",
        "aria2.onDownloadError", "aria2.onBtDownloadComplete", "haul.onUploadStart", "haul.onUploadComplete", "haul.onUploadError",
    ]

    /// Methods that answer without the secret (``table``'s `.open` ones).
    static let open = Set(table.filter { $0.access == .open }.map(\.name))

    /// Methods that only read, the only ones the GET form of `/jsonrpc` answers.
    static let readOnlyMethods = Set(table.filter { $0.access != .changes }.map(\.name))

    /// How a request (one HTTP request or WebSocket message) may act and what it did.
    struct Exchange {
        /// Only ``Aria2RPC/readOnlyMethods`` run (the GET form).
        var readOnly = false
        /// A call had a wrong or missing token.
        var refused = false
        /// Who sent it, for the log: the client's address, or nil in-process.
        var client: String?
        /// Downloads listed so far in the request's answers (tellActive, tellWaiting, tellStopped).
        var listed = 0
        /// Carried here by another daemon of the fleet, which checked the token: answered here,
        /// never carried on again.
        var carried = false
        /// A call that may change the queue ran: in a fleet, a single call's changes are written
        /// before the answer goes out, so that a call through another daemon sees them.
        var changed = false
        /// Calls made, those of a multicall or a batch each.
        var calls = 0
        /// In a fleet, when the request stops waiting for GIDs no daemon knows yet (set at the
        /// first one it meets).
        var unknownGIDsWaitEnds: ContinuousClock.Instant?

        /// Counts `count` more downloads into the answer, or refuses the call that would take it
        /// past ``Aria2RPC/maxListedPerRequest``.
        mutating func charge(_ count: Int) throws(RPCError) {
            guard count <= Aria2RPC.maxListedPerRequest - listed else {
                throw .failed(
                    "one request may list at most \(Aria2RPC.maxListedPerRequest) downloads across its answers (tellActive, tellWaiting and tellStopped together); ask for fewer at a time, in pages of 1000 for example"
                )
            }
            listed += count
        }
    }

    /// The most downloads one request's answers may list, however it asks (one call with a
    /// large `num`, a multicall or a batch of many). 20,000 `tellStopped(0, 1000)` in a 1 MB
    /// multicall made an answer of 311 MB. The bound is far above what clients ask: the web
    /// page reads pages of 1000, `haul ls` three lists of 1000, aria2p lists of 1000.
    static let maxListedPerRequest = 100_000

    // MARK: Requests

    /// The answer to a request body: one answer object, or an array for a batch (aria2 drops
    /// the elements that are not objects).
    ///
    /// A request with a wrong or missing token is one guess, however many of its calls carry
    /// one (after the first wrong token, later ones are not compared), answered a second after
    /// the previous wrong guess from the same address (``WrongTokenBackoff``). aria2 waits a
    /// second per call, so a batch of many never got an answer; a wait per request alone let
    /// 200 guesses sent at once take one second.
    ///
    /// - Parameters:
    ///   - readOnly: answer only methods that change nothing (the GET form).
    ///   - client: the client's address; wrong guesses are counted per address.
    public func respond(to body: some DataProtocol, readOnly: Bool = false, client: String? = nil) async -> JSONValue {
        var exchange = Exchange(readOnly: readOnly, client: client)
        let answer = await respond(to: body, &exchange)
        // A single call is written before its answer; a batch or multicall (a list added) is
        // written by the group commit as always: a daemon asked about one of its GIDs meanwhile
        // looks again for a moment (carry).
        if exchange.changed, exchange.calls == 1 { await settleForFleet() }
        if exchange.refused {
            let until = backoff.answerTime(for: WrongTokenBackoff.bucket(client ?? ""), at: .now)
            try? await Task.sleep(until: until, clock: .continuous)
        }
        return answer
    }

    private func respond(to body: some DataProtocol, _ exchange: inout Exchange) async -> JSONValue {
        let request: JSONValue
        do { request = try JSONValue.parse(body) } catch {
            return Self.answer(id: .null, .failure(.parseError))
        }
        switch request {
        case .array(let batch):
            var answers: [JSONValue] = []
            answers.reserveCapacity(batch.count)
            for item in batch where item.object != nil { answers.append(await handle(item, &exchange)) }
            return .array(answers)
        case .object:
            return await handle(request, &exchange)
        case .string, .bool, .null:
            return Self.answer(id: .null, .failure(.invalidRequest))
        case .int, .double:
            return Self.answer(id: .null, .failure(.parseError))
        }
    }

    /// One request object's answer. A request without an `id` gets an error, as from aria2
    /// (which answers JSON-RPC notifications with "Invalid Request.").
    func handle(_ request: JSONValue, _ exchange: inout Exchange) async -> JSONValue {
        guard let object = request.object, let method = object["method"]?.string, let id = object["id"] else {
            return Self.answer(id: request["id"] ?? .null, .failure(.invalidRequest))
        }
        let params: [JSONValue]
        switch object["params"] {
        case nil, .null?: params = []
        case .array(let list)?: params = list
        default: return Self.answer(id: id, .failure(.invalidParams))
        }
        do { return Self.answer(id: id, .success(try await call(method, params, &exchange))) } catch {
            return Self.answer(id: id, .failure(error))
        }
    }

    static func answer(id: JSONValue, _ outcome: Result<JSONValue, RPCError>) -> JSONValue {
        switch outcome {
        case .success(let result): ["id": id, "jsonrpc": "2.0", "result": result]
        case .failure(let error): ["id": id, "jsonrpc": "2.0", "error": error.json]
        }
    }

    /// Checks the secret and runs one method.
    func call(_ method: String, _ params: [JSONValue], _ exchange: inout Exchange) async throws(RPCError) -> JSONValue {
        var params = params
        var authorized = secret == nil || Self.open.contains(method)
        if let first = params.first?.string, first.hasPrefix("token:") {
            params.removeFirst()
            // One guess per request: a batch of 10,000 different tokens tests the first wrong one.
            if let secret, !exchange.refused {
                authorized = authorized || Self.constantTimeEqual(String(first.dropFirst(6)), secret)
            }
        }
        guard authorized else {
            exchange.refused = true
            throw .unauthorized
        }
        guard !exchange.readOnly || Self.readOnlyMethods.contains(method) else {
            throw .failed("\(method) changes the daemon's state, which the GET form of /jsonrpc never does; send it by POST or over the WebSocket")
        }
        if method == "system.multicall" { return try await multicall(Parameters(values: params), &exchange) }
        exchange.calls += 1
        if !Self.readOnlyMethods.contains(method) { exchange.changed = true }
        return try await dispatch(method, Parameters(values: params), &exchange)
    }

    /// Whether calls must carry a token (an empty `--rpc-secret` is none).
    var hasSecret: Bool { !(secret ?? "").isEmpty }

    /// Whether a request with this `Authorization` header may read `/metrics`: any request when
    /// the daemon has no secret, else only one with `Bearer SECRET`. A refusal is a wrong guess
    /// like a call's wrong token, answered after the same wait (``WrongTokenBackoff``).
    func allowsScrape(authorization: String?, client: String?) async -> Bool {
        guard hasSecret, let secret else { return true }
        if let authorization, authorization.lowercased().hasPrefix("bearer "),
            Self.constantTimeEqual(authorization.dropFirst("bearer ".count).trimmingCharacters(in: .whitespaces), secret)
        {
            return true
        }
        let until = backoff.answerTime(for: WrongTokenBackoff.bucket(client ?? ""), at: .now)
        try? await Task.sleep(until: until, clock: .continuous)
        return false
    }

    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let (x, y) = (Array(a.utf8), Array(b.utf8))
        guard x.count == y.count else { return false }
        return zip(x, y).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }

    func multicall(_ p: Parameters, _ exchange: inout Exchange) async throws(RPCError) -> JSONValue {
        guard let calls = p.values.first?.array else { throw .failed("system.multicall takes a list of calls") }
        var results: [JSONValue] = []
        results.reserveCapacity(calls.count)
        for call in calls {
            guard let method = call["methodName"]?.string, method != "system.multicall" else {
                results.append(RPCError.failed("methodName is missing or not allowed").json)
                continue
            }
            let params = call["params"]?.array ?? []
            do { results.append([try await self.call(method, params, &exchange)]) } catch { results.append(error.json) }
        }
        return .array(results)
    }
}
