import Foundation
import HaulTestSupport
import Testing
@testable import Haul

/// The rules behind the network options: which proxy a URL takes, what a proxy URL may be,
/// how URLs are shown, how `.netrc` and cookie files read; and the transport's failures as
/// one line of words, one try each.
@Suite struct NetworkOptionsTests {
    @Test func theEnvironmentIsReadAsCurlReadsIt() throws {
        let settings = ProxySettings.environment([
            "HTTP_PROXY": "http://cgi-injected:1", "https_proxy": "", "HTTPS_PROXY": "http://secure:3128",
            "ALL_PROXY": "socks5h://all:1080", "no_proxy": "internal.example, .corp.example,10.0.0.1",
        ])
        // Upper-case HTTP_PROXY is ignored (a CGI caller can set it); empty values are unset.
        #expect(settings.http == nil)
        #expect(settings.https == "http://secure:3128")
        #expect(settings.all == "socks5h://all:1080")
        #expect(settings.noProxy == ["internal.example", ".corp.example", "10.0.0.1"])

        #expect(try settings.server(scheme: "http", host: "a.example") == ProxyServer(parsing: "socks5h://all:1080"))
        #expect(try settings.server(scheme: "https", host: "a.example")?.host == "secure")
        for direct in ["internal.example", "x.internal.example", "corp.example", "deep.a.corp.example", "10.0.0.1", "INTERNAL.example"] {
            #expect(try settings.server(scheme: "https", host: direct) == nil, "\(direct)")
        }
        for proxied in ["notinternal.example", "example", "10.0.0.10"] {
            #expect(try settings.server(scheme: "https", host: proxied) != nil, "\(proxied)")
        }
        #expect(try ProxySettings(all: "http://p:1", noProxy: ["*"]).server(scheme: "http", host: "any") == nil)
        #expect(try ProxySettings(all: "http://p:1", noProxy: ["::1"]).server(scheme: "http", host: "[::1]") == nil)
    }

    @Test func proxyURLsAreParsedOrRefusedInOneLine() throws {
        let plain = try ProxyServer(parsing: "proxy.example")
        #expect(plain.kind == .http && plain.host == "proxy.example" && plain.port == 80)
        let withUser = try ProxyServer(parsing: "http://me:p%40ss@[::1]:3128")
        #expect(withUser.host == "::1" && withUser.port == 3128 && withUser.user == "me" && withUser.password == "p@ss")
        #expect(try ProxyServer(parsing: "socks5://127.0.0.1").port == 1080)

        var options = ProxySettings(all: "http://p:8080")
        options.user = "u"
        options.password = "pw"
        let server = try #require(try options.server(scheme: "http", host: "h"))
        #expect(server.user == "u" && server.password == "pw")

        let refusals: [(String, String)] = [
            ("https://me:secret@p:443", "TLS to the proxy itself (https:// proxy URLs) is not supported (https://p:443); use http://"),
            ("socks5://me:secret@p", "SOCKS5 proxies with a user name are not supported (socks5://p); use one without, or an HTTP proxy"),
            ("ftp://p", "unsupported proxy type ftp://: use http:// or socks5:// (ftp://p)"),
            ("http://", "not a proxy URL: http://"),
        ]
        for (text, message) in refusals {
            #expect(throws: DownloadError.invalidRequest(message)) { try ProxyServer(parsing: text) }
        }
    }

