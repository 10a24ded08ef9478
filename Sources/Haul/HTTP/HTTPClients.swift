import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// The HTTP clients of one ``Downloader``: ``PlainHTTPClient`` for HTTP/1.1 (plain and TLS,
/// direct and through an HTTP proxy), and an AsyncHTTPClient for each route (proxy, connect
/// timeout, HTTP version) that needs one: HTTP/2 and SOCKS proxies, each with its own
/// connection pool. TLS settings are per request, so downloads with different trust share a
/// client; the TLS context of each set of ``TLSOptions`` is made once.
final class HTTPClients: Sendable {
    /// What a client is made for.
    struct Route: Hashable, Sendable {
        var proxy: ProxyServer?
        var connectTimeout: Duration
        /// Offer HTTP/2 by ALPN over TLS; otherwise HTTP/1.1 only, one request at a time per
        /// connection (docs/ARCHITECTURE.md, "HTTP/2").
        var http2 = false
    }

    private let stallTimeout: Duration
    private let rateLimit: Int64?
    /// `SSL_CERT_FILE` / `SSL_CERT_DIR`: the trust store instead of the system's
    /// (``systemTrust``), as OpenSSL-based tools read it.
    private let environmentTrust: NIOSSLTrustRoots?
    private let clients = Mutex<[Route: HTTPClient]>([:])
    /// HTTP/1.1 on NIO channels: every request but HTTP/2's and those through SOCKS proxies.
    let plain: PlainHTTPClient
    /// Reading the files, and more so the system's trust store, and making a context cost
    /// milliseconds: once per set of options, not per connection.
    private let tls = Mutex<[TLSOptions: TLSSetup]>([:])

    /// One set of ``TLSOptions``, ready: AsyncHTTPClient's requests carry the configuration,
    /// ``PlainHTTPClient``'s connections share the context.
    struct TLSSetup: Sendable {
        var configuration: TLSConfiguration
        var context: PlainHTTPClient.TLS
    }

    init(stallTimeout: Duration, rateLimit: Int64?, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.stallTimeout = stallTimeout
        self.rateLimit = rateLimit
        plain = PlainHTTPClient(
            group: MultiThreadedEventLoopGroup.singleton, stallTimeout: stallTimeout,
            allocator: HTTPTransport.receiveAllocator(rateLimit: rateLimit))
        environmentTrust = Self.trust(from: environment)
    }

    /// `SSL_CERT_FILE`, else `SSL_CERT_DIR`'s first folder; nil when neither is set.
    static func trust(from environment: [String: String]) -> NIOSSLTrustRoots? {
        if let file = environment["SSL_CERT_FILE"], !file.isEmpty { return .file(file) }
        if let folders = environment["SSL_CERT_DIR"], !folders.isEmpty {
            return .file(folders.split(separator: ":").first.map(String.init) ?? folders)
        }
        return nil
    }

    /// The system's trust store, looked for once a process, when the first TLS set-up needs it.
    static let systemTrust = trust(inFolder: systemFolder)

    /// The system's trust store: its folder of certificates named by the hash of their subject, as
    /// `update-ca-certificates` and `openssl rehash` make it (Debian, Ubuntu, Alpine, Arch), when
    /// `folder` is one: a connection's check then reads only the certificates of the issuers it
    /// meets. The system's file of every certificate, which NIO's default reads as well, takes
    /// longer to read and parse than the rest of a one-file HTTPS run's TLS (about 140
    /// certificates, a fifth of its CPU; BENCHMARKS.md). Where the folder has no such names
    /// (Fedora keeps only the file) NIO's default reads the file.
    static func trust(inFolder folder: String) -> NIOSSLTrustRoots {
        isHashedCertificateFolder(folder) ? .file(folder) : .default
    }

    /// Where the system keeps its certificates, one a file, on the distributions that do.
    static let systemFolder = "/etc/ssl/certs"

