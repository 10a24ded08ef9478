import Foundation
import Synchronization

/// A throwaway PostgreSQL server on 127.0.0.1, from Debian's `postgresql` package: a cluster
/// made by `initdb` in a temp folder (trusting every local connection), whose superuser `haul`
/// owns a database `haul`. Run as root (as CI runs), the server runs as the `postgres` user,
/// since PostgreSQL refuses to run as root.
///
/// ``stop()`` shuts the server down as an administrator would and keeps its data;
/// ``start()`` (the instance method) brings it back on the same port, so a test can take the
/// database away from a running daemon and give it back.
///
/// ```swift
/// let postgres = try await PostgresServer.start()
/// // haul daemon --store \(postgres.url) …
/// await postgres.remove()
/// ```
public final class PostgresServer: Sendable {
    /// The folder of `initdb` and `postgres`: the newest version installed.
    public static var binDirectory: String? {
        let root = "/usr/lib/postgresql"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return versions.compactMap(Int.init).sorted().reversed().map { "\(root)/\($0)/bin" }.first {
            FileManager.default.isExecutableFile(atPath: "\($0)/postgres")
        }
    }

    /// The port it listens on, on 127.0.0.1.
    public let port: Int
    private let directory: URL
    private let bin: String
    private let server = Mutex<ServerProcess?>(nil)

    private init(port: Int, directory: URL, bin: String) {
        self.port = port
        self.directory = directory
        self.bin = bin
    }

    /// `postgresql://haul@127.0.0.1:PORT/haul?sslmode=disable`, with a connect timeout of
    /// `connectTimeout` seconds when given.
    public func url(connectTimeout: Int? = nil) -> String {
        "postgresql://haul@127.0.0.1:\(port)/haul?sslmode=disable" + (connectTimeout.map { "&connect_timeout=\($0)" } ?? "")
    }

    /// Whether it runs now.
    public var isRunning: Bool { server.withLock { $0?.isRunning ?? false } }

