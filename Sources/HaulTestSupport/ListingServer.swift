import Foundation

/// A throwaway web server other than nginx serving a folder's listings on 127.0.0.1: Apache
/// (`mod_autoindex`, plain or fancy), lighttpd (`mod_dirlisting`), Caddy (`file_server browse`)
/// or Python's `http.server` — the listing formats `haul mirror` reads, from the servers that
/// write them. Configs and logs live in a temp folder; nothing of `/etc` is read.
///
/// ```swift
/// let apache = try await ListingServer.start(.apacheFancy, root: folder)
/// // ... read apache.url("/") ...
/// await apache.stop()
/// ```
public final class ListingServer: Sendable {
    /// Which server, and how its listing looks.
    public enum Kind: String, Sendable, CaseIterable {
        /// Apache `mod_autoindex` without `FancyIndexing`: a `<ul>` of links.
        case apachePlain
        /// Apache with `FancyIndexing HTMLTable`: sort links (`?C=N;O=D`) and a parent link.
        case apacheFancy
        /// lighttpd `mod_dirlisting`.
        case lighttpd
        /// Caddy `file_server browse`: HTML, or JSON when asked with `Accept: application/json`.
        case caddy
        /// `python3 -m http.server`.
        case python

        /// The binary, looked up in `PATH` and the system folders Debian installs to.
        var executable: String? {
            let system = ["/usr/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/sbin"]
            switch self {
            case .apachePlain, .apacheFancy: return ServerSupport.findExecutable("apache2", extraDirectories: system)
            case .lighttpd: return ServerSupport.findExecutable("lighttpd", extraDirectories: system)
            case .caddy: return ServerSupport.findExecutable("caddy", extraDirectories: system)
            case .python: return ServerSupport.findExecutable("python3", extraDirectories: system)
            }
        }

        var package: String {
            switch self {
            case .apachePlain, .apacheFancy: "apache2"
            case .lighttpd: "lighttpd"
            case .caddy: "caddy"
            case .python: "python3"
            }
        }
    }

    public let kind: Kind
    /// The port it listens on, on 127.0.0.1.
    public let port: Int
    private let server: ServerProcess
    private let directory: URL

    private init(kind: Kind, port: Int, server: ServerProcess, directory: URL) {
        self.kind = kind
        self.port = port
        self.server = server
        self.directory = directory
    }

    /// `http://127.0.0.1:PORT` + `path`.
    public func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// Starts `kind` serving `root` on a free port; returns once it accepts connections.
    ///
    /// - Throws: ``TestServerError/notInstalled`` when the server is not installed,
    ///   ``TestServerError/didNotStart`` when it exits or does not listen in time.
    public static func start(_ kind: Kind, root: String) async throws -> ListingServer {
        guard let executable = kind.executable else { throw TestServerError.notInstalled(kind.package, package: kind.package) }
        let directory = try ServerSupport.makeDirectory("haul-\(kind.rawValue)")
        let output = directory.appendingPathComponent("output.log")
        do {
            var failure = TestServerError.didNotStart(kind.package, detail: "")
            for _ in 1...3 {
                let port = try await ServerSupport.freePort()
                let arguments = try configure(kind, root: root, port: port, directory: directory.path)
                let server = try ServerProcess.launch(executable, arguments: arguments, output: output, name: kind.rawValue)
                for _ in 0..<100 {
                    if await ServerSupport.accepts(port: port) {
                        return ListingServer(kind: kind, port: port, server: server, directory: directory)
                    }
                    guard server.isRunning else { break }
                    try? await Task.sleep(for: .milliseconds(100))
                }
                await server.stop()
                failure = .didNotStart(kind.package, detail: "on 127.0.0.1:\(port); it said: \(ServerSupport.tail(output))")
            }
            throw failure
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    /// Runs `body` with a started server and stops it afterwards.
    public static func withServer<T>(_ kind: Kind, root: String, _ body: (ListingServer) async throws -> T) async throws -> T {
        let server = try await start(kind, root: root)
        do {
            let result = try await body(server)
            await server.stop()
            return result
        } catch {
            await server.stop()
            throw error
        }
    }

    /// Stops the server and removes its temp folder. Calling it again does nothing.
    public func stop() async {
        await server.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Writes the server's config into `directory`; returns the arguments that start it with it.
    private static func configure(_ kind: Kind, root: String, port: Int, directory: String) throws -> [String] {
        func write(_ name: String, _ text: String) throws -> String {
            let path = directory + "/" + name
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        switch kind {
        case .apachePlain, .apacheFancy:
            let modules = "/usr/lib/apache2/modules"
            let index = kind == .apacheFancy ? "IndexOptions FancyIndexing HTMLTable" : "IndexOptions -FancyIndexing"
            let config = try write(
                "apache2.conf",
                """
                ServerRoot "\(directory)"
                ServerName 127.0.0.1
                Listen 127.0.0.1:\(port)
                PidFile "\(directory)/apache2.pid"
                ErrorLog "\(directory)/error.log"
                # One process (-X) serves one connection at a time: a client's other connections
                # wait while the one it serves idles, for this long at most (the default is 5 s).
                KeepAliveTimeout 100ms
                LoadModule mpm_prefork_module \(modules)/mod_mpm_prefork.so
                LoadModule authz_core_module \(modules)/mod_authz_core.so
                LoadModule dir_module \(modules)/mod_dir.so
                LoadModule autoindex_module \(modules)/mod_autoindex.so
                DocumentRoot "\(root)"
                <Directory "\(root)">
                    Options +Indexes
                    Require all granted
                    \(index)
                </Directory>

                """)
            // -X: one process in the foreground.
            return ["-X", "-f", config]
        case .lighttpd:
            let config = try write(
                "lighttpd.conf",
                """
                server.document-root = "\(root)"
                server.bind = "127.0.0.1"
                server.port = \(port)
                server.errorlog = "\(directory)/error.log"
                server.modules = ("mod_dirlisting")
                dir-listing.activate = "enable"

                """)
            return ["-D", "-f", config]
        case .caddy:
            let config = try write(
                "Caddyfile",
                """
                {
                \tadmin off
                \tauto_https off
                \tstorage file_system "\(directory)/data"
                }
                http://127.0.0.1:\(port) {
                \troot * "\(root)"
                \tfile_server browse
                }

                """)
            return ["run", "--config", config, "--adapter", "caddyfile"]
        case .python:
            return ["-m", "http.server", String(port), "--bind", "127.0.0.1", "--directory", root]
        }
    }
}
