import Foundation
import HaulTestSupport
import Testing
@testable import Haul

/// HTTPS on ``PlainHTTPClient``'s NIO pipeline, not AsyncHTTPClient's: straight to nginx and
/// through a proxy's tunnel, its connections kept alive between files, SNI with the host's name,
/// HTTP/1.1 by ALPN, and the handshake and the tunnel under the connect timeout.
@Suite(.enabled(if: proxyAndTLSServersInstalled || ProcessInfo.processInfo.environment["CI"] != nil))
struct HTTPSFastPathTests {
    static let count = 10

    /// A folder with `count` small files, and nginx serving them over TLS (HTTP/2 offered).
    func withFiles(_ body: (NginxServer, Harness, TestCertificates) async throws -> Void) async throws {
        let certs = try TestCertificates.shared()
        let harness = try Harness()
        defer { harness.remove() }
        for index in 0..<Self.count {
            try harness.directory.write("www/f\(index).bin", testBytes(1000, seed: UInt64(index)), creatingFolders: true)
        }
        try await NginxServer.withServer(root: harness.directory.file("www"), options: .init(tls: .testServer(certs))) { nginx in
            try await body(nginx, harness, certs)
        }
    }

    /// Downloads the files one after another with one downloader, and says which clients carried them.
    func downloadAll(
        _ nginx: NginxServer, _ harness: Harness, host: String = "127.0.0.1", _ network: NetworkOptions
    ) async throws -> (connections: Int, asyncHTTPClientRoutes: [HTTPClients.Route]) {
        let downloader = try harness.downloader()
        do {
            for index in 0..<Self.count {
                var request = harness.request(nginx.url("/f\(index).bin", host: host), file: "f\(index).bin")
                request.network = network
                _ = try await downloader.download(request).result()
            }
        } catch {
            try await downloader.shutdown()
            throw error
        }
        let used = (downloader.clients.plain.connectionsOpened, downloader.clients.asyncHTTPClientRoutes)
        try await downloader.shutdown()
        for index in 0..<Self.count {
            #expect(digest(harness.directory.contents("f\(index).bin")) == digest(testBytes(1000, seed: UInt64(index))), "f\(index).bin")
        }
        return used
    }

    @Test func httpsGoesOverTheNIOClientOnOneKeptAliveConnection() async throws {
        try await withFiles { nginx, harness, certs in
            var network = NetworkOptions()
            network.tls.caCertificate = certs.ca.certificate
            let used = try await downloadAll(nginx, harness, host: "localhost", network)
            #expect(used.asyncHTTPClientRoutes.isEmpty)
            #expect(used.connections == 1)
            let log = await nginx.accessLog(waitingFor: Self.count)
            #expect(log.count == Self.count)
            // nginx offers h2; the client offers only http/1.1.
            #expect(log.allSatisfy { $0.sslProtocol == "TLSv1.3" && $0.serverProtocol == "HTTP/1.1" && $0.status == 200 }, "\(log)")
            #expect(Set(log.map(\.connection)).count == 1, "\(log.map(\.connection))")
            #expect(log.allSatisfy { $0.sslServerName == "localhost" && $0.host == "localhost:\(nginx.port)" }, "\(log)")
        }
    }

    @Test func throughAProxysTunnelTheTunnelIsKeptAliveToo() async throws {
        try await ForwardProxy.withProxy { proxy in
            try await withFiles { nginx, harness, certs in
                var network = NetworkOptions()
                network.tls.caCertificate = certs.ca.certificate
                network.proxy = ProxySettings(https: proxy.url)
                let used = try await downloadAll(nginx, harness, network)
                #expect(used.asyncHTTPClientRoutes.isEmpty)
                #expect(used.connections == 1)
                let tunnels = proxy.requests().filter { $0.method == "CONNECT" }
                #expect(tunnels.map(\.target) == ["127.0.0.1:\(nginx.port)"], "\(proxy.requests())")
                let log = await nginx.accessLog(waitingFor: Self.count)
                #expect(log.count == Self.count && Set(log.map(\.connection)).count == 1, "\(log)")
                // An IP address is not a name for SNI.
                #expect(log.allSatisfy { $0.sslProtocol == "TLSv1.3" && $0.sslServerName.isEmpty }, "\(log)")
            }
        }
    }

