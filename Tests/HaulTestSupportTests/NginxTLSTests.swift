import Foundation
import HaulTestSupport
import Testing

/// nginx with the test certificates and its access log, seen through curl.
@Suite(
    .enabled(
        if: runsWith(NginxServer.executablePath) && runsWith(TestCertificates.opensslPath),
        "nginx, openssl or curl is not installed"))
struct NginxTLSTests {
    let content = testContent(1000)

    @Test func trustedWithTheTestCA() async throws {
        let certs = try TestCertificates.shared()
        try await withFolder { folder in
            try await NginxServer.withServer(root: folder, options: .init(tls: .testServer(certs))) { nginx in
                #expect(nginx.url("/data.bin") == "https://127.0.0.1:\(nginx.port)/data.bin")
                for host in ["127.0.0.1", "localhost"] {
                    let result = try curl(["--cacert", certs.ca.certificate, nginx.url("/data.bin", host: host)])
                    #expect(result.status == 200, "\(result)")
                    #expect(Array(result.body) == content)
                }
                let entries = await nginx.accessLog(waitingFor: 2)
                #expect(entries.map(\.host) == ["127.0.0.1:\(nginx.port)", "localhost:\(nginx.port)"])
                #expect(entries.allSatisfy { $0.sslProtocol == "TLSv1.3" && $0.bodyBytesSent == 1000 })
            }
        }
    }

    @Test func refusedWithoutTheCA() async throws {
        let certs = try TestCertificates.shared()
        try await withFolder { folder in
            try await NginxServer.withServer(root: folder, options: .init(tls: .testServer(certs))) { nginx in
                let result = try curl([nginx.url("/data.bin")])
                #expect(result.exitCode == 60, "\(result)")
                #expect(result.error.contains("unable to get local issuer certificate"), "\(result)")
                #expect(nginx.accessLog().isEmpty)
            }
        }
    }

    @Test func expiredCertificateIsRefused() async throws {
        let certs = try TestCertificates.shared()
        try await withFolder { folder in
            try await NginxServer.withServer(root: folder, options: .init(tls: .init(certs.expired))) { nginx in
                let result = try curl(["--cacert", certs.ca.certificate, nginx.url("/data.bin")])
                #expect(result.exitCode == 60, "\(result)")
                #expect(result.error.contains("certificate has expired"), "\(result)")
            }
        }
    }

    @Test func wrongNameIsRefused() async throws {
        let certs = try TestCertificates.shared()
        try await withFolder { folder in
            try await NginxServer.withServer(root: folder, options: .init(tls: .init(certs.wrongName))) { nginx in
                for host in ["127.0.0.1", "localhost"] {
                    let result = try curl(["--cacert", certs.ca.certificate, nginx.url("/data.bin", host: host)])
                    #expect(result.exitCode == 60, "\(result)")
                    #expect(result.error.contains("no alternative certificate subject name matches target host name '\(host)'"), "\(result)")
                }
            }
        }
    }

    @Test func http2IsNegotiated() async throws {
        let certs = try TestCertificates.shared()
        try await withFolder { folder in
            try await NginxServer.withServer(root: folder, options: .init(tls: .testServer(certs))) { nginx in
                let h2 = try curl(
                    ["--http2", "--cacert", certs.ca.certificate, nginx.url("/data.bin")],
                    writeOut: "%{http_code} %{http_version}")
                #expect(h2.writeOut == "200 2", "\(h2)")
                #expect(Array(h2.body) == content)
                let h1 = try curl(
                    ["--http1.1", "--cacert", certs.ca.certificate, nginx.url("/data.bin")],
                    writeOut: "%{http_code} %{http_version}")
                #expect(h1.writeOut == "200 1.1", "\(h1)")
                let entries = await nginx.accessLog(waitingFor: 2)
                #expect(entries.map(\.serverProtocol) == ["HTTP/2.0", "HTTP/1.1"], "\(nginx.accessLogText())")
                #expect(entries.map(\.request) == ["GET /data.bin HTTP/2.0", "GET /data.bin HTTP/1.1"])
            }
            // Turned off: ALPN offers only http/1.1.
            let h1Only = NginxServer.Options(tls: .init(certs.server, http2: false))
            try await NginxServer.withServer(root: folder, options: h1Only) { nginx in
                let result = try curl(
                    ["--http2", "--cacert", certs.ca.certificate, nginx.url("/data.bin")],
                    writeOut: "%{http_code} %{http_version}")
                #expect(result.writeOut == "200 1.1", "\(result)")
            }
        }
    }

