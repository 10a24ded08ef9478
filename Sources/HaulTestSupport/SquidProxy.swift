import Foundation

/// A throwaway squid on 127.0.0.1 with Debian's stock access rules: the proxy a company's
/// users most often sit behind.
///
/// The rules are read from the installed `/etc/squid/squid.conf` as the package ships it
/// (`http_access deny !Safe_ports`, `http_access deny CONNECT !SSL_ports` — a tunnel only to
/// port 443 —, `http_access allow localhost`, `http_access deny all`); only where it listens,
/// logs and keeps its pid are replaced, and caching is off so every request reaches the origin.
/// ``requests()`` reads squid's access log: the method, the target and the status it answered.
///
/// ```swift
/// let squid = try await SquidProxy.start()
/// // ... download nginx.url("/a.bin") through squid.url ...
/// #expect(squid.requests().contains { $0.method == "GET" && $0.target == nginx.url("/a.bin") })
/// await squid.stop()
/// ```
public final class SquidProxy: Sendable {
    /// The squid binary, or nil when none is installed.
    public static var executablePath: String? {
        ServerSupport.findExecutable("squid", extraDirectories: ["/usr/sbin", "/usr/bin", "/usr/local/sbin"])
    }

    /// Debian's configuration, whose rules the proxy runs with.
    static let stockConfiguration = "/etc/squid/squid.conf"

    /// The port squid listens on, on 127.0.0.1.
    public let port: Int
    private let server: ServerProcess
    private let directory: URL

    private init(port: Int, server: ServerProcess, directory: URL) {
        self.port = port
        self.server = server
        self.directory = directory
    }

    /// `http://127.0.0.1:PORT`.
    public var url: String { "http://127.0.0.1:\(port)" }

    /// Starts squid on a free port of 127.0.0.1; returns once it accepts connections (at most
    /// about 20 s: squid takes a second or two to start).
    ///
    /// - Throws: ``TestServerError/notInstalled`` without squid (or its stock configuration),
    ///   ``TestServerError/didNotStart`` when it exits or does not listen in time.
    public static func start() async throws -> SquidProxy {
        guard let squid = executablePath, let stock = try? String(contentsOfFile: stockConfiguration, encoding: .utf8) else {
            throw TestServerError.notInstalled("squid", package: "squid")
        }
        let directory = try ServerSupport.makeDirectory("haul-squid")
        // Started as root, squid works as the `proxy` user: it must be able to write its logs here.
        chmod(directory.path, 0o777)
        let output = directory.appendingPathComponent("output.log")
        do {
            var failure = TestServerError.didNotStart("squid", detail: "")
            for _ in 1...3 {
                let port = try await ServerSupport.freePort()
                let configFile = directory.appendingPathComponent("squid.conf")
                try configuration(stock: stock, port: port, directory: directory.path)
                    .write(to: configFile, atomically: true, encoding: .utf8)
                // -N: in the foreground, one process.
                let server = try ServerProcess.launch(squid, arguments: ["-N", "-f", configFile.path], output: output, name: "squid")
                if await waitUntilListening(server, port: port) {
                    return SquidProxy(port: port, server: server, directory: directory)
                }
                let hung = server.isRunning
                await server.stop()
                let log = directory.appendingPathComponent("cache.log")
                let detail = [ServerSupport.tail(output), ServerSupport.tail(log)].filter { !$0.isEmpty }.joined(separator: " | ")
                failure = .didNotStart("squid", detail: "on 127.0.0.1:\(port); it said: \(detail)")
                if hung { break }
            }
            throw failure
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    /// Runs `body` with a started squid and stops it afterwards, whether `body` returns or throws.
    public static func withProxy<T>(_ body: (SquidProxy) async throws -> T) async throws -> T {
        let proxy = try await start()
        do {
            let result = try await body(proxy)
            await proxy.stop()
            return result
        } catch {
            await proxy.stop()
            throw error
        }
    }

    /// One request squid answered, from its access log.
    public struct Request: Sendable, Hashable, CustomStringConvertible {
        /// `GET`, `CONNECT`, …
        public var method: String
        /// An absolute URL for a forwarded request, `host:port` for a tunnel.
        public var target: String
        /// The status squid answered with (`403` for a request its rules deny).
        public var status: Int

        public var description: String { "\(method) \(target) \(status)" }
    }

    /// Every request squid has logged so far, oldest first. squid logs a request when it is
    /// done, so a test reads this after its download ended.
    public func requests() -> [Request] {
        let log = (try? String(contentsOf: directory.appendingPathComponent("access.log"), encoding: .utf8)) ?? ""
        return log.split(separator: "\n").compactMap { line in
            let words = line.split(separator: " ")
            guard words.count == 3, let status = Int(words[2]) else { return nil }
            return Request(method: String(words[0]), target: String(words[1]), status: status)
        }
    }

    /// Stops squid and removes its temp folder. Calling it again does nothing.
    public func stop() async {
        await server.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// The stock configuration with its own port, files and no cache. Its `http_port`,
    /// `coredump_dir` and `include` lines go (the included Debian file only sets log rotation);
    /// every `acl` and `http_access` line stays as shipped.
    static func configuration(stock: String, port: Int, directory: String) -> String {
        let kept = stock.split(separator: "\n", omittingEmptySubsequences: false).filter { line in
            let word = line.split(separator: " ", maxSplits: 1).first.map(String.init) ?? ""
            return !["http_port", "coredump_dir", "include"].contains(word)
        }
        return
            (kept + [
                "http_port 127.0.0.1:\(port)",
                "pid_filename \(directory)/squid.pid",
                "cache_log \(directory)/cache.log",
                "logformat haul %rm %ru %>Hs",
                "access_log stdio:\(directory)/access.log haul",
                "cache deny all",
                "cache_mem 8 MB",
                "coredump_dir \(directory)",
                "netdb_filename none",
                "pinger_enable off",
                "shutdown_lifetime 0 seconds",
            ]).joined(separator: "\n") + "\n"
    }

    private static func waitUntilListening(_ server: ServerProcess, port: Int) async -> Bool {
        for _ in 0..<200 {
            guard server.isRunning else { return false }
            if await ServerSupport.accepts(port: port) { return true }
            try? await Task.sleep(for: .milliseconds(100))
        }
        return false
    }
}
