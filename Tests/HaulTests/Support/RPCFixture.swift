import Foundation
import Synchronization
import HaulTestSupport
import Testing
@testable import Haul
@testable import HaulDaemon

/// The daemon's JSON-RPC in-process: an ``Aria2RPC`` over a manager and a downloader on a
/// test folder, called without any socket of its own (downloads go to a ``FaultServer``).
struct RPCFixture {
    let dir: TestDirectory
    let server: FaultServer
    let downloader: Downloader
    let manager: DownloadManager
    let rpc: Aria2RPC
    let secret: String?
    let shutdownRequested: Counter

    var downloads: String { dir.file("downloads") }

    final class Counter: Sendable {
        private let count = Mutex(0)
        func increment() { count.withLock { $0 += 1 } }
        var value: Int { count.withLock { $0 } }
    }

    /// Runs `body` with a fresh fixture, shutting everything down however it ends.
    static func with(
        secret: String? = nil, maxConcurrent: Int = 5, connections: Int = 4,
        _ body: (RPCFixture) async throws -> Void
    ) async throws {
        let dir = try TestDirectory()
        let server = try await FaultServer.start()
        var configuration = Daemon.Configuration(stateDirectory: dir.file("state"), directory: dir.file("downloads"))
        configuration.secret = secret
        configuration.maxConcurrentDownloads = maxConcurrent
        configuration.connections = connections
        var engine = Daemon.engineConfiguration(configuration, logger: .init(label: "test"))
        engine.stallTimeout = .seconds(5)
        let downloader = try Downloader(engine)
        let manager = DownloadManager(downloader: downloader, configuration: .init(maxConcurrentDownloads: maxConcurrent, queue: Daemon.queue))
        let counter = Counter()
        let rpc = Aria2RPC(
            manager: manager, downloader: downloader, secret: secret,
            globals: Daemon.globalOptions(configuration), requestShutdown: { counter.increment() })
        let fixture = RPCFixture(
            dir: dir, server: server, downloader: downloader, manager: manager, rpc: rpc,
            secret: secret, shutdownRequested: counter)
        var failure: (any Error)?
        do { try await body(fixture) } catch { failure = error }
        await rpc.mirrors.stopAll()
        await manager.shutdown()
        try? await downloader.shutdown()
        try? await server.shutdown()
        dir.remove()
        if let failure { throw failure }
    }

    /// The whole answer to a request body.
    func answer(_ body: String, readOnly: Bool = false) async -> JSONValue {
        await rpc.respond(to: Data(body.utf8), readOnly: readOnly)
    }

    /// `params` with `token:SECRET` first when the fixture has a secret.
    func tokened(_ params: [JSONValue]) -> [JSONValue] {
        (secret.map { [JSONValue.string("token:\($0)")] } ?? []) + params
    }

    /// Calls `method` with the secret; its result, or the ``RPCError`` it answered.
    @discardableResult
    func call(_ method: String, _ params: [JSONValue] = []) async throws -> JSONValue {
        let request: JSONValue = ["jsonrpc": "2.0", "id": 1, "method": .string(method), "params": .array(tokened(params))]
        let answer = await rpc.respond(to: request.data)
        if let error = answer["error"] {
            throw RPCError(code: Int(error["code"]?.integer ?? 0), message: error["message"]?.string ?? "")
        }
        return answer["result"] ?? .null
    }

    /// The error message `method` answers with, or nil when it succeeds.
    func failure(_ method: String, _ params: [JSONValue] = []) async -> String? {
        do {
            _ = try await call(method, params)
            return nil
        } catch {
            return (error as? RPCError)?.message ?? "\(error)"
        }
    }

    /// Serves `size` bytes at `path` (optionally trickled) and returns them.
    @discardableResult
    func serve(_ path: String, seed: UInt64 = 1, size: Int = 64 << 10, bytesPerSecond: Int? = nil) -> [UInt8] {
        var route = Route(content: testBytes(size, seed: seed))
        route.bytesPerSecond = bytesPerSecond
        server.serve(path, route)
        return route.content
    }

    /// Polls `tellStatus` until `condition` holds, at most `timeout`.
    @discardableResult
    func waitFor(_ gid: String, timeout: Duration = .seconds(30), _ condition: (JSONValue) -> Bool) async throws -> JSONValue {
        let deadline = ContinuousClock.now + timeout
        while true {
            let status = try await call("aria2.tellStatus", [.string(gid)])
            if condition(status) { return status }
            guard ContinuousClock.now < deadline else {
                throw RPCError(code: 0, message: "timed out waiting for \(gid); last status \(status)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// The GIDs of a `tellWaiting`/`tellStopped`/`tellActive` answer.
    func gids(_ method: String, _ params: [JSONValue] = []) async throws -> [String] {
        try await call(method, params).array?.compactMap { $0["gid"]?.string } ?? []
    }
}
