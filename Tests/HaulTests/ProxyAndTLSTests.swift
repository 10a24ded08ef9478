import Foundation
import HaulTestSupport
import Testing
@testable import Haul

/// Downloads through real proxies (tinyproxy, microsocks) from a real TLS server (nginx with
/// the test CA): whole and segmented, with credentials, and the one-line errors when a proxy or
/// a certificate says no. Skipped where those servers are missing, except in CI.
@Suite(.enabled(if: proxyAndTLSServersInstalled || ProcessInfo.processInfo.environment["CI"] != nil))
struct ProxyAndTLSTests {
    static let size = 3 << 20
    static let content = testBytes(size, seed: 11)

    /// A folder with `f.bin`, and nginx serving it with `options`.
    func withNginx(_ options: NginxServer.Options = .init(), _ body: (NginxServer, Harness) async throws -> Void) async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try harness.directory.write("www/f.bin", Self.content, creatingFolders: true)
        try await NginxServer.withServer(root: harness.directory.file("www"), options: options) { nginx in
            try await body(nginx, harness)
        }
    }

    /// A request for `url` into `name` with `network`, whole or in four segments. (Built from
    /// values rather than a configuring closure: Swift 6.3.1 in debug ran the wrong one of two
    /// such closures nested in these async closures.)
    func request(
        _ harness: Harness, _ url: String, _ name: String, segmented: Bool = false,
        _ network: NetworkOptions = NetworkOptions(), maxTries: Int = 2
    ) -> DownloadRequest {
        var request = harness.request(url, file: name)
        request.maxTries = maxTries
        if segmented {
            request.connections = 4
            request.minimumSplitSize = 256 << 10
        }
        request.network = network
        return request
    }

    /// Network options with these proxies and the test CA trusted.
    func network(_ proxy: ProxySettings = ProxySettings(), ca: String?) -> NetworkOptions {
        var network = NetworkOptions()
        network.proxy = proxy
        network.tls.caCertificate = ca
        return network
    }

    @Test func throughAnHTTPProxyWholeAndSegmentedForHTTPAndHTTPS() async throws {
        let certs = try TestCertificates.shared()
        let credentials = TestCredentials(user: "proxyuser", password: "proxy.pass")
        try await ForwardProxy.withProxy(credentials: credentials) { proxy in
            for tls in [false, true] {
                try await withNginx(.init(tls: tls ? .testServer(certs) : nil)) { nginx, harness in
                    try await throughHTTPProxy(proxy, credentials, nginx, harness, tls: tls, ca: certs.ca.certificate)
                }
            }
        }
    }

    func throughHTTPProxy(
        _ proxy: ForwardProxy, _ credentials: TestCredentials, _ nginx: NginxServer, _ harness: Harness,
        tls: Bool, ca: String
    ) async throws {
        let url = nginx.url("/f.bin")
        // Credentials in the proxy URL, then as options.
        _ = try await harness.download(request(harness, url, "a.bin", network(ProxySettings(all: proxy.urlWithCredentials), ca: ca))).get()
        var separate = ProxySettings(http: proxy.url, https: proxy.url)
        separate.user = credentials.user
        separate.password = credentials.password
        _ = try await harness.download(request(harness, url, "b.bin", segmented: true, network(separate, ca: ca))).get()
        #expect(digest(harness.directory.contents("a.bin")) == digest(Self.content))
        #expect(digest(harness.directory.contents("b.bin")) == digest(Self.content))

        // https:// goes through a tunnel (CONNECT), one for the whole download and one per
        // segment; http:// is asked of the proxy in absolute form, with its credentials.
        let target = "127.0.0.1:\(nginx.port)"
        let tunnels = proxy.requests().filter { $0.method == "CONNECT" && $0.target == target }
        let forwarded = proxy.requests().filter { $0.method == "GET" && $0.target == url }
        if tls {
            #expect(tunnels.count >= 5, "\(proxy.requests())")
        } else {
            #expect(tunnels.isEmpty, "\(proxy.requests())")
            #expect(forwarded.count >= 5, "\(proxy.requests())")
        }
        // The segmented download kept its four connections through the proxy.
        let log = await nginx.accessLog(waitingFor: 5)
        #expect(log.count { !$0.range.isEmpty && $0.status == 206 } >= 4)
        #expect(log.allSatisfy { $0.sslProtocol.isEmpty != tls })
    }

    @Test func httpURLsGoThroughAStockSquidWhichRefusesTunnelsToOtherPortsThan443() async throws {
        let certs = try TestCertificates.shared()
        try await SquidProxy.withProxy { squid in
            try await withNginx { nginx, harness in
                let url = nginx.url("/f.bin")
                _ = try await harness.download(request(harness, url, "a.bin", network(ProxySettings(all: squid.url), ca: nil))).get()
                _ = try await harness.download(
                    request(
                        harness, url, "b.bin", segmented: true,
                        network(ProxySettings(http: squid.url), ca: nil))
                ).get()
                #expect(digest(harness.directory.contents("a.bin")) == digest(Self.content))
                #expect(digest(harness.directory.contents("b.bin")) == digest(Self.content))
                // The command line, with the proxy from the environment as curl reads it.
                let (status, _, stderr) = try await HaulProcess.capture(
                    ["get", "-q", "-o", "c.bin", "--state-dir", harness.directory.file("state"), url],
                    in: harness.directory.path, environment: ["http_proxy": squid.url])
                #expect(status == 0, "\(stderr)")
                #expect(digest(harness.directory.contents("c.bin")) == digest(Self.content))
                let requests = squid.requests()
                #expect(requests.count { $0.method == "GET" && $0.target == url && [200, 206].contains($0.status) } >= 6, "\(requests)")
                #expect(!requests.contains { $0.method == "CONNECT" }, "\(requests)")
            }
            // Debian's rules allow a tunnel only to port 443: an https:// server elsewhere is refused, in one line.
            try await withNginx(.init(tls: .testServer(certs))) { nginx, harness in
                let refused = try await harness.download(
                    request(
                        harness, nginx.url("/f.bin"), "d.bin",
                        network(ProxySettings(all: squid.url), ca: certs.ca.certificate))
                ).failure
                #expect(refused?.message == "the proxy 127.0.0.1:\(squid.port) refused the tunnel to 127.0.0.1:\(nginx.port) (check its rules and credentials)")
            }
        }
    }

    @Test func throughASOCKS5ProxyWholeAndSegmented() async throws {
        let certs = try TestCertificates.shared()
        try await SocksProxy.withProxy { socks in
            for tls in [false, true] {
                try await withNginx(.init(tls: tls ? .testServer(certs) : nil)) { nginx, harness in
                    try await throughSOCKS(socks, nginx, harness, ca: certs.ca.certificate)
                }
            }
        }
    }

    func throughSOCKS(_ socks: SocksProxy, _ nginx: NginxServer, _ harness: Harness, ca: String) async throws {
        _ = try await harness.download(request(harness, nginx.url("/f.bin"), "a.bin", network(ProxySettings(all: socks.url), ca: ca))).get()
        // socks5h: the proxy resolves the name.
        _ = try await harness.download(
            request(
                harness, nginx.url("/f.bin", host: "localhost"), "b.bin", segmented: true,
                network(ProxySettings(all: socks.urlResolvingOnProxy), ca: ca))
        ).get()
        #expect(digest(harness.directory.contents("a.bin")) == digest(Self.content))
        #expect(digest(harness.directory.contents("b.bin")) == digest(Self.content))
        let targets = socks.connections().map(\.target)
        #expect(targets.contains("127.0.0.1:\(nginx.port)"))
        #expect(targets.count { $0 == "localhost:\(nginx.port)" } >= 4, "\(targets)")
    }

    @Test func aProxyThatSaysNoIsOneLineAndNoProxyGoesAround() async throws {
        let certs = try TestCertificates.shared()
        try await ForwardProxy.withProxy(credentials: TestCredentials(user: "right", password: "pass")) { proxy in
            try await withNginx(.init(tls: .testServer(certs))) { nginx, harness in
                try await proxySaysNo(proxy, nginx, harness, ca: certs.ca.certificate)
            }
        }
    }

    func proxySaysNo(_ proxy: ForwardProxy, _ nginx: NginxServer, _ harness: Harness, ca: String) async throws {
        let url = nginx.url("/f.bin")
        let noCredentials = try await harness.download(request(harness, url, "a.bin", network(ProxySettings(all: proxy.url), ca: ca))).failure
        #expect(
            noCredentials?.message == "the proxy 127.0.0.1:\(proxy.port) wants credentials: give them in the proxy URL or with --proxy-user and --proxy-passwd")
        let wrongProxy = ProxySettings(all: "http://right:wrong@127.0.0.1:\(proxy.port)")
        let wrong = try await harness.download(request(harness, url, "b.bin", network(wrongProxy, ca: ca))).failure
        #expect(wrong?.message == "the proxy 127.0.0.1:\(proxy.port) refused the tunnel to 127.0.0.1:\(nginx.port) (check its rules and credentials)")
        #expect(wrong?.description.contains("wrong") == false)
        let bypassed = try await harness.download(request(harness, url, "c.bin", network(ProxySettings(all: proxy.url, noProxy: ["127.0.0.1"]), ca: ca)))
        #expect(bypassed.failure == nil)
        #expect(digest(harness.directory.contents("c.bin")) == digest(Self.content))
    }

    @Test func aPrivateCAIsTrustedWithTheOptionAndHTTP2IsNegotiatedWhenAsked() async throws {
        let certs = try TestCertificates.shared()
        try await withNginx(.init(tls: .testServer(certs))) { nginx, harness in
            try await privateCA(nginx, harness, ca: certs.ca.certificate)
        }
    }

    func privateCA(_ nginx: NginxServer, _ harness: Harness, ca: String) async throws {
        let untrusted = try await harness.download(request(harness, nginx.url("/f.bin"), "a.bin", maxTries: 3)).failure
        #expect(
            untrusted?.message
                == "the TLS certificate of 127.0.0.1 is not trusted: it is self-signed or its issuer is unknown; trust its CA with --ca-certificate FILE, or skip the check with --check-certificate=false"
        )
        #expect(harness.clock.retryWaits.isEmpty, "a certificate is not retried")

        _ = try await harness.download(request(harness, nginx.url("/f.bin", host: "localhost"), "b.bin", network(ca: ca))).get()
        var http2 = network(ca: ca)
        http2.http2 = true
        _ = try await harness.download(request(harness, nginx.url("/f.bin"), "c.bin", segmented: true, http2)).get()
        _ = try await harness.download(request(harness, nginx.url("/f.bin"), "e.bin", http2)).get()
        var insecure = NetworkOptions()
        insecure.tls.verify = false
        _ = try await harness.download(request(harness, nginx.url("/f.bin"), "d.bin", insecure)).get()
        for name in ["b.bin", "c.bin", "d.bin", "e.bin"] {
            #expect(digest(harness.directory.contents(name)) == digest(Self.content), "\(name)")
        }
        // HTTP/1.1 by default; with http2, one connection speaks HTTP/2 and a segmented
        // download's transfers are still HTTP/1.1 connections of their own.
        checkProtocols(await nginx.accessLog(waitingFor: 8))
    }

    func checkProtocols(_ log: [NginxServer.AccessLogEntry]) {
        let protocols = log.map { "\($0.serverProtocol) \($0.range)" }
        #expect(log.count { $0.serverProtocol == "HTTP/2.0" } == 1, "only e.bin: \(protocols)")
        #expect(log.count { $0.status == 206 && $0.range != "bytes=0-0" && $0.serverProtocol == "HTTP/1.1" } >= 4, "\(protocols)")
    }

    @Test func expiredWrongNameAndMissingClientCertificatesSaySo() async throws {
        let certs = try TestCertificates.shared()
        let ca = certs.ca.certificate
        try await withNginx(.init(tls: .init(certs.expired))) { nginx, harness in
            let expired = try await harness.download(request(harness, nginx.url("/f.bin"), "a.bin", network(ca: ca))).failure
            #expect(expired?.message.hasPrefix("the TLS certificate of 127.0.0.1 is not trusted: it expired on 20") == true, "\(String(describing: expired))")
            // Its CA was given already: a CA is not what it needs.
            #expect(
                expired?.message.hasSuffix("; the server must renew it, or skip the check with --check-certificate=false") == true,
                "\(String(describing: expired))")
            #expect(expired?.message.contains("--ca-certificate") == false)
        }
        try await withNginx(.init(tls: .init(certs.wrongName))) { nginx, harness in
            let wrongName = try await harness.download(request(harness, nginx.url("/f.bin", host: "localhost"), "a.bin", network(ca: ca))).failure
            #expect(
                wrongName?.message
                    == "the TLS certificate of localhost is for another name; use the name the certificate is for, or skip the check with --check-certificate=false"
            )
        }
        try await withNginx(.init(tls: .testServer(certs))) { nginx, harness in
            try await clientCertificates(nginx, harness, certs)
        }
        // A server that demands one finishes the handshake and answers 400 with a page that
        // says why: the message says it too.
        var demanding = NginxServer.TLS.testServer(certs)
        demanding.requiresClientCertificate = true
        try await withNginx(.init(tls: demanding)) { nginx, harness in
            let refused = try await harness.download(request(harness, nginx.url("/f.bin"), "a.bin", network(ca: certs.ca.certificate))).failure
            #expect(refused?.message == "127.0.0.1 wants a client certificate it accepts; give one with --certificate FILE --private-key FILE")
        }
    }

    func clientCertificates(_ nginx: NginxServer, _ harness: Harness, _ certs: TestCertificates) async throws {
        let refused = try await harness.download(request(harness, nginx.url("/mtls/f.bin"), "a.bin", network(ca: certs.ca.certificate))).failure
        #expect(refused?.status == 403)
        var withCertificate = network(ca: certs.ca.certificate)
        withCertificate.tls.certificate = certs.client.certificate
        withCertificate.tls.privateKey = certs.client.key
        _ = try await harness.download(request(harness, nginx.url("/mtls/f.bin"), "b.bin", withCertificate)).get()
        #expect(digest(harness.directory.contents("b.bin")) == digest(Self.content))
        // A certificate and a key that do not belong together are a bad option, in words.
        var mismatched = withCertificate
        mismatched.tls.privateKey = certs.server.key
        let mismatch = try await harness.download(request(harness, nginx.url("/mtls/f.bin"), "d.bin", mismatched)).failure
        #expect(mismatch?.kind == .invalidRequest)
        #expect(
            mismatch?.message
                == "the client certificate \(certs.client.certificate) and the private key \(certs.server.key) do not belong together; give the key of that certificate"
        )
        let notPEM = harness.directory.file("www/f.bin")
        let unreadable = try await harness.download(request(harness, nginx.url("/f.bin"), "c.bin", network(ca: notPEM))).failure
        #expect(unreadable?.message.hasPrefix("cannot read the CA certificate \(notPEM): ") == true, "\(String(describing: unreadable))")
    }

    @Test func nginxBasicAuthCookiesAndACrossOriginRedirect() async throws {
        let credentials = TestCredentials(user: "alice", password: "s3cret word")
        let cookie = NginxServer.Cookie(name: "session", value: "abc")
        let other = try Harness()
        defer { other.remove() }
        try other.directory.write("www/f.bin", Self.content, creatingFolders: true)
        try await NginxServer.withServer(root: other.directory.file("www"), options: .init()) { elsewhere in
            let options = NginxServer.Options(basicAuth: credentials, cookie: cookie, redirectTarget: elsewhere.url("/", host: "localhost"))
            try await withNginx(options) { nginx, harness in
                try await authAndCookies(nginx, elsewhere, harness, credentials)
            }
        }
    }

    func authAndCookies(_ nginx: NginxServer, _ elsewhere: NginxServer, _ harness: Harness, _ credentials: TestCredentials) async throws {
        let url = nginx.url("/auth/f.bin")
        // Without credentials: nginx's 401.
        #expect(try await harness.download(request(harness, url, "a.bin")).failure?.status == 401)
        // In the URL, by the options, by .netrc.
        let inURL = url.replacingOccurrences(of: "https://", with: "https://\(credentials.userInfo)@")
            .replacingOccurrences(of: "http://", with: "http://\(credentials.userInfo)@")
        _ = try await harness.download(request(harness, inURL, "b.bin")).get()
        var byOptions = NetworkOptions()
        byOptions.user = credentials.user
        byOptions.password = credentials.password
        _ = try await harness.download(request(harness, url, "c.bin", byOptions)).get()
        try harness.directory.write("netrc", Array("machine 127.0.0.1 login \(credentials.user) password \"\(credentials.password)\"\n".utf8))
        var byNetrc = NetworkOptions()
        byNetrc.useNetrc = true
        byNetrc.netrcPath = harness.directory.file("netrc")
        _ = try await harness.download(request(harness, url, "d.bin", byNetrc)).get()
        for name in ["b.bin", "c.bin", "d.bin"] { #expect(digest(harness.directory.contents(name)) == digest(Self.content), "\(name)") }
        let authorized = await nginx.accessLog(waitingFor: 4).filter { $0.status == 200 }
        #expect(authorized.count == 3 && authorized.allSatisfy { $0.authorization == credentials.basicAuthorization })

        // A cookie-gated file: 403 without the cookie file, 200 with it.
        #expect(try await harness.download(request(harness, nginx.url("/cookie/f.bin"), "e.bin")).failure?.status == 403)
        try harness.directory.write("cookies.txt", Array("127.0.0.1\tFALSE\t/\tFALSE\t0\tsession\tabc\n".utf8))
        var withCookies = NetworkOptions()
        withCookies.cookieFile = harness.directory.file("cookies.txt")
        _ = try await harness.download(request(harness, nginx.url("/cookie/f.bin"), "f.bin", withCookies)).get()
        #expect(digest(harness.directory.contents("f.bin")) == digest(Self.content))

        // An authorized request redirected to another origin: nothing of it follows.
        var leaky = byOptions
        leaky.cookieFile = harness.directory.file("cookies.txt")
        _ = try await harness.download(request(harness, nginx.url("/auth/redirect-to/f.bin"), "g.bin", leaky)).get()
        #expect(digest(harness.directory.contents("g.bin")) == digest(Self.content))
        let received = await elsewhere.accessLog(waitingFor: 1)
        #expect(!received.isEmpty && received.allSatisfy { $0.authorization.isEmpty && $0.cookie.isEmpty }, "\(received)")
    }

    @Test func theCommandLineReadsTheProxyEnvironmentAndSSLCertFile() async throws {
        let certs = try TestCertificates.shared()
        try await ForwardProxy.withProxy { proxy in
            try await withNginx(.init(tls: .testServer(certs))) { nginx, harness in
                try await commandLine(proxy, nginx, harness.directory, ca: certs.ca.certificate)
            }
        }
    }

    func commandLine(_ proxy: ForwardProxy, _ nginx: NginxServer, _ dir: TestDirectory, ca: String) async throws {
        let (status, _, stderr) = try await HaulProcess.capture(
            ["get", "-q", "-o", "a.bin", "--state-dir", dir.file("state"), nginx.url("/f.bin")],
            in: dir.path, environment: ["https_proxy": proxy.url, "SSL_CERT_FILE": ca])
        #expect(status == 0, "\(stderr)")
        #expect(digest(dir.contents("a.bin")) == digest(Self.content))
        #expect(proxy.requests().contains { $0.method == "CONNECT" && $0.target == "127.0.0.1:\(nginx.port)" })

        // -k: a warning line, then the download.
        let insecure = try await HaulProcess.capture(
            ["get", "-q", "-k", "-o", "b.bin", "--state-dir", dir.file("state"), nginx.url("/f.bin")], in: dir.path)
        #expect(insecure.status == 0)
        #expect(insecure.stderr == "haul: warning: TLS certificates are not checked: anyone on the way can read and change the downloads\n")
        #expect(digest(dir.contents("b.bin")) == digest(Self.content))
    }
}

