import Foundation
import HaulTestSupport
import Testing
@testable import Haul

/// Uploads take the downloads' network paths: TLS with a private CA, an HTTP proxy's tunnel, a
/// stock squid for `http://` (absolute form: it refuses tunnels to other ports than 443) and a
/// SOCKS5 proxy (AsyncHTTPClient's streamed body). Each `PUT` lands byte for byte in nginx's
/// WebDAV folder.
@Suite(.serialized, .enabled(if: NginxServer.executablePath != nil || ProcessInfo.processInfo.environment["CI"] != nil))
struct UploadNetworkTests {
    static let content = testBytes(3 << 20 + 5, seed: 31)

    /// PUTs the test file to `url` with `network`; returns what nginx stored under `name`.
    func put(_ url: String, network: NetworkOptions, dir: TestDirectory, name: String) async throws -> Result<UploadResult, DownloadError> {
        try await Downloader.withDownloader(.init(stateDirectory: dir.file("state"))) { downloader in
            var request = UploadRequest(file: dir.file("up.bin"), url: url)
            request.protocol = .put
            request.network = network
            request.maxTries = 1
            let task = try await downloader.upload(request)
            do throws(DownloadError) { return .success(try await task.result()) } catch { return .failure(error) }
        }
    }

    @Test func overTLSAndThroughAProxysTunnel() async throws {
        let certs = try TestCertificates.shared()
        let dir = try TestDirectory()
        defer { dir.remove() }
        try dir.write("up.bin", Self.content)
        try dir.write("www/.keep", [], creatingFolders: true)
        try await NginxServer.withServer(root: dir.file("www"), options: .init(tls: .testServer(certs), webDAV: true)) { nginx in
            var network = NetworkOptions()
            network.tls.caCertificate = certs.ca.certificate
            _ = try await put(nginx.url("/dav/direct.bin"), network: network, dir: dir, name: "direct.bin").get()
            let proxy = try await ForwardProxy.start()
            network.proxy = try ProxySettings(all: proxy.url)
            let tunnelled = try await put(nginx.url("/dav/tunnel.bin"), network: network, dir: dir, name: "tunnel.bin")
            await proxy.stop()
            _ = try tunnelled.get()
            // Without the CA the server is not trusted: refused before any byte goes.
            let untrusted = try await put(nginx.url("/dav/untrusted.bin"), network: NetworkOptions(), dir: dir, name: "untrusted.bin")
            #expect(throws: DownloadError.self) { try untrusted.get() }
        }
        #expect(digest(dir.contents("www/direct.bin")) == digest(Self.content))
        #expect(digest(dir.contents("www/tunnel.bin")) == digest(Self.content))
        #expect(!dir.exists("www/untrusted.bin"))
    }

    @Test(.enabled(if: SquidProxy.executablePath != nil || ProcessInfo.processInfo.environment["CI"] != nil))
    func throughAStockSquidAndASOCKS5Proxy() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try dir.write("up.bin", Self.content)
        try dir.write("www/.keep", [], creatingFolders: true)
        try await NginxServer.withServer(root: dir.file("www"), options: .init(webDAV: true)) { nginx in
            let (squidRequests, viaSquid) = try await SquidProxy.withProxy { squid in
                var network = NetworkOptions()
                network.proxy = try ProxySettings(all: squid.url)
                let result = try await put(nginx.url("/dav/squid.bin"), network: network, dir: dir, name: "squid.bin")
                return (squid.requests(), result)
            }
            _ = try viaSquid.get()
            #expect(squidRequests.contains { $0.method == "PUT" && $0.target == nginx.url("/dav/squid.bin") }, "\(squidRequests)")
            let viaSocks = try await SocksProxy.withProxy { socks in
                var network = NetworkOptions()
                network.proxy = try ProxySettings(all: socks.url)
                return try await put(nginx.url("/dav/socks.bin"), network: network, dir: dir, name: "socks.bin")
            }
            _ = try viaSocks.get()
        }
        #expect(digest(dir.contents("www/squid.bin")) == digest(Self.content))
        #expect(digest(dir.contents("www/socks.bin")) == digest(Self.content))
    }
}
