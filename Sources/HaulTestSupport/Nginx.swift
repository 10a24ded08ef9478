import Foundation
import NIOCore
import NIOPosix

/// A throwaway nginx on 127.0.0.1 serving the files of one folder, for tests and benchmarks.
///
/// Everything nginx writes (config, pid file, logs, temp folders) lives in a private temp
/// directory; it never reads `/etc/nginx` and never listens on port 80. These locations serve
/// the same folder:
/// - `/` at full speed;
/// - `/limited/`, rate-limited per connection when `limitRate` is given (unlimited otherwise),
///   so one server can serve both fast and slow downloads of the same file;
/// - `/autoindex/`, `/autoindex-json/` and `/autoindex-xml/`, with folder listings
///   (`autoindex on`) in each of nginx's `autoindex_format`s: html, json and xml.
///
/// ```swift
/// let nginx = try await NginxServer.start(root: folder, limitRate: 64 * 1024)
/// // ... fetch nginx.url("/big.bin") (full speed) or nginx.url("/limited/big.bin") (64 KiB/s)
/// await nginx.stop()
/// ```
///
/// With ``Options`` it also speaks TLS (HTTP/2 by ALPN) and keeps an access log a test reads
/// back as ``AccessLogEntry`` values, so it can assert which protocol and headers arrived:
///
/// ```swift
/// let certs = try TestCertificates.shared()
/// let nginx = try await NginxServer.start(root: folder, options: .init(tls: .testServer(certs)))
/// // ... fetch nginx.url("/a.bin") (https://127.0.0.1:PORT/a.bin), trusting certs.ca.certificate
/// let entry = try #require(await nginx.accessLog(waitingFor: 1).first)
/// #expect(entry.serverProtocol == "HTTP/2.0" && entry.status == 200)
/// await nginx.stop()
/// ```
public final class NginxServer: Sendable {
    /// The nginx binary to run, or nil when none is installed.
    ///
    /// Looks in `PATH`, then `/usr/sbin`, `/usr/local/sbin` and `/usr/local/nginx/sbin`
    /// (Debian installs to `/usr/sbin`, which is not in a non-root `PATH`).
    public static var executablePath: String? {
        ServerSupport.findExecutable(
            "nginx", extraDirectories: ["/usr/sbin", "/usr/local/sbin", "/usr/local/nginx/sbin"])
    }

    /// The port nginx listens on, on 127.0.0.1.
    public let port: Int
    /// What the server was started with.
    public let options: Options

    /// nginx itself; a test that forgot stop() does not leave it running (the temp dir is left behind).
    private let server: ServerProcess
    let directory: URL

    private init(port: Int, options: Options, server: ServerProcess, directory: URL) {
        self.port = port
        self.options = options
        self.server = server
        self.directory = directory
    }

    /// Starts nginx serving the folder `root` on a free port of 127.0.0.1, without TLS and
    /// without an access log.
    ///
    /// Returns once nginx accepts connections (waits at most about 10 s). A port picked free can
    /// be taken by someone else before nginx binds it, so a failed start is retried on a new port.
    ///
    /// - Parameters:
    ///   - root: The folder to serve; its files must be readable by the current user.
    ///   - limitRate: Bytes per second per connection for paths under `/limited/` (nginx `limit_rate`).
    /// - Throws: ``NginxServerError/notInstalled`` without nginx, ``NginxServerError/didNotStart``
    ///   when nginx exits or does not listen in time (the message quotes its error log).
    public static func start(root: String, limitRate: Int? = nil) async throws -> NginxServer {
        try await start(root: root, options: Options(limitRate: limitRate, accessLog: false))
    }

