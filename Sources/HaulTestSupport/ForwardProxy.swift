import Foundation

/// A throwaway HTTP forward proxy (tinyproxy) on 127.0.0.1, for tests of downloads through a proxy.
///
/// It forwards plain `GET http://…` requests and tunnels `CONNECT host:port` to any port (the
/// default config's `ConnectPort 443`/`563` limit is not set). Everything tinyproxy writes lives
/// in a private temp directory, and its log tells what it was asked: ``requests()`` lists each
/// request line it read.
///
/// ```swift
/// let proxy = try await ForwardProxy.start(credentials: TestCredentials(user: "u", password: "p"))
/// // ... download nginx.url("/a.bin") through proxy.urlWithCredentials ...
/// #expect(proxy.requests().contains { $0.method == "GET" && $0.target == nginx.url("/a.bin") })
/// await proxy.stop()
/// ```
///
/// What tinyproxy 1.11 answers (so a test knows what a client sees):
/// - no `Proxy-Authorization` when credentials are required: `407 Proxy Authentication Required`;
/// - wrong credentials: `401 Unauthorized` with `WWW-Authenticate: Basic realm="Tinyproxy"`
///   (not 407 — a quirk of tinyproxy), for `GET` and `CONNECT` alike;
/// - ``start(credentials:refuseAll:)`` with `refuseAll`: `403 Access denied` to every request;
/// - a `CONNECT` or `GET` to a port nobody listens on: `500 Unable to connect`.
/// Forwarded plain-HTTP requests carry `Via: 1.1 haul-test-proxy (tinyproxy/VERSION)`, which the
/// origin's access log shows (``NginxServer/AccessLogEntry/via``); a `CONNECT` tunnel adds nothing.
public final class ForwardProxy: Sendable {
    /// The tinyproxy binary to run, or nil when none is installed (looks in `PATH`, then
    /// `/usr/bin`, `/usr/sbin`, `/usr/local/bin`, `/usr/local/sbin`).
    public static var executablePath: String? {
        ServerSupport.findExecutable(
            "tinyproxy", extraDirectories: ["/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"])
    }

    /// The name tinyproxy puts in the `Via` header of the requests it forwards.
    public static let viaName = "haul-test-proxy"

    /// The port the proxy listens on, on 127.0.0.1.
    public let port: Int
    /// The credentials the proxy demands, if any.
    public let credentials: TestCredentials?

    private let server: ServerProcess
    private let directory: URL

    private init(port: Int, credentials: TestCredentials?, server: ServerProcess, directory: URL) {
        self.port = port
        self.credentials = credentials
        self.server = server
        self.directory = directory
    }