    @Test func accessLogRecordsTheHeaders() async throws {
        try await withFolder { folder in
            try await NginxServer.withServer(root: folder, options: .init()) { nginx in
                let result = try curl([
                    "-A", "haul-test/1", "-e", "http://ref.example/page", "-r", "10-19",
                    "-H", "Authorization: Basic YTpi", "-H", #"Cookie: a=1; b="q\"x""#,
                    nginx.url("/data.bin?x=1"),
                ])
                #expect(result.status == 206, "\(result)")
                let missing = try curl([nginx.url("/nope.bin")])
                #expect(missing.status == 404)

                let entries = await nginx.accessLog(waitingFor: 2)
                try #require(entries.count == 2, "\(nginx.accessLogText())")
                let first = entries[0]
                #expect(first.serverProtocol == "HTTP/1.1")
                #expect(first.request == "GET /data.bin?x=1 HTTP/1.1")
                #expect(first.method == "GET" && first.uri == "/data.bin?x=1" && first.path == "/data.bin")
                #expect(first.status == 206 && first.bodyBytesSent == 10)
                #expect(first.host == "127.0.0.1:\(nginx.port)")
                #expect(first.authorization == "Basic YTpi")
                #expect(first.cookie == #"a=1; b="q\"x""#)
                #expect(first.userAgent == "haul-test/1")
                #expect(first.referer == "http://ref.example/page")
                #expect(first.range == "bytes=10-19")
                #expect(first.via == "" && first.sslProtocol == "")
                #expect(entries[1].status == 404 && entries[1].authorization == "" && entries[1].cookie == "")
            }
        }
    }

    @Test func theDefaultStartKeepsNoAccessLog() async throws {
        try await withFolder { folder in
            try await NginxServer.withServer(root: folder) { nginx in
                #expect(try curl([nginx.url("/data.bin")]).status == 200)
                #expect(nginx.url("/data.bin").hasPrefix("http://"))
                try await Task.sleep(for: .milliseconds(100))
                #expect(nginx.accessLog().isEmpty)
            }
        }
    }

    @Test func throughTheProxiesToTLS() async throws {
        let certs = try TestCertificates.shared()
        try await withFolder { folder in
            try await NginxServer.withServer(root: folder, options: .init(tls: .testServer(certs))) { nginx in
                if ForwardProxy.executablePath != nil {
                    try await ForwardProxy.withProxy { proxy in
                        let result = try curl(["-x", proxy.url, "--cacert", certs.ca.certificate, nginx.url("/data.bin")])
                        #expect(result.status == 200, "\(result)")
                        #expect(proxy.requests().map(\.description) == ["CONNECT 127.0.0.1:\(nginx.port) HTTP/1.1"])
                    }
                }
                if SocksProxy.executablePath != nil {
                    try await SocksProxy.withProxy { socks in
                        let result = try curl([
                            "-x", socks.urlResolvingOnProxy, "--cacert", certs.ca.certificate,
                            nginx.url("/data.bin", host: "localhost"),
                        ])
                        #expect(result.status == 200, "\(result)")
                        #expect(socks.connections().map(\.target) == ["localhost:\(nginx.port)"])
                    }
                }
            }
        }
    }

    @Test func optionsNginxCannotTakeAreRefused() async throws {
        await #expect(throws: NginxServerError.invalidOptions) {
            try await NginxServer.start(root: "/tmp", options: .init(tls: .init(certificate: "/nope.pem", key: "/nope.key")))
        }
    }

    /// A temp folder holding `data.bin` (the test content), removed afterwards.
    private func withFolder(_ body: (String) async throws -> Void) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("nginx-tls-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try Data(content).write(to: folder.appendingPathComponent("data.bin"))
        try await body(folder.path)
    }
}
