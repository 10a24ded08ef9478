import Foundation

/// A throwaway tus 1.0.0 server on 127.0.0.1: aiohttp-tus (PyPI), the way its own
/// documentation sets it up (`setup_tus` on an aiohttp application), run by a small script
/// written into a temp folder.
///
/// Uploads are created at ``url`` (`/files`); a finished one lands in ``folder`` under the
/// name its `Upload-Metadata` gave. The script counts what every `PATCH` brought, whether
/// the request completed or was cut off (``received()``): the proof of how much a resumed
/// upload sent again.
///
/// ```swift
/// let tus = try await TusTestServer.start()
/// // ... upload a.bin to tus.url ...
/// let stored = try Data(contentsOf: tus.folder.appendingPathComponent("a.bin"))
/// #expect(tus.received().bytes == Int64(stored.count))
/// await tus.stop()
/// ```
public final class TusTestServer: Sendable {
    /// What the server has received so far.
    public struct Received: Sendable, Hashable {
        /// Body bytes of every `PATCH`, cut off ones included.
        public var bytes: Int64
        /// `PATCH` requests begun.
        public var patches: Int
        /// Uploads created (`POST`).
        public var creations: Int
    }

    /// The largest `PATCH` the server takes (aiohttp's `client_max_size`, which aiohttp-tus's
    /// whole-body read is held to).
    public static let maxChunk = 64 << 20

    /// The port it listens on, on 127.0.0.1.
    public let port: Int
    /// Where finished uploads land.
    public let folder: URL
    private let server: ServerProcess
    private let directory: URL

    private init(port: Int, folder: URL, server: ServerProcess, directory: URL) {
        self.port = port
        self.folder = folder
        self.server = server
        self.directory = directory
    }

    /// The creation endpoint: `http://127.0.0.1:PORT/files`.
    public var url: String { "http://127.0.0.1:\(port)/files" }

    /// The server's process id (a test may stop it with a signal).
    public var pid: pid_t { server.pid }

    /// Starts the server on a free port; returns once it accepts connections (at most ~20 s).
    ///
    /// - Throws: ``TestServerError/notInstalled`` without python3 and aiohttp-tus
    ///   (`scripts/install-deps.sh --with-test-servers`), ``TestServerError/didNotStart`` when it
    ///   exits or does not listen in time.
    public static func start() async throws -> TusTestServer {
        guard let python = ServerSupport.findExecutable("python3", extraDirectories: ["/usr/bin", "/usr/local/bin"]),
            (try? ServerSupport.run(python, ["-c", "import aiohttp_tus"]))?.status == 0
        else {
            throw TestServerError.notInstalled("aiohttp-tus", package: "aiohttp-tus (PyPI: scripts/install-deps.sh --with-test-servers)")
        }
        let directory = try ServerSupport.makeDirectory("haul-tus")
        let folder = directory.appendingPathComponent("uploads")
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let script = directory.appendingPathComponent("tus_server.py")
            try Self.script.write(to: script, atomically: true, encoding: .utf8)
            let output = directory.appendingPathComponent("output.log")
            var failure = TestServerError.didNotStart("aiohttp-tus", detail: "")
            for _ in 1...3 {
                let port = try await ServerSupport.freePort()
                let server = try ServerProcess.launch(
                    python, arguments: [script.path, String(port), folder.path, directory.appendingPathComponent("received.json").path, String(maxChunk)],
                    output: output, name: "tus")
                if await waitUntilListening(server, port: port) {
                    return TusTestServer(port: port, folder: folder, server: server, directory: directory)
                }
                let hung = server.isRunning
                await server.stop()
                failure = .didNotStart("aiohttp-tus", detail: "on 127.0.0.1:\(port); it said: \(ServerSupport.tail(output))")
                if hung { break }
            }
            throw failure
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    /// What the server has received so far (written by the script as each `PATCH` ends).
    public func received() -> Received {
        let path = directory.appendingPathComponent("received.json")
        guard let data = try? Data(contentsOf: path),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Int]
        else { return Received(bytes: 0, patches: 0, creations: 0) }
        return Received(bytes: Int64(object["bytes"] ?? 0), patches: object["patches"] ?? 0, creations: object["creations"] ?? 0)
    }

    /// The uploads begun and not finished: aiohttp-tus keeps each in `.resources` until its
    /// last byte.
    public func unfinishedUploads() -> Int {
        let resources = folder.appendingPathComponent(".resources")
        return ((try? FileManager.default.contentsOfDirectory(atPath: resources.path)) ?? []).count
    }

    /// Stops the server and removes its temp folder. Calling it again does nothing.
    public func stop() async {
        await server.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    private static func waitUntilListening(_ server: ServerProcess, port: Int) async -> Bool {
        for _ in 0..<200 {
            guard server.isRunning else { return false }
            if await ServerSupport.accepts(port: port) { return true }
            try? await Task.sleep(for: .milliseconds(100))
        }
        return false
    }

    /// The server: aiohttp-tus on `/files`, overwriting finished files of the same name (a test
    /// uploads the same file twice), and a middleware that counts each `PATCH`'s body as it
    /// arrives and hands what came to aiohttp-tus's own read.
    static let script = #"""
        import json, os, sys
        from pathlib import Path
        from aiohttp import web
        from aiohttp_tus import setup_tus

        port, folder, counts, max_chunk = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
        received = {"bytes": 0, "patches": 0, "creations": 0}

        def save():
            with open(counts + ".tmp", "w") as f:
                json.dump(received, f)
            os.replace(counts + ".tmp", counts)

        @web.middleware
        async def count(request, handler):
            if request.method == "POST":
                received["creations"] += 1
                save()
            if request.method != "PATCH":
                return await handler(request)
            received["patches"] += 1
            body = bytearray()
            try:
                async for data in request.content.iter_any():
                    received["bytes"] += len(data)
                    body += data
            finally:
                save()
            # aiohttp keeps a read body here; aiohttp-tus's request.read() returns it.
            request._read_bytes = bytes(body)
            return await handler(request)

        app = web.Application(client_max_size=max_chunk, middlewares=[count])
        setup_tus(app, upload_path=folder, upload_url="/files", allow_overwrite_files=True)
        save()
        web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)
        """#
}
