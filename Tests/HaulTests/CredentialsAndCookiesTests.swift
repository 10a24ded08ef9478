import Foundation
import HaulTestSupport
import Testing
@testable import Haul

/// Who a download says it is, end to end against the fault server: credentials from the URL,
/// the options and `.netrc`, cookies from a file and from the server, identity headers, and
/// what a redirect to another origin may not carry.
@Suite struct CredentialsAndCookiesTests {
    static let content = testBytes(200_000)
    /// `Basic` for `user:pa:ss word`.
    static let basic = "Basic " + Data("user:pa:ss word".utf8).base64EncodedString()

    func loginRoute() -> Route {
        var route = Route(content: Self.content)
        route.requiredHeaders = [("Authorization", Self.basic)]
        return route
    }

    @Test func credentialsInTheURLAreSentToItsOriginAndNeverShown() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        server.serve("/f.bin", loginRoute())
        let withCredentials = server.url("/f.bin").replacingOccurrences(of: "http://", with: "http://user:pa%3Ass%20word@")

        let result = try await harness.download(harness.request(withCredentials, file: "f.bin")).get()
        #expect(result.bytes == Self.content.count)
        #expect(harness.directory.contents("f.bin") == Self.content)
        #expect(server.stats("/f.bin").requests.allSatisfy { $0.header("Authorization") == Self.basic })