    /// Whether `path` is a folder holding a certificate under its subject's hash: a name of 8
    /// hexadecimal digits, a dot and a number (`5ad8a5d6.0`).
    static func isHashedCertificateFolder(_ path: String) -> Bool {
        guard let folder = opendir(path) else { return false }
        defer { closedir(folder) }
        while let entry = readdir(folder) {
            let isHashName = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                let name = raw.prefix { $0 != 0 }
                guard name.count >= 10, name[name.startIndex + 8] == UInt8(ascii: ".") else { return false }
                let hash = name.prefix(8)
                let number = name.dropFirst(9)
                return hash.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }
                    && number.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
            }
            if isHashName { return true }
        }
        return false
    }

    /// The routes AsyncHTTPClient serves so far: a test's proof of the path a request took.
    var asyncHTTPClientRoutes: [Route] { clients.withLock { Array($0.keys) } }

    /// The client for `route`, made on first use.
    func client(for route: Route) -> HTTPClient {
        clients.withLock { clients in
            if let client = clients[route] { return client }
            let client = HTTPTransport.makeClient(stallTimeout: stallTimeout, rateLimit: rateLimit, route: route)
            clients[route] = client
            return client
        }
    }

    /// The TLS configuration and context for `options`, its files read once.
    ///
    /// - Throws: ``DownloadError`` (``DownloadError/Kind/invalidRequest``) when a certificate or
    ///   key file cannot be read or parsed, or the certificate and the key do not belong together.
    func tls(for options: TLSOptions) throws(DownloadError) -> TLSSetup {
        if let known = tls.withLock({ $0[options] }) { return known }
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.trustRoots = environmentTrust ?? Self.systemTrust
        if let ca = options.caCertificate {
            do {
                configuration.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMFile(ca))]
            } catch {
                throw .invalidRequest("cannot read the CA certificate \(ca): \(Self.reason(error)); it must be a PEM file")
            }
        }
        if !options.verify { configuration.certificateVerification = .none }
        if let certificate = options.certificate, let key = options.privateKey {
            do {
                configuration.certificateChain = try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) }
            } catch {
                throw .invalidRequest("cannot read the client certificate \(certificate): \(Self.reason(error)); it must be a PEM file")
            }
            do {
                configuration.privateKey = .privateKey(try NIOSSLPrivateKey(file: key, format: .pem))
            } catch {
                throw .invalidRequest("cannot read the private key \(key): \(Self.reason(error)); it must be an unencrypted PEM file")
            }
        }
        // HTTP/1.1 only on this path: AsyncHTTPClient sets its own list for HTTP/2.
        var plain = configuration
        plain.applicationProtocols = ["http/1.1"]
        let context: NIOSSLContext
        do {
            context = try NIOSSLContext(configuration: plain)
        } catch {
            // Both files read, but they may not belong together: only a context made of them
            // tells, and then it is the options that are wrong, not the network.
            if let certificate = options.certificate, let key = options.privateKey {
                throw .invalidRequest(
                    "the client certificate \(certificate) and the private key \(key) do not belong together; give the key of that certificate")
            }
            if case .file(let path) = environmentTrust {
                throw .invalidRequest("cannot read the trust store \(path) (SSL_CERT_FILE or SSL_CERT_DIR): \(Self.reason(error))")
            }
            throw .invalidRequest("cannot set up TLS: \(Self.reason(error))")
        }
        let built = TLSSetup(configuration: configuration, context: PlainHTTPClient.TLS(context: context))
        // Two first requests may both build one: the first stored is the one all use.
        return tls.withLock { known in
            if let first = known[options] { return first }
            known[options] = built
            return built
        }
    }

    /// Closes every client.
    func shutdown() async throws {
        plain.shutdown()
        let all = clients.withLock { clients in
            defer { clients = [:] }
            return Array(clients.values)
        }
        for client in all { try await client.shutdown() }
    }

    private static func reason(_ error: any Error) -> String {
        if let error = error as? NIOSSLError, case .failedToLoadCertificate = error { return "not a certificate" }
        if let error = error as? NIOSSLError, case .failedToLoadPrivateKey = error { return "not a private key" }
        if let error = error as? IOError { return String(cString: strerror(error.errnoCode)) }
        return "unreadable"
    }
}