/// The trust store when neither `SSL_CERT_FILE` nor `SSL_CERT_DIR` is set: the system's folder of
/// certificates under their subjects' hashes, read a certificate as a check needs it, where the
/// system has one; else NIO's default (the file of every certificate, read whole).
@Suite(.enabled(if: proxyAndTLSServersInstalled || ProcessInfo.processInfo.environment["CI"] != nil))
struct SystemTrustTests {
    @Test func aFolderOfHashedNamesIsTheTrustStoreAndAnyOtherFolderIsNot() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try dir.write("hashed/5ad8a5d6.0", Array("a certificate".utf8), creatingFolders: true)
        try dir.write("hashed/ca-certificates.crt", [], creatingFolders: true)
        try dir.write("bundle/ca-bundle.crt", [], creatingFolders: true)
        try dir.write("bundle/5ad8a5d6.pem", [], creatingFolders: true)
        try dir.write("bundle/5ad8a5dg.0", [], creatingFolders: true)
        try dir.write("bundle/5ad8a5d6.x", [], creatingFolders: true)
        #expect(HTTPClients.trust(inFolder: dir.file("hashed")) == .file(dir.file("hashed")))
        #expect(HTTPClients.trust(inFolder: dir.file("bundle")) == .default)
        #expect(HTTPClients.trust(inFolder: dir.file("nowhere")) == .default)

