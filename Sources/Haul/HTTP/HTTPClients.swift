import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// The HTTP clients of one ``Downloader``: ``PlainHTTPClient`` for plain HTTP without a proxy,
/// and an AsyncHTTPClient for direct HTTPS and one more for each proxy (connect timeout, HTTP
/// version) some download asked for, each with its own connection pool.
/// TLS settings are per request, so downloads with different trust share a client.
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
    /// `SSL_CERT_FILE` / `SSL_CERT_DIR`: the trust store instead of the system's, as
    /// OpenSSL-based tools read it.
    private let systemTrust: NIOSSLTrustRoots
    private let clients = Mutex<[Route: HTTPClient]>([:])
    /// Plain HTTP without a proxy: most requests of a list of small files.
    let plain: PlainHTTPClient
    private let tlsConfigurations = Mutex<[TLSOptions: TLSConfiguration]>([:])

    init(stallTimeout: Duration, rateLimit: Int64?, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.stallTimeout = stallTimeout
        self.rateLimit = rateLimit
        plain = PlainHTTPClient(
            group: MultiThreadedEventLoopGroup.singleton, stallTimeout: stallTimeout,
            allocator: HTTPTransport.receiveAllocator(rateLimit: rateLimit))
        if let file = environment["SSL_CERT_FILE"], !file.isEmpty {
            systemTrust = .file(file)
        } else if let folder = environment["SSL_CERT_DIR"], !folder.isEmpty {
            systemTrust = .file(folder.split(separator: ":").first.map(String.init) ?? folder)
        } else {
            systemTrust = .default
        }
    }

    /// The client for `route`, made on first use.
    func client(for route: Route) -> HTTPClient {
        clients.withLock { clients in
            if let client = clients[route] { return client }
            let client = HTTPTransport.makeClient(stallTimeout: stallTimeout, rateLimit: rateLimit, route: route)
            clients[route] = client
            return client
        }
    }

    /// The TLS configuration for `options`, its files read once.
    ///
    /// - Throws: ``DownloadError`` (``DownloadError/Kind/invalidRequest``) when a certificate or
    ///   key file cannot be read or parsed.
    func tlsConfiguration(for options: TLSOptions) throws(DownloadError) -> TLSConfiguration {
        if let known = tlsConfigurations.withLock({ $0[options] }) { return known }
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.trustRoots = systemTrust
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
            // Both read, but they may not belong together: only a context made of them tells
            // (once per set of options), and then it is the options that are wrong, not the network.
            do {
                _ = try NIOSSLContext(configuration: configuration)
            } catch {
                throw .invalidRequest(
                    "the client certificate \(certificate) and the private key \(key) do not belong together; give the key of that certificate")
            }
        }
        let built = configuration
        tlsConfigurations.withLock { $0[options] = built }
        return built
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