    @Test func urlsAreShownWithoutTheirCredentials() {
        let cases = [
            ("https://user:pass@host/a@b", "https://host/a@b"),
            ("http://user@host:8080/x?y=@z", "http://host:8080/x?y=@z"),
            ("http://a:b@c@host/", "http://host/"),
            ("http://host/no/credentials", "http://host/no/credentials"),
            ("not a url", "not a url"),
        ]
        for (url, shown) in cases { #expect(URLRedaction.redact(url) == shown) }
        #expect(URLRedaction.credentials("http://us%20er:p%3Ass@h/")! == ("us er", "p:ss"))
        #expect(URLRedaction.credentials("http://h/a@b") == nil)
        var request = DownloadRequest(url: "http://u:secret@h/f", directory: "/tmp")
        #expect(request.displayURL == "http://h/f")
        request.url = "http://h/f"
        #expect(request.displayURL == request.url)
    }

    @Test func netrcReadsEntriesDefaultsQuotesAndSkipsMacros() {
        let netrc = Netrc(
            parsing: """
                machine a.example login alice password "two words \\"quoted\\""
                macdef upload
                put file
                machine not.a.machine login mallory password x

                machine B.example
                  login bob
                  account ignored
                  password b0b
                default login anonymous password guest
                machine a.example login second password ignored
                """)
        #expect(netrc.credentials(for: "a.example")! == ("alice", "two words \"quoted\""))
        #expect(netrc.credentials(for: "b.EXAMPLE")! == ("bob", "b0b"))
        #expect(netrc.credentials(for: "not.a.machine")! == ("anonymous", "guest"))
        #expect(Netrc(parsing: "machine a login b password c").credentials(for: "other") == nil)
    }

    @Test func cookieFilesReadAsCurlWgetAndAria2WriteThem() {
        let cookies = CookieStore.parse(
            """
            # Netscape HTTP Cookie File
            .example.com\tTRUE\t/\tFALSE\t0\tall\t1
            #HttpOnly_www.example.com\tFALSE\t/app\tTRUE\t4102444800\tsecret\ta\tb
            www.example.com\tFALSE\t/\tFALSE\t1\texpired\tx
            broken line
            """)
        #expect(cookies.count == 3)
        let store = CookieStore()
        store.receive([], from: HTTPURL("http://example.com")!)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("cookies-\(UUID().uuidString)").path
        defer { unlink(file) }
        FileManager.default.createFile(
            atPath: file,
            contents: Data(
                """
                .example.com\tTRUE\t/\tFALSE\t0\tall\t1
                #HttpOnly_www.example.com\tFALSE\t/app\tTRUE\t4102444800\tsecret\ta\tb
                www.example.com\tFALSE\t/\tFALSE\t1\texpired\tx
                """.utf8))
        #expect(throws: Never.self) { try store.load(file) }
        func header(_ url: String) -> String? { store.header(for: HTTPURL(url)!) }
        #expect(header("https://www.example.com/app/x") == "secret=a\tb; all=1")
        #expect(header("http://www.example.com/app/x") == "all=1", "secure cookies need https")
        #expect(header("https://www.example.com/application") == "all=1", "a path matches on a / boundary")
        #expect(header("https://sub.example.com/") == "all=1")
        #expect(header("https://example.org/") == nil)

        // A server's cookie for another domain is ignored; one for a parent domain is kept.
        store.receive(["evil=1; Domain=other.example", "parent=1; Domain=example.com; Path=/"], from: HTTPURL("https://www.example.com/")!)
        #expect(header("https://other.example/") == nil)
        #expect(header("https://x.example.com/")?.contains("parent=1") == true)
    }

    @Test func aRefusedConnectionIsOneTryInOneLine() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        let port = try closedPort()
        let error = try #require(
            try await harness.download(
                harness.request("http://127.0.0.1:\(port)/f.bin", file: "f.bin") {
                    $0.maxTries = 3
                    $0.retryWait = .seconds(2)
                }
            ).failure)
        #expect(error.kind == .network)
        #expect(error.message == "cannot connect to 127.0.0.1: Connection refused")
        // Three tries, two waits between them, each as asked: no hidden retrying inside a try.
        #expect(harness.clock.retryWaits.count == 2)
        #expect(!harness.directory.exists("f.bin") && !harness.directory.exists("f.bin.part"))
    }

    @Test func aNameThatDoesNotResolveAndAProxyThatRefusesSaySo() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        server.serve("/f.bin", Route(content: testBytes(1000)))
        let port = try closedPort()

        let unknown = try #require(
            try await harness.download(
                harness.request("http://no-such-host.invalid/f.bin", file: "a.bin") {
                    $0.maxTries = 1
                }
            ).failure)
        #expect(unknown.message == "cannot resolve the name no-such-host.invalid")

        let refused = try #require(
            try await harness.download(
                harness.request(server.url("/f.bin"), file: "b.bin") {
                    $0.maxTries = 1
                    $0.network.proxy = ProxySettings(all: "http://user:secret@127.0.0.1:\(port)")
                }
            ).failure)
        #expect(refused.message == "cannot connect to the proxy 127.0.0.1:\(port): Connection refused")
        #expect(!refused.description.contains("secret"))

        // The same proxy, bypassed for this host: the download goes direct.
        _ = try await harness.download(
            harness.request(server.url("/f.bin"), file: "c.bin") {
                $0.network.proxy = ProxySettings(all: "http://127.0.0.1:\(port)", noProxy: ["127.0.0.1"])
            }
        ).get()
        #expect(harness.directory.contents("c.bin") == testBytes(1000))
        try await server.shutdown()
    }

    @Test func anIPv6LiteralURLWorksWholeAndSegmented() async throws {
        let server = try await FaultServer.start(host: "::1")
        let harness = try Harness()
        defer { harness.remove() }
        let content = testBytes(2 << 20, seed: 6)
        server.serve("/f.bin", Route(content: content))
        #expect(server.url("/f.bin").hasPrefix("http://[::1]:"))

        _ = try await harness.download(harness.request(server.url("/f.bin"), file: "a.bin")).get()
        _ = try await harness.download(
            harness.request(server.url("/f.bin"), file: "b.bin") {
                $0.connections = 4
                $0.minimumSplitSize = 256 << 10
            }
        ).get()
        try await server.shutdown()
        #expect(digest(harness.directory.contents("a.bin")) == digest(content))
        #expect(digest(harness.directory.contents("b.bin")) == digest(content))
        #expect(server.stats("/f.bin").getCount >= 4)
    }

    @Test func badOptionsAreRefusedBeforeAnyConnection() {
        var request = DownloadRequest(url: "https://h/f", directory: "/tmp")
        let cases: [((inout DownloadRequest) -> Void, String)] = [
            ({ $0.network.proxy.all = "ftp://p" }, "unsupported proxy type ftp://: use http:// or socks5:// (ftp://p)"),
            ({ $0.network.tls.caCertificate = "/no/such/ca.pem" }, "cannot read the CA certificate file /no/such/ca.pem"),
            ({ $0.network.tls.certificate = "/etc/hostname" }, "a client certificate needs both --certificate and --private-key"),
            ({ $0.network.password = "x" }, "a password needs a user name (--http-user)"),
            ({ $0.network.userAgent = "a\r\nX-Injected: 1" }, "the user agent contains control characters"),
            ({ $0.network.cookieFile = "/no/such/cookies" }, "cannot read the cookie file /no/such/cookies"),
            ({ $0.network.maxRedirects = 1000 }, "max redirects must be between 0 and 100, not 1000"),
        ]
        for (change, message) in cases {
            var changed = request
            change(&changed)
            #expect(throws: DownloadError.invalidRequest(message)) { try changed.validate() }
        }
        request.network.tls.verify = false
        #expect(throws: Never.self) { try request.validate() }
    }

    /// The requests of one list share their options, and the files those name are looked up
    /// once for the list: a request sharing checked options is not checked again, one with
    /// options of its own is, and options that failed are checked again each time.
    @Test func sharedOptionsAreCheckedOnce() throws {
        let temp = try TestDirectory()
        defer { temp.remove() }
        try temp.write("ca.pem", Array("-----BEGIN CERTIFICATE-----\n".utf8))
        var first = DownloadRequest(url: "https://h/a", directory: temp.path)
        first.network.tls.caCertificate = temp.file("ca.pem")
        var second = first
        second.url = "https://h/b"
        var own = DownloadRequest(url: "https://h/c", directory: temp.path)
        own.network.tls.caCertificate = temp.file("ca.pem")
        #expect(second.sharesOptions(with: first) && !own.sharesOptions(with: first))

        try first.validate()
        try FileManager.default.removeItem(atPath: temp.file("ca.pem"))
        #expect(throws: Never.self) { try second.validate() }
        let missing = DownloadError.invalidRequest("cannot read the CA certificate file \(temp.file("ca.pem"))")
        #expect(throws: missing) { try own.validate() }
        #expect(throws: missing) { try own.validate() }
        // What differs between the requests of a list is still checked each time.
        second.url = "ftp://h/b"
        #expect(throws: DownloadError.self) { try second.validate() }
    }
}