        #expect(HTTPClients.trust(from: [:]) == nil)
        #expect(HTTPClients.trust(from: ["SSL_CERT_FILE": "/a.pem", "SSL_CERT_DIR": "/b"]) == .file("/a.pem"))
        #expect(HTTPClients.trust(from: ["SSL_CERT_FILE": "", "SSL_CERT_DIR": "/b:/c"]) == .file("/b"))
    }

    @Test func aServerIsCheckedAgainstAHashedFolderAndTheSystemsOwnWithoutTheEnvironment() async throws {
        let certs = try TestCertificates.shared()
        let hashed = try certs.hashedCAFolder()
        let harness = try Harness()
        defer { harness.remove() }
        let content = testBytes(4096, seed: 5)
        try harness.directory.write("www/f.bin", content, creatingFolders: true)
        try await NginxServer.withServer(root: harness.directory.file("www"), options: .init(tls: .testServer(certs))) { nginx in
            let dir = harness.directory
            let state = dir.file("state")
            // The test CA in a folder of hashed names: found there, one certificate read.
            let found = try await HaulProcess.capture(
                ["get", "-q", "-o", "a.bin", "--state-dir", state, nginx.url("/f.bin")], in: dir.path,
                environment: ["SSL_CERT_FILE": nil, "SSL_CERT_DIR": hashed])
            #expect(found.status == 0, "\(found.stderr)")
            #expect(digest(dir.contents("a.bin")) == digest(content))
            // The system's store (its hashed folder where it has one) does not know the test CA...
            let unknown = try await HaulProcess.capture(
                ["get", "-q", "-o", "b.bin", "--max-tries", "1", "--state-dir", state, nginx.url("/f.bin")], in: dir.path,
                environment: ["SSL_CERT_FILE": nil, "SSL_CERT_DIR": nil])
            #expect(unknown.status != 0)
            #expect(unknown.stderr.contains("is not trusted: it is self-signed or its issuer is unknown"), "\(unknown.stderr)")
            #expect(!FileManager.default.fileExists(atPath: dir.file("b.bin")))
            // ...and trusts it given as one more CA.
            let added = try await HaulProcess.capture(
                ["get", "-q", "-o", "c.bin", "--ca-certificate", certs.ca.certificate, "--state-dir", state, nginx.url("/f.bin")],
                in: dir.path, environment: ["SSL_CERT_FILE": nil, "SSL_CERT_DIR": nil])
            #expect(added.status == 0, "\(added.stderr)")
            #expect(digest(dir.contents("c.bin")) == digest(content))
        }
    }
}

/// nginx, tinyproxy, squid, microsocks and openssl (`scripts/install-deps.sh --with-test-servers`).
let proxyAndTLSServersInstalled =
    NginxServer.executablePath != nil && ForwardProxy.executablePath != nil
    && SquidProxy.executablePath != nil
    && SocksProxy.executablePath != nil && TestCertificates.opensslPath != nil
