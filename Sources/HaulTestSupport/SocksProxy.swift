import Foundation

/// A throwaway SOCKS5 proxy (microsocks) on 127.0.0.1, for tests of downloads through SOCKS.
///
/// microsocks resolves host names itself (`socks5h://`) as well as taking addresses
/// (`socks5://`), and tunnels to any port. It writes a line for each connection it opens onwards;
/// ``connections()`` lists them, so a test can tell that a download went through it.
///
/// ```swift
/// let socks = try await SocksProxy.start(credentials: TestCredentials(user: "u", password: "p w"))
/// // ... download nginx.url("/a.bin") through socks.urlWithCredentials ...
/// #expect(socks.connections().contains { $0.target == "127.0.0.1:\(nginx.port)" })
/// await socks.stop()
/// ```
///
/// A client that offers no credentials to a proxy that wants them gets "no acceptable method"
/// (method `0xFF`); wrong credentials get a failed sub-negotiation (status 1). Neither is logged.
public final class SocksProxy: Sendable {
    /// The microsocks binary to run, or nil when none is installed (looks in `PATH`, then
    /// `/usr/bin`, `/usr/local/bin`).
    public static var executablePath: String? {
        ServerSupport.findExecutable("microsocks", extraDirectories: ["/usr/bin", "/usr/local/bin"])
    }

    /// The port the proxy listens on, on 127.0.0.1.
    public let port: Int
    /// The credentials the proxy demands (RFC 1929 user name and password), if any.
    public let credentials: TestCredentials?

    private let server: ServerProcess
    private let directory: URL

    private init(port: Int, credentials: TestCredentials?, server: ServerProcess, directory: URL) {
        self.port = port
        self.credentials = credentials
        self.server = server
        self.directory = directory
    }

    /// Starts microsocks on a free port of 127.0.0.1.
    ///
    /// Returns once it answers a SOCKS5 greeting (waits at most about 10 s); a start that lost its
    /// port to someone else is retried on a new port.
    ///
    /// - Parameters:
    ///   - credentials: Demand this user name and password (each 1 to 255 bytes of UTF-8).
    /// - Throws: ``TestServerError/notInstalled`` without microsocks, ``TestServerError/invalidOptions``
    ///   for credentials SOCKS5 cannot carry, ``TestServerError/didNotStart`` when it exits or does
    ///   not answer in time (the message quotes its output).
    public static func start(credentials: TestCredentials? = nil) async throws -> SocksProxy {
        guard let microsocks = executablePath else {
            throw TestServerError.notInstalled("microsocks", package: "microsocks")
        }
        if let credentials {
            for part in [credentials.user, credentials.password] where !(1...255).contains(part.utf8.count) || part.utf8.contains(0) {
                throw TestServerError.invalidOptions(
                    "SOCKS5 credentials are 1 to 255 bytes without NUL, not \(String(reflecting: part))")
            }
        }
        let directory = try ServerSupport.makeDirectory("haul-microsocks")
        let log = directory.appendingPathComponent("microsocks.log")
        do {
            var failure = TestServerError.didNotStart("microsocks", detail: "")
            for _ in 1...3 {
                let port = try await ServerSupport.freePort()
                var arguments = ["-i", "127.0.0.1", "-p", String(port)]
                if let credentials { arguments += ["-u", credentials.user, "-P", credentials.password] }
                let server = try ServerProcess.launch(microsocks, arguments: arguments, output: log, name: "microsocks")
                if await waitUntilListening(server, port: port) {
                    return SocksProxy(port: port, credentials: credentials, server: server, directory: directory)
                }
                // Exiting early is what a lost port race looks like; hanging is not, so no retry.
                let hung = server.isRunning
                await server.stop()
                failure = .didNotStart("microsocks", detail: "on 127.0.0.1:\(port); it said: \(ServerSupport.tail(log))")
                if hung { break }
            }
            throw failure
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    /// Runs `body` with a started proxy and stops it afterwards, whether `body` returns or throws.
    ///
    /// ```swift
    /// try await SocksProxy.withProxy { socks in
    ///     try await download(nginx.url("/a.bin"), proxy: socks.url)
    ///     #expect(socks.connections().count == 1)
    /// }
    /// ```
    public static func withProxy<T>(
        credentials: TestCredentials? = nil, _ body: (SocksProxy) async throws -> T
    ) async throws -> T {
        let proxy = try await start(credentials: credentials)
        do {
            let result = try await body(proxy)
            await proxy.stop()
            return result
        } catch {
            await proxy.stop()
            throw error
        }
    }

    /// `socks5://127.0.0.1:PORT`, without credentials (a client resolves names itself).
    public var url: String { "socks5://127.0.0.1:\(port)" }

    /// `socks5h://127.0.0.1:PORT`: the proxy resolves host names.
    public var urlResolvingOnProxy: String { "socks5h://127.0.0.1:\(port)" }

    /// `socks5://USER:PASSWORD@127.0.0.1:PORT` with the proxy's own credentials
    /// (percent-encoded), or ``url`` when it demands none.
    public var urlWithCredentials: String {
        guard let credentials else { return url }
        return "socks5://\(credentials.userInfo)@127.0.0.1:\(port)"
    }

    /// One connection the proxy opened for a client.
    public struct Connection: Sendable, Hashable, CustomStringConvertible {
        /// The client's address (always `127.0.0.1` here).
        public var client: String
        /// Where the client asked to go, as it asked: `127.0.0.1:8080` or `localhost:8080`.
        public var target: String

        public var description: String { "\(client) -> \(target)" }
    }

    /// Every connection microsocks has made for a client so far, oldest first.
    ///
    /// microsocks logs a connection once it has reached the target and before it relays any byte,
    /// so it is listed by the time the client reads an answer. Refused handshakes are not listed.
    public func connections() -> [Connection] {
        Self.parseConnections(log())
    }

    /// microsocks's whole output, for a failure message.
    public func log() -> String {
        (try? String(contentsOf: directory.appendingPathComponent("microsocks.log"), encoding: .utf8)) ?? ""
    }

    /// Stops microsocks, waits (at most a few seconds) until it has exited, and removes its temp
    /// directory. Calling it again does nothing.
    public func stop() async {
        await server.stop()
        try? FileManager.default.removeItem(at: directory)
    }
}

extension SocksProxy {
    /// microsocks writes no "ready" line, and something else may hold a port it failed to bind,
    /// so wait for a real SOCKS5 answer: to the greeting "version 5, one method: no
    /// authentication" it answers version 5 and the method it picks (`0xFF`, none, when it wants
    /// credentials). That exchange is not logged.
    private static func waitUntilListening(_ server: ServerProcess, port: Int) async -> Bool {
        for _ in 0..<200 {
            guard server.isRunning else { return false }
            if let answer = await ServerSupport.firstAnswer(port: port, sending: [5, 1, 0]),
                answer.first == 5, server.isRunning
            {
                return true
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    /// Lines such as `client[4] 127.0.0.1: connected to localhost:18081`.
    static func parseConnections(_ log: String) -> [Connection] {
        log.split(separator: "\n").compactMap { line -> Connection? in
            guard line.hasPrefix("client["), let close = line.firstIndex(of: "]"),
                let marker = line.range(of: ": connected to "), close < marker.lowerBound
            else { return nil }
            let client = line[line.index(after: close)..<marker.lowerBound].trimmingCharacters(in: .whitespaces)
            let target = line[marker.upperBound...].trimmingCharacters(in: .whitespaces)
            guard !target.isEmpty else { return nil }
            return Connection(client: client, target: target)
        }
    }
}