    /// Starts tinyproxy on a free port of 127.0.0.1.
    ///
    /// Returns once it accepts connections (waits at most about 10 s); a start that lost its port
    /// to someone else is retried on a new port.
    ///
    /// - Parameters:
    ///   - credentials: Demand these with HTTP Basic (`Proxy-Authorization`). tinyproxy's config
    ///     only takes letters, digits, `-`, `.` and `_` in both.
    ///   - refuseAll: Answer every request with `403 Access denied` (tinyproxy `Deny 127.0.0.1`).
    /// - Throws: ``TestServerError/notInstalled`` without tinyproxy, ``TestServerError/invalidOptions``
    ///   for credentials tinyproxy cannot take, ``TestServerError/didNotStart`` when it exits or does
    ///   not listen in time (the message quotes its log).
    public static func start(credentials: TestCredentials? = nil, refuseAll: Bool = false) async throws -> ForwardProxy {
        guard let tinyproxy = executablePath else {
            throw TestServerError.notInstalled("tinyproxy", package: "tinyproxy-bin")
        }
        if let credentials {
            for part in [credentials.user, credentials.password] where !isConfigToken(part) {
                throw TestServerError.invalidOptions(
                    "tinyproxy takes only letters, digits, '-', '.' and '_' in proxy credentials, not \(String(reflecting: part))")
            }
        }
        let directory = try ServerSupport.makeDirectory("haul-tinyproxy")
        let log = directory.appendingPathComponent("tinyproxy.log")
        let output = directory.appendingPathComponent("output.log")
        do {
            var failure = TestServerError.didNotStart("tinyproxy", detail: "")
            for _ in 1...3 {
                let port = try await ServerSupport.freePort()
                let config = configuration(port: port, credentials: credentials, refuseAll: refuseAll, directory: directory.path)
                let configFile = directory.appendingPathComponent("tinyproxy.conf")
                try config.write(to: configFile, atomically: true, encoding: .utf8)
                try? FileManager.default.removeItem(at: log)
                // -d: stay in the foreground, one process (tinyproxy 1.11 serves with threads).
                let server = try ServerProcess.launch(
                    tinyproxy, arguments: ["-d", "-c", configFile.path], output: output, name: "tinyproxy")
                if await waitUntilListening(server, port: port, log: log) {
                    return ForwardProxy(port: port, credentials: credentials, server: server, directory: directory)
                }
                // Exiting early is what a lost port race looks like; hanging is not, so no retry.
                let hung = server.isRunning
                await server.stop()
                let detail = [ServerSupport.tail(output), ServerSupport.tail(log)].filter { !$0.isEmpty }.joined(separator: " | ")
                failure = .didNotStart("tinyproxy", detail: "on 127.0.0.1:\(port); it said: \(detail)")
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
    /// try await ForwardProxy.withProxy { proxy in
    ///     try await download(nginx.url("/a.bin"), proxy: proxy.url)
    ///     #expect(proxy.requests().map(\.method) == ["GET"])
    /// }
    /// ```
    public static func withProxy<T>(
        credentials: TestCredentials? = nil, refuseAll: Bool = false, _ body: (ForwardProxy) async throws -> T
    ) async throws -> T {
        let proxy = try await start(credentials: credentials, refuseAll: refuseAll)
        do {
            let result = try await body(proxy)
            await proxy.stop()
            return result
        } catch {
            await proxy.stop()
            throw error
        }
    }

    /// `http://127.0.0.1:PORT`, without credentials.
    public var url: String { "http://127.0.0.1:\(port)" }

    /// `http://USER:PASSWORD@127.0.0.1:PORT` with the proxy's own credentials (percent-encoded),
    /// or ``url`` when it demands none.
    public var urlWithCredentials: String {
        guard let credentials else { return url }
        return "http://\(credentials.userInfo)@127.0.0.1:\(port)"
    }

    /// One request line the proxy read from a client.
    public struct Request: Sendable, Hashable, CustomStringConvertible {
        /// `GET`, `CONNECT`, …
        public var method: String
        /// What the client asked for: an absolute URL (`http://127.0.0.1:8080/f`) for a forwarded
        /// request, `host:port` (`127.0.0.1:443`) for a tunnel.
        public var target: String
        /// `HTTP/1.1` or `HTTP/1.0`.
        public var version: String

        public var description: String { "\(method) \(target) \(version)" }
    }

    /// Every request line tinyproxy has read so far, oldest first.
    ///
    /// tinyproxy logs a request before it checks the credentials, so a request refused with 401
    /// or 407 is listed too (the client's status says it was refused); with `refuseAll` nothing is
    /// read, so nothing is listed. A request is logged before tinyproxy connects onwards, so it is
    /// listed by the time the client sees any answer.
    public func requests() -> [Request] {
        Self.parseRequests(log())
    }

    /// tinyproxy's whole log, for a failure message.
    public func log() -> String {
        (try? String(contentsOf: directory.appendingPathComponent("tinyproxy.log"), encoding: .utf8)) ?? ""
    }

    /// Stops tinyproxy, waits (at most a few seconds) until it has exited, and removes its temp
    /// directory. Calling it again does nothing.
    public func stop() async {
        await server.stop()
        try? FileManager.default.removeItem(at: directory)
    }
}

extension ForwardProxy {
    /// tinyproxy's config. No `User`/`Group`: as root it then stays root (with a warning in its
    /// log) rather than dropping to a `tinyproxy` user that could not write the temp folder; as
    /// anyone else it runs as that user. No `ConnectPort`: CONNECT to any port. No `Allow`: every
    /// client is served, unless `refuseAll`. `LogLevel Info` for the "Starting main loop" line
    /// ``waitUntilListening`` waits for.
    static func configuration(port: Int, credentials: TestCredentials?, refuseAll: Bool, directory: String) -> String {
        var lines = [
            "Port \(port)",
            "Listen 127.0.0.1",
            "Timeout 60",
            "MaxClients 100",
            #"LogFile "\#(directory)/tinyproxy.log""#,
            "LogLevel Info",
            #"PidFile "\#(directory)/tinyproxy.pid""#,
            #"ViaProxyName "\#(viaName)""#,
        ]
        if let credentials { lines.append("BasicAuth \(credentials.user) \(credentials.password)") }
        if refuseAll { lines.append("Deny 127.0.0.1") }
        return lines.joined(separator: "\n") + "\n"
    }

    /// tinyproxy's config grammar for a `BasicAuth` word: `[-a-z0-9._]+`, case-insensitive.
    static func isConfigToken(_ text: String) -> Bool {
        !text.isEmpty
            && text.unicodeScalars.allSatisfy { scalar in
                scalar.isASCII && (CharacterSet.alphanumerics.contains(scalar) || "-._".unicodeScalars.contains(scalar))
            }
    }

    /// tinyproxy opens its log only after binding its port and logs "Starting main loop" just
    /// before accepting; a tinyproxy that lost the port race exits instead.
    private static func waitUntilListening(_ server: ServerProcess, port: Int, log: URL) async -> Bool {
        for _ in 0..<200 {
            guard server.isRunning else { return false }
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            if text.contains("Starting main loop"), await ServerSupport.accepts(port: port) { return true }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    /// Lines such as `CONNECT   Nov 23 19:08:20.283 [9797]: Request (file descriptor 5): CONNECT 127.0.0.1:18081 HTTP/1.1`.
    static func parseRequests(_ log: String) -> [Request] {
        log.split(separator: "\n").compactMap { line -> Request? in
            guard let marker = line.range(of: "]: Request (file descriptor ") else { return nil }
            guard let colon = line[marker.upperBound...].range(of: "): ") else { return nil }
            let words = line[colon.upperBound...].split(separator: " ", omittingEmptySubsequences: true)
            guard words.count == 3 else { return nil }
            return Request(method: String(words[0]), target: String(words[1]), version: String(words[2]))
        }
    }
}

/// Why a ``ForwardProxy``, ``SocksProxy`` or ``TestCertificates`` could not be made.
public struct TestServerError: Error, Equatable, CustomStringConvertible {
    private enum Code { case notInstalled, didNotStart, invalidOptions, toolFailed }
    private let code: Code
    /// One line saying what failed and what to do.
    public let description: String

    /// The binary is not installed; the message names the Debian package to install.
    public static let notInstalled = TestServerError(code: .notInstalled, description: "not installed")
    /// The server exited or did not accept connections in time.
    public static let didNotStart = TestServerError(code: .didNotStart, description: "did not start")
    /// An option the server cannot take.
    public static let invalidOptions = TestServerError(code: .invalidOptions, description: "invalid options")
    /// A tool (openssl) run to make files failed.
    public static let toolFailed = TestServerError(code: .toolFailed, description: "tool failed")

    static func notInstalled(_ binary: String, package: String) -> TestServerError {
        TestServerError(
            code: .notInstalled,
            description:
                "\(binary) not found in PATH or the usual bin and sbin folders; install it (apt-get install -y \(package), or scripts/install-deps.sh --with-test-servers)"
        )
    }

    static func didNotStart(_ binary: String, detail: String) -> TestServerError {
        TestServerError(code: .didNotStart, description: "\(binary) did not start \(detail)")
    }

    static func invalidOptions(_ message: String) -> TestServerError {
        TestServerError(code: .invalidOptions, description: message)
    }

    static func toolFailed(_ message: String) -> TestServerError {
        TestServerError(code: .toolFailed, description: message)
    }

    /// Errors are equal when they are the same kind of failure, whatever the message.
    public static func == (lhs: TestServerError, rhs: TestServerError) -> Bool {
        lhs.code == rhs.code
    }
}