/// A loopback port nothing listens on (bound, then closed).
func closedPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw POSIXError(.EMFILE) }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
        }
    }
    guard bound else { throw POSIXError(.EADDRINUSE) }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Requests made from one template keep one copy of their options.
@Suite struct RequestOptionsSharingTests {
    @Test func copiesShareOptionsUntilOneChanges() {
        var template = DownloadRequest(url: "", directory: "/tmp")
        template.connections = 4
        template.headers = [.init(name: "X-A", value: "1")]
        var a = template
        a.url = "http://h/a"
        var b = template
        b.url = "http://h/b"
        b.destination = .file("/tmp/b")
        #expect(a.sharesOptions(with: b))
        b.connections = 4
        #expect(a.sharesOptions(with: b))
        b.connections = 2
        #expect(!a.sharesOptions(with: b))
        #expect(a.connections == 4 && b.connections == 2 && a.headers == b.headers)
        // Back to the defaults: every such request shares the one set of defaults.
        var plain = DownloadRequest(url: "http://h/c", directory: "/tmp")
        plain.maxTries = 3
        plain.maxTries = 5
        #expect(plain.sharesOptions(with: DownloadRequest(url: "http://h/d", file: "/tmp/d")))
    }

    /// The options column of a row keeps only what differs from the defaults, and reads back
    /// to the very request, defaults and all.
    @Test func aStoredRequestKeepsWhatDiffersFromTheDefaults() throws {
        var request = DownloadRequest(url: "https://h/f", directory: "/tmp/out")
        request.connections = 4
        request.network.tls.caCertificate = "/etc/ca.pem"
        let stored = try DownloadRow.storedOptions(of: request)
        let keys = try #require(try JSONSerialization.jsonObject(with: Data(stored.utf8)) as? [String: Any])
        #expect(Set(keys.keys) == ["url", "destination", "connections", "network"])
        #expect(stored.contains(#""network":{"tls":{"caCertificate":"\/etc\/ca.pem"}}"#))
        let read = try DownloadRow.request(options: stored, url: request.url, destinationKind: 1, destination: "/tmp/out")
        #expect(read == request)

        // Every option away from its default is written, and read back as it was.
        var every = request
        every.headers = [.init(name: "X-A", value: "1")]
        every.followMetalink = true
        every.maxTries = 2
        every.retryWait = .milliseconds(250)
        every.overwrite = true
        every.minimumSplitSize = 4 << 20
        every.rateLimit = 1000
        every.confinement = "/tmp"
        every.network.proxy = ProxySettings(all: "http://p:3128", noProxy: ["localhost"])
        every.network.proxy.user = "pu"
        every.network.proxy.password = "pp"
        every.network.tls.verify = false
        every.network.tls.certificate = "/c.pem"
        every.network.tls.privateKey = "/k.pem"
        every.network.user = "u"
        every.network.password = "p"
        every.network.useNetrc = true
        every.network.netrcPath = "/n"
        every.network.cookieFile = "/cookies"
        every.network.userAgent = "ua"
        every.network.referer = "*"
        every.network.connectTimeout = .seconds(3)
        every.network.maxRedirects = 2
        every.network.http2 = true
        let everyStored = try DownloadRow.storedOptions(of: every)
        let everyRead = try DownloadRow.request(options: everyStored, url: every.url, destinationKind: 1, destination: "/tmp/out")
        #expect(everyRead == every)
        #expect(everyRead.network == every.network && everyRead.maxTries == 2 && everyRead.retryWait == .milliseconds(250))
    }

    /// A row written with every option spelled out (as versions before this one wrote them)
    /// reads as it did.
    @Test func aRequestStoredWithEveryOptionReadsAsBefore() throws {
        let old =
            #"{"confinement":"\/tmp\/out","connections":4,"destination":{"file":{"_0":""}},"maxTries":5,"#
            + #""minimumSplitSize":1048576,"network":{"connectTimeout":[0,15000000000000000000],"http2":false,"maxRedirects":10,"#
            + #""proxy":{"noProxy":[]},"tls":{"caCertificate":"\/etc\/ca.pem","verify":true},"useNetrc":false},"overwrite":false,"#
            + #""retryWait":[0,1000000000000000000],"url":""}"#
        let read = try DownloadRow.request(options: old, url: "https://h/f", destinationKind: 1, destination: "/tmp/out")
        var expected = DownloadRequest(url: "https://h/f", directory: "/tmp/out")
        expected.connections = 4
        expected.confinement = "/tmp/out"
        expected.network.tls.caCertificate = "/etc/ca.pem"
        #expect(read == expected)
        #expect(try DownloadRow.storedOptions(of: read).utf8.count < old.utf8.count / 2)
    }
}