    /// Starts nginx serving the folder `root` on a free port of 127.0.0.1 with `options`.
    ///
    /// Returns once nginx accepts connections (waits at most about 10 s). A port picked free can
    /// be taken by someone else before nginx binds it, so a failed start is retried on a new port.
    ///
    /// ```swift
    /// let nginx = try await NginxServer.start(root: folder, options: .init(tls: .testServer(certs)))
    /// ```
    ///
    /// - Parameters:
    ///   - root: The folder to serve; its files must be readable by the current user.
    ///   - options: TLS, the access log and the rate of `/limited/`; see ``Options``.
    /// - Throws: ``NginxServerError/notInstalled`` without nginx, ``NginxServerError/invalidOptions``
    ///   for an option nginx's config cannot carry, ``NginxServerError/didNotStart`` when nginx
    ///   exits or does not listen in time (the message quotes its error log).
    public static func start(root: String, options: Options) async throws -> NginxServer {
        guard let nginx = executablePath else { throw NginxServerError.notInstalled }
        try options.validate()
        let directory = try ServerSupport.makeDirectory("haul-nginx")
        do {
            if let credentials = options.basicAuth {
                try writePasswordFile(credentials, to: directory.appendingPathComponent("htpasswd"))
            }
            let syntax = ListenSyntax(nginxVersion: version(of: nginx))
            var failure = NginxServerError.didNotStart
            for _ in 1...3 {
                let port = try await ServerSupport.freePort()
                let config = configuration(
                    root: root, port: port, options: options, syntax: syntax, directory: directory.path)
                try config.write(to: directory.appendingPathComponent("nginx.conf"), atomically: true, encoding: .utf8)
                try? FileManager.default.removeItem(at: directory.appendingPathComponent("nginx.pid"))
                let dir = directory.path
                let server = try ServerProcess.launch(
                    nginx, arguments: ["-p", dir + "/", "-c", dir + "/nginx.conf", "-e", dir + "/error.log"],
                    name: "nginx")
                if await waitUntilListening(server, port: port, directory: directory) {
                    return NginxServer(port: port, options: options, server: server, directory: directory)
                }
                // Exiting early is what a lost port race looks like; hanging is not, so no retry.
                let hung = server.isRunning
                await server.stop()
                failure = .didNotStart(port: port, log: ServerSupport.tail(directory.appendingPathComponent("error.log")))
                if hung { break }
            }
            throw failure
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    /// Runs `body` with a started server and stops it afterwards, whether `body` returns or throws.
    ///
    /// ```swift
    /// let bytes = try await NginxServer.withServer(root: folder) { nginx in
    ///     try await download(nginx.url("/a.bin"))
    /// }
    /// ```
    public static func withServer<T>(
        root: String, limitRate: Int? = nil, _ body: (NginxServer) async throws -> T
    ) async throws -> T {
        try await withServer(root: root, options: Options(limitRate: limitRate, accessLog: false), body)
    }

    /// Runs `body` with a server started with `options` and stops it afterwards, whether `body`
    /// returns or throws.
    ///
    /// ```swift
    /// try await NginxServer.withServer(root: folder, options: .init(tls: .testServer(certs))) { nginx in
    ///     try await download(nginx.url("/a.bin"))
    ///     #expect(await nginx.accessLog(waitingFor: 1).first?.sslProtocol == "TLSv1.3")
    /// }
    /// ```
    public static func withServer<T>(
        root: String, options: Options, _ body: (NginxServer) async throws -> T
    ) async throws -> T {
        let server = try await start(root: root, options: options)
        do {
            let result = try await body(server)
            await server.stop()
            return result
        } catch {
            await server.stop()
            throw error
        }
    }

    /// `http` or `https`.
    public var scheme: String { options.tls == nil ? "http" : "https" }

    /// The full URL of `path` on this server, e.g. `url("/a.bin")` is `http://127.0.0.1:PORT/a.bin`
    /// (`https://` with TLS). `host` may be `localhost` (the test server certificate names both).
    public func url(_ path: String, host: String = "127.0.0.1") -> String {
        "\(scheme)://\(host):\(port)\(path)"
    }

    /// Stops nginx, waits (at most a few seconds) until it has exited, and removes its temp directory.
    ///
    /// Calling it again does nothing.
    public func stop() async {
        await server.stop()
        try? FileManager.default.removeItem(at: directory)
    }
}

extension NginxServer {
    /// nginx's config. `master_process off` keeps a single process, so stopping it is one kill;
    /// `user root` only as root, since nginx warns about `user` otherwise.
    static func configuration(
        root: String, port: Int, options: Options, syntax: ListenSyntax, directory: String
    ) -> String {
        let user = getuid() == 0 ? "user root;" : ""
        let rate = options.limitRate.map { "limit_rate \($0);" } ?? ""
        let accessLog =
            options.accessLog
            ? "log_format haul escape=json '\(AccessLogEntry.format)';\n    access_log \"\(directory)/access.log\" haul;"
            : "access_log off;"
        var listen = "listen 127.0.0.1:\(port);"
        var server: [String] = []
        if let tls = options.tls {
            switch (syntax, tls.http2) {
            case (.http2Directive, true): listen = "listen 127.0.0.1:\(port) ssl;\n        http2 on;"
            case (.listenParameter, true): listen = "listen 127.0.0.1:\(port) ssl http2;"
            case (_, false): listen = "listen 127.0.0.1:\(port) ssl;"
            }
            server += [
                "ssl_certificate \"\(tls.certificate)\";",
                "ssl_certificate_key \"\(tls.key)\";",
                "ssl_protocols TLSv1.2 TLSv1.3;",
            ]
            if let clientCA = tls.clientCA {
                server += [
                    "ssl_client_certificate \"\(clientCA)\";",
                    "ssl_verify_client \(tls.requiresClientCertificate ? "on" : "optional");",
                    "ssl_verify_depth 2;",
                    #"location /mtls/ { alias "\#(root)/"; if ($ssl_client_verify != SUCCESS) { return 403; } }"#,
                ]
            }
        }
        // A mirror gone wrong in the two ways a fault server shows best, here from real nginx:
        // one that refuses ranges, one that stalls after its first 64 KiB.
        server += [
            #"location /noranges/ { alias "\#(root)/"; max_ranges 0; }"#,
            #"location /stalled/ { alias "\#(root)/"; limit_rate_after 64k; limit_rate 1; }"#,
        ]
        let auth = #"auth_basic "haul-test"; auth_basic_user_file "\#(directory)/htpasswd";"#
        if options.basicAuth != nil {
            server.append(#"location /auth/ { alias "\#(root)/"; \#(auth) }"#)
        }
        if let cookie = options.cookie {
            server += [
                #"location /cookie/ { alias "\#(root)/"; if ($cookie_\#(cookie.name) != "\#(cookie.value)") { return 403; } }"#,
                #"location /setcookie/ { add_header Set-Cookie "\#(cookie.name)=\#(cookie.value); Path=/" always; rewrite ^/setcookie/(.*)$ /cookie/$1 redirect; }"#,
            ]
        }
        if options.webDAV {
            // The body goes to a temp file in the config folder, then is renamed into place: the
            // served folder must be writable by nginx's worker (root in the tests' container).
            server.append(#"location /dav/ { alias "\#(root)/"; dav_methods PUT; create_full_put_path on; client_max_body_size 0; }"#)
        }
        if let target = options.redirectTarget {
            server.append(#"location /redirect-to/ { rewrite ^/redirect-to/(.*)$ "\#(target)$1" redirect; }"#)
            if options.basicAuth != nil {
                // rewrite runs before auth_basic; try_files runs after it, so the redirect waits
                // for the right credentials.
                server += [
                    #"location /auth/redirect-to/ { \#(auth) try_files /.haul-no-such-file @auth_redirect_to; }"#,
                    #"location @auth_redirect_to { rewrite ^/auth/redirect-to/(.*)$ "\#(target)$1" redirect; }"#,
                ]
            }
        }
        return """
            \(user)
            daemon off;
            master_process off;
            worker_processes 1;
            pid "\(directory)/nginx.pid";
            error_log "\(directory)/error.log" warn;
            events { worker_connections 256; }
            http {
                \(accessLog)
                sendfile on;
                etag on;
                default_type application/octet-stream;
                client_body_temp_path "\(directory)/client_body";
                proxy_temp_path "\(directory)/proxy";
                fastcgi_temp_path "\(directory)/fastcgi";
                uwsgi_temp_path "\(directory)/uwsgi";
                scgi_temp_path "\(directory)/scgi";
                server {
                    \(listen)
                    root "\(root)";
                    \(server.joined(separator: "\n        "))
                    location / { }
                    location /limited/ { alias "\(root)/"; \(rate) }
                    location /autoindex/ { alias "\(root)/"; autoindex on; }
                    location /autoindex-json/ { alias "\(root)/"; autoindex on; autoindex_format json; }
                    location /autoindex-xml/ { alias "\(root)/"; autoindex on; autoindex_format xml; }
                }
            }

            """
    }

    /// `user:HASH` with `openssl passwd -apr1` (nginx reads Apache's MD5 hashes), the password
    /// given on stdin so it shows in no process list.
    static func writePasswordFile(_ credentials: TestCredentials, to file: URL) throws {
        guard let openssl = TestCertificates.opensslPath else {
            throw NginxServerError.invalidOptions(
                "basicAuth needs openssl to hash the password; install it (apt-get install -y openssl)")
        }
        let result = try ServerSupport.run(openssl, ["passwd", "-apr1", "-stdin"], input: Data((credentials.password + "\n").utf8))
        let hash = String(decoding: result.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard result.status == 0, hash.hasPrefix("$apr1$") else {
            throw NginxServerError.invalidOptions("openssl passwd -apr1 failed: \(result.error)")
        }
        try "\(credentials.user):\(hash)\n".write(to: file, atomically: true, encoding: .utf8)
    }

    /// How this nginx turns HTTP/2 on: `http2 on;` from 1.25.1, `listen … http2` before (Debian
    /// 12 has 1.22, which knows only the latter; newer ones still take it, with a warning).
    enum ListenSyntax {
        case http2Directive, listenParameter

        init(nginxVersion: [Int]?) {
            guard let version = nginxVersion else { self = .listenParameter; return }
            self = version.lexicographicallyPrecedes([1, 25, 1]) ? .listenParameter : .http2Directive
        }
    }

    /// `nginx -v` says `nginx version: nginx/1.22.1` on stderr.
    static func version(of nginx: String) -> [Int]? {
        guard let result = try? ServerSupport.run(nginx, ["-v"], seconds: 10),
            let slash = result.error.range(of: "nginx/")
        else { return nil }
        let digits = result.error[slash.upperBound...].prefix { $0.isNumber || $0 == "." }
        let parts = digits.split(separator: ".").compactMap { Int($0) }
        return parts.isEmpty ? nil : parts
    }

    /// Waits until nginx has bound its port (it writes the pid file after binding) and accepts a
    /// connection; false if it exits first or after about 10 s.
    private static func waitUntilListening(_ server: ServerProcess, port: Int, directory: URL) async -> Bool {
        for _ in 0..<200 {
            guard server.isRunning else { return false }
            if nginxPID(directory) == server.pid, await ServerSupport.accepts(port: port) { return true }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    private static func nginxPID(_ directory: URL) -> pid_t? {
        let text = try? String(contentsOf: directory.appendingPathComponent("nginx.pid"), encoding: .utf8)
        return text.flatMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }
}

/// Why an ``NginxServer`` could not be started.
public struct NginxServerError: Error, Equatable, CustomStringConvertible {
    private enum Code { case notInstalled, didNotStart, invalidOptions }
    private let code: Code
    /// One line saying what failed and what to do.
    public let description: String

    /// No nginx binary was found.
    public static let notInstalled = NginxServerError(
        code: .notInstalled,
        description: "nginx not found in PATH, /usr/sbin, /usr/local/sbin or /usr/local/nginx/sbin; install it (apt-get install -y nginx)")

    /// nginx exited or did not accept connections in time.
    public static let didNotStart = NginxServerError(
        code: .didNotStart, description: "nginx did not start on 127.0.0.1")

    /// An option nginx's config cannot carry (a cookie name with a dash, a redirect target with a quote…).
    public static let invalidOptions = NginxServerError(
        code: .invalidOptions, description: "invalid nginx options")

    static func invalidOptions(_ message: String) -> NginxServerError {
        NginxServerError(code: .invalidOptions, description: message)
    }

    static func didNotStart(port: Int, log: String) -> NginxServerError {
        NginxServerError(code: .didNotStart, description: "nginx did not start on 127.0.0.1:\(port); its error log ends: \(log)")
    }

    /// Errors are equal when they are the same kind of failure, whatever the message.
    public static func == (lhs: NginxServerError, rhs: NginxServerError) -> Bool {
        lhs.code == rhs.code
    }
}