    /// Makes a cluster and starts it on a free port; returns once the database `haul` exists.
    ///
    /// - Throws: ``TestServerError/notInstalled`` without PostgreSQL,
    ///   ``TestServerError/didNotStart`` when `initdb` fails or the server does not answer in time.
    public static func start() async throws -> PostgresServer {
        guard let bin = binDirectory else { throw TestServerError.notInstalled("postgres", package: "postgresql") }
        let directory = try ServerSupport.makeDirectory("haul-postgres")
        do {
            let data = directory.appendingPathComponent("data").path
            if geteuid() == 0 {
                // Its folder must be the server's own.
                chmod(directory.path, 0o755)
                try run("/bin/chown", ["postgres:postgres", directory.path])
            }
            try run(
                "\(bin)/initdb", ["-D", data, "-U", "haul", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"],
                output: directory.appendingPathComponent("initdb.log"))
            let postgres = PostgresServer(port: try await ServerSupport.freePort(), directory: directory, bin: bin)
            try await postgres.start()
            try run(
                "\(bin)/createdb", ["-h", "127.0.0.1", "-p", "\(postgres.port)", "-U", "haul", "haul"],
                output: directory.appendingPathComponent("createdb.log"))
            return postgres
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    /// Starts the server again (after ``stop()``) on the same port and data; returns once it
    /// answers. Does nothing while it runs.
    public func start() async throws {
        if isRunning { return }
        let data = directory.appendingPathComponent("data").path
        // No Unix socket: the tests connect over TCP, and a temp folder's path may be too long.
        let arguments = [
            "\(bin)/postgres", "-D", data, "-h", "127.0.0.1", "-p", "\(port)", "-k", "", "-c", "fsync=off", "-c",
            "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=60",
        ]
        let output = directory.appendingPathComponent("postgres.log")
        let process =
            geteuid() == 0
            ? try ServerProcess.launch(
                "/usr/bin/setpriv", arguments: ["--reuid=postgres", "--regid=postgres", "--init-groups", "--"] + arguments,
                output: output, name: "postgres")
            : try ServerProcess.launch(arguments[0], arguments: Array(arguments.dropFirst()), output: output, name: "postgres")
        server.withLock { $0 = process }
        for _ in 0..<200 {
            guard process.isRunning else { break }
            if await ServerSupport.accepts(port: port), (try? Self.run("\(bin)/pg_isready", ["-h", "127.0.0.1", "-p", "\(port)"])) != nil {
                return
            }
            try? await Task.sleep(for: .milliseconds(100))
        }
        await process.stop()
        throw TestServerError.didNotStart("postgres", detail: "on 127.0.0.1:\(port); it said: \(ServerSupport.tail(output))")
    }

    /// Shuts the server down (PostgreSQL's fast shutdown: open connections are closed) and
    /// waits until it has exited; its data stays for ``start()``.
    public func stop() async {
        guard let process = server.withLock({ $0 }) else { return }
        signal(SIGCONT)
        kill(process.pid, SIGINT)
        if !(await ServerProcess.waitForExit(process.process, seconds: 20)) { await process.stop() }
        await process.stop()
        server.withLock { $0 = nil }
    }

    /// Sends `signal` to the server and every process it started (its backends): `SIGSTOP` makes
    /// a server that neither answers nor closes its connections, as one whose machine hangs;
    /// `SIGCONT` brings it back.
    public func signal(_ signal: Int32) {
        guard let pid = server.withLock({ $0?.pid }) else { return }
        var pending = [pid]
        while let next = pending.popLast() {
            kill(next, signal)
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(next)/task")) ?? []
            for task in tasks {
                let children = (try? String(contentsOfFile: "/proc/\(next)/task/\(task)/children", encoding: .utf8)) ?? ""
                pending += children.split(separator: " ").compactMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            }
        }
    }

    /// Stops the server and removes its folder.
    public func remove() async {
        await stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Runs `body` with a started server and removes it afterwards, whether `body` returns or throws.
    public static func with<T>(_ body: (PostgresServer) async throws -> T) async throws -> T {
        let server = try await start()
        do {
            let result = try await body(server)
            await server.remove()
            return result
        } catch {
            await server.remove()
            throw error
        }
    }

    /// Runs `sql` in the database `haul` with `psql` (as its superuser `haul`); returns what it
    /// printed, unaligned and without headers. For what a test does to the server from outside:
    /// `pg_terminate_backend` of a daemon's connection, a look at `pg_stat_activity`.
    public func query(_ sql: String) throws -> String {
        let output = directory.appendingPathComponent("query-\(UUID().uuidString).out")
        defer { try? FileManager.default.removeItem(at: output) }
        try Self.run(
            "\(bin)/psql", ["-h", "127.0.0.1", "-p", "\(port)", "-U", "haul", "-d", "haul", "-X", "-A", "-t", "-o", output.path, "-c", sql])
        return (try? String(contentsOf: output, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
    }

    /// Runs a PostgreSQL tool to its end (as `postgres` when this process is root); throws
    /// with its last lines when it fails.
    private static func run(_ tool: String, _ arguments: [String], output: URL? = nil) throws {
        let process = Process()
        let asPostgres = geteuid() == 0 && tool != "/bin/chown"
        process.executableURL = URL(fileURLWithPath: asPostgres ? "/usr/bin/setpriv" : tool)
        process.arguments = asPostgres ? ["--reuid=postgres", "--regid=postgres", "--init-groups", "--", tool] + arguments : arguments
        // Run as `postgres`, a tool in a folder that user may not enter (a clone under root's
        // temp folder) says so before anything else.
        if asPostgres { process.currentDirectoryURL = URL(fileURLWithPath: "/") }
        process.standardInput = FileHandle.nullDevice
        var handle: FileHandle?
        if let output {
            _ = FileManager.default.createFile(atPath: output.path, contents: nil)
            handle = try FileHandle(forWritingTo: output)
        }
        process.standardOutput = handle ?? FileHandle.nullDevice
        process.standardError = handle ?? FileHandle.nullDevice
        defer { try? handle?.close() }
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let said = output.map { ServerSupport.tail($0) } ?? ""
            throw TestServerError.didNotStart(
                (tool as NSString).lastPathComponent, detail: "(exit \(process.terminationStatus)); it said: \(said)")
        }
    }
}