        // A wrong password: the error names the URL without its credentials.
        let wrong = server.url("/f.bin").replacingOccurrences(of: "http://", with: "http://user:secret-word@")
        let error = try #require(try await harness.download(harness.request(wrong, file: "g.bin")).failure)
        #expect(error.status == 401)
        #expect(!error.description.contains("secret-word") && !error.description.contains("user@"))
        #expect(error.description.contains(server.url("/f.bin")))
        try await server.shutdown()
    }

    @Test func theUserOptionAndNetrcGiveCredentialsInThatOrder() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        server.serve("/f.bin", loginRoute())
        let netrc = harness.directory.file("netrc")
        try Data("machine example.org login other password x\n\nmacdef init\ncd /\n\nmachine 127.0.0.1\n  login user\n  password \"pa:ss word\"\n".utf8)
            .write(to: URL(fileURLWithPath: netrc))

        _ = try await harness.download(
            harness.request(server.url("/f.bin"), file: "a.bin") {
                $0.network.user = "user"
                $0.network.password = "pa:ss word"
            }
        ).get()
        _ = try await harness.download(
            harness.request(server.url("/f.bin"), file: "b.bin") {
                $0.network.useNetrc = true
                $0.network.netrcPath = netrc
            }
        ).get()
        // The option wins over .netrc; without either, the server's 401 is the answer.
        let wrong = try await harness.download(
            harness.request(server.url("/f.bin"), file: "c.bin") {
                $0.network.useNetrc = true
                $0.network.netrcPath = netrc
                $0.network.user = "user"
                $0.network.password = "wrong"
            }
        ).failure
        #expect(wrong?.status == 401)
        #expect(try await harness.download(harness.request(server.url("/f.bin"), file: "d.bin")).failure?.status == 401)
        #expect(harness.directory.contents("a.bin") == Self.content && harness.directory.contents("b.bin") == Self.content)
        try await server.shutdown()
    }

    @Test func aRedirectToAnotherOriginCarriesNoCredentialsOrCookies() async throws {
        let home = try await FaultServer.start()
        let elsewhere = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        var hop = Route(content: [])
        hop.redirectTo = elsewhere.url("/f.bin")
        home.serve("/f.bin", hop)
        var local = Route(content: [])
        local.redirectTo = "/hop.bin"
        home.serve("/start.bin", local)
        home.serve("/hop.bin", hop)
        elsewhere.serve("/f.bin", Route(content: Self.content))
        let cookies = harness.directory.file("cookies.txt")
        try Data("127.0.0.1\tFALSE\t/\tFALSE\t0\tfromfile\tv1\n".utf8).write(to: URL(fileURLWithPath: cookies))

        let url = home.url("/start.bin").replacingOccurrences(of: "http://", with: "http://user:pa%3Ass%20word@")
        _ = try await harness.download(
            harness.request(url, file: "f.bin") {
                $0.headers = [.init(name: "Cookie", value: "given=1"), .init(name: "X-Kept", value: "yes")]
                $0.network.cookieFile = cookies
            }
        ).get()
        #expect(harness.directory.contents("f.bin") == Self.content)

        // The URL's own origin got them, through a redirect on the same origin too.
        for path in ["/start.bin", "/hop.bin"] {
            let first = try #require(home.stats(path).requests.first)
            #expect(first.header("Authorization") == Self.basic)
            #expect(first.header("Cookie")?.contains("given=1") == true)
        }
        // The other origin (another port) got neither, but the cookie that matches its host
        // (cookies are not port-specific) and the other headers.
        let other = try #require(elsewhere.stats("/f.bin").requests.first)
        #expect(other.header("Authorization") == nil)
        #expect(other.header("Cookie") == "fromfile=v1")
        #expect(other.header("X-Kept") == "yes")
        try await home.shutdown()
        try await elsewhere.shutdown()
    }

    @Test func cookiesFromAFileAndFromTheServerAreSentByEverySegmentAndSaved() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        let big = testBytes(4 << 20, seed: 7)
        // /login sets a cookie and redirects; the file needs it and the file's cookie.
        var login = Route(content: [])
        login.redirectTo = "/data/f.bin"
        login.responseHeaders = [("Set-Cookie", "token=xyz; Path=/data"), ("Set-Cookie", "gone=1; Max-Age=0")]
        server.serve("/login", login)
        var data = Route(content: big)
        data.requiredHeaders = [("Cookie", "token=xyz"), ("Cookie", "session=abc")]
        server.serve("/data/f.bin", data)
        let cookies = harness.directory.file("cookies.txt")
        try Data("# Netscape HTTP Cookie File\n#HttpOnly_127.0.0.1\tFALSE\t/\tFALSE\t0\tsession\tabc\n127.0.0.1\tFALSE\t/other\tFALSE\t0\telsewhere\tno\n".utf8)
            .write(to: URL(fileURLWithPath: cookies))

        let downloader = try harness.downloader(saveCookies: harness.directory.file("saved.txt"))
        let request = harness.request(server.url("/login"), file: "f.bin") {
            $0.network.cookieFile = cookies
            $0.connections = 4
            $0.minimumSplitSize = 256 << 10
        }
        _ = try await downloader.download(request).result()
        try await downloader.shutdown()

        #expect(digest(harness.directory.contents("f.bin")) == digest(big))
        let gets = server.stats("/data/f.bin").requests.filter { $0.method == "GET" }
        #expect(gets.count >= 2, "a segmented download")
        #expect(gets.allSatisfy { $0.header("Cookie") == "token=xyz; session=abc" })
        #expect(server.stats("/login").requests.first?.header("Cookie") == "session=abc")

        let saved = try String(contentsOfFile: harness.directory.file("saved.txt"), encoding: .utf8)
        #expect(saved.contains("#HttpOnly_127.0.0.1\tFALSE\t/\tFALSE\t0\tsession\tabc"))
        #expect(saved.contains("127.0.0.1\tFALSE\t/data\tFALSE\t0\ttoken\txyz"))
        #expect(!saved.contains("gone"))
        let mode = try FileManager.default.attributesOfItem(atPath: harness.directory.file("saved.txt"))[.posixPermissions] as? Int
        #expect(mode == 0o600)
        // curl reads what Haul wrote.
        #expect(CookieStore.parse(saved).count == 3)
        try await server.shutdown()
    }

    @Test func userAgentAndRefererAreSentAsAsked() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        server.serve("/a.bin", Route(content: Self.content))
        server.serve("/b.bin", Route(content: Self.content))

        _ = try await harness.download(harness.request(server.url("/a.bin"), file: "a.bin")).get()
        _ = try await harness.download(
            harness.request(server.url("/b.bin"), file: "b.bin") {
                $0.network.userAgent = "Mozilla/5.0 (test)"
                $0.network.referer = "*"
            }
        ).get()
        let plain = try #require(server.stats("/a.bin").requests.first)
        #expect(plain.header("User-Agent") == "haul/\(HaulVersion.string)" && plain.header("Referer") == nil)
        #expect(
            server.stats("/b.bin").requests.allSatisfy {
                $0.header("User-Agent") == "Mozilla/5.0 (test)" && $0.header("Referer") == server.url("/b.bin")
            })
        try await server.shutdown()
    }

    @Test func redirectsStopAtTheLimitAndAtALoop() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        for index in 0..<3 {
            var route = Route(content: [])
            route.redirectTo = "/r\(index + 1)"
            server.serve("/r\(index)", route)
        }
        server.serve("/r3", Route(content: Self.content))
        var loop = Route(content: [])
        loop.redirectTo = "/loop"
        server.serve("/loop", loop)

        let limited = try #require(
            try await harness.download(
                harness.request(server.url("/r0"), file: "a.bin") {
                    $0.network.maxRedirects = 2
                }
            ).failure)
        #expect(limited.message == "too many redirects (more than 2)")
        _ = try await harness.download(harness.request(server.url("/r0"), file: "b.bin") { $0.network.maxRedirects = 3 }).get()
        let looping = try #require(try await harness.download(harness.request(server.url("/loop"), file: "c.bin")).failure)
        #expect(looping.message == "redirect loop")
        #expect(server.stats("/loop").requests.count <= 2 * 5, "one hop per try")
        try await server.shutdown()
    }
}

extension Result {
    /// The error, or nil for a success.
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