    @Test func aSegmentedHTTPSDownloadUsesItsConnectionsOnTheNIOClient() async throws {
        let certs = try TestCertificates.shared()
        let harness = try Harness()
        defer { harness.remove() }
        let content = testBytes(4 << 20, seed: 3)
        try harness.directory.write("www/big.bin", content, creatingFolders: true)
        // 8 MiB/s a connection: the first cannot take the whole file before the others have
        // connected, however busy the machine (unthrottled, it once left only two to split).
        let options = NginxServer.Options(limitRate: 8 << 20, tls: .testServer(certs))
        try await NginxServer.withServer(root: harness.directory.file("www"), options: options) { nginx in
            let downloader = try harness.downloader()
            var request = harness.request(nginx.url("/limited/big.bin"), file: "big.bin")
            request.network.tls.caCertificate = certs.ca.certificate
            request.connections = 4
            request.minimumSplitSize = 256 << 10
            let outcome: Result<DownloadResult, DownloadError>
            do throws(DownloadError) { outcome = .success(try await downloader.download(request).result()) } catch { outcome = .failure(error) }
            let used = (downloader.clients.plain.connectionsOpened, downloader.clients.asyncHTTPClientRoutes)
            try await downloader.shutdown()
            _ = try outcome.get()
            #expect(digest(harness.directory.contents("big.bin")) == digest(content))
            #expect(used.1.isEmpty)
            let log = await nginx.accessLog(waitingFor: 4)
            // The first answer streams the first part; each other connection asks for a range.
            let bodies = log.filter { $0.status == 200 || $0.status == 206 }
            #expect(bodies.filter { $0.status == 206 }.count >= 3, "\(log)")
            #expect(Set(bodies.map(\.connection)).count >= 4 && used.0 >= 4, "\(log.map(\.connection)), \(used.0)")
        }
    }

    /// A server that takes the connection and never answers the TLS hello, a proxy that never
    /// answers `CONNECT`: each try ends at the connect timeout, in words.
    @Test func aSilentServerOrProxyFailsAtTheConnectTimeout() async throws {
        let silent = try ScriptedServer { _, connection, _ in
            // A TLS hello never ends a request head: read until the client closes. A CONNECT does: then keep still.
            _ = connection.readRequest()
            _ = connection.clientClosed(within: 10)
        }
        defer { silent.stop() }
        let harness = try Harness()
        defer { harness.remove() }
        var network = NetworkOptions()
        network.connectTimeout = .milliseconds(300)
        var request = harness.request("https://127.0.0.1:\(silent.port)/f.bin", file: "a.bin")
        request.network = network
        request.maxTries = 1
        let handshake = try await harness.download(request).failure
        #expect(handshake?.message == "cannot connect to 127.0.0.1: no answer within 0.3 s (--connect-timeout)")

        var proxied = harness.request("https://127.0.0.1:\(silent.port)/f.bin", file: "b.bin")
        proxied.network = network
        proxied.network.proxy = ProxySettings(https: "http://127.0.0.1:\(silent.port)")
        proxied.maxTries = 1
        let tunnel = try await harness.download(proxied).failure
        #expect(tunnel?.message == "the proxy 127.0.0.1:\(silent.port) did not answer")

        // A proxy that hangs up on CONNECT is retried like a dropped connection, and says so.
        let hangingUp = try ScriptedServer { _, connection, _ in _ = connection.readRequest() }
        defer { hangingUp.stop() }
        proxied.network.proxy = ProxySettings(https: "http://127.0.0.1:\(hangingUp.port)")
        let closed = try await harness.download(proxied).failure
        #expect(closed?.message == "the proxy 127.0.0.1:\(hangingUp.port) closed the connection instead of opening a tunnel to 127.0.0.1:\(silent.port)")
        #expect(closed?.isRetryable == true)
    }
}
