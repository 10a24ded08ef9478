import Foundation
import HaulTestSupport
import Testing
@testable import Haul

/// The network flags of the built `haul get`, and the environment it reads.
@Suite struct NetworkCommandLineTests {
    @Test func dashOStreamsToStandardOutput() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        let content = testBytes(3 << 20, seed: 5)
        server.serve("/f.bin", Route(content: content))

        let haul = try HaulProcess(
            ["get", "-o", "-", "--state-dir", dir.file("state"), server.url("/f.bin")],
            in: dir.path, stdoutFile: dir.file("stdout"))
        let (status, stderr) = try await haul.finish()
        try await server.shutdown()

        #expect(status == 0, "\(stderr)")
        #expect(digest(dir.contents("stdout")) == digest(content))
        #expect(!dir.exists("-") && !dir.exists("-.part"))
        #expect(stderr.isEmpty)

        // Without a URL: one line, no crash.
        let none = try await HaulProcess.capture(["get", "-o", "-", "--state-dir", dir.file("state")], in: dir.path)
        #expect(none.status == 64 && none.stderr.hasPrefix("Error: give at least one URL, or --input-file"), "\(none.stderr)")
    }

    @Test func theEnvironmentsProxyIsUsedAndNoProxyBypassesIt() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        server.serve("/f.bin", Route(content: testBytes(1000)))
        let port = try closedPort()
        let proxy = "http://user:secret@127.0.0.1:\(port)"
        func get(_ name: String, _ flags: [String] = [], _ environment: [String: String?]) async throws -> (Int32, String) {
            let result = try await HaulProcess.capture(
                ["get", "-q", "--max-tries", "1", "-o", name, "--state-dir", dir.file("state")] + flags + [server.url("/f.bin")],
                in: dir.path, environment: environment)
            return (result.status, result.stderr)
        }

        // Today's finding: a proxy variable pointing at a closed port was ignored.
        for variable in ["http_proxy", "all_proxy", "ALL_PROXY"] {
            let (status, stderr) = try await get("a.bin", [], [variable: proxy])
            #expect(status == 4, "\(variable)")
            #expect(stderr == "haul: \(server.url("/f.bin")): cannot connect to the proxy 127.0.0.1:\(port): Connection refused\n")
        }
        #expect(!dir.exists("a.bin"))
        // Upper-case HTTP_PROXY is not read (as curl); no_proxy and --no-proxy bypass.
        #expect(try await get("b.bin", [], ["HTTP_PROXY": proxy]).0 == 0)
        #expect(try await get("c.bin", [], ["http_proxy": proxy, "no_proxy": "localhost,127.0.0.1"]).0 == 0)
        #expect(try await get("d.bin", ["--no-proxy", "127.0.0.1"], ["http_proxy": proxy]).0 == 0)
        // A flag wins over the environment.
        let (status, stderr) = try await get("e.bin", ["--all-proxy", "127.0.0.1:\(port)"], [:])
        #expect(status == 4 && stderr.contains("cannot connect to the proxy 127.0.0.1:\(port)"))
        try await server.shutdown()
    }

    @Test func identityHeadersCredentialsAndAZeroRateLimit() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        var route = Route(content: testBytes(300_000))
        route.requiredHeaders = [("Authorization", "Basic " + Data("me:from env".utf8).base64EncodedString()), ("X-From-File", "1")]
        server.serve("/f.bin", route)
        try dir.write("headers.txt", Array("# headers\nX-From-File: 1\n\nAccept: */*\n".utf8))

        let (status, _, stderr) = try await HaulProcess.capture(
            [
                "get", "-q", "--limit-rate", "0", "--max-download-limit", "0", "--header-file", "headers.txt",
                "-U", "agent/1", "--referer", "https://ref.example/", "--http-user", "me",
                "-o", "f.bin", "--state-dir", dir.file("state"), server.url("/f.bin"),
            ],
            in: dir.path, environment: ["HAUL_HTTP_PASSWD": "from env"])
        try await server.shutdown()

        #expect(status == 0, "\(stderr)")
        #expect(dir.contents("f.bin") == route.content)
        #expect(
            server.stats("/f.bin").requests.allSatisfy {
                $0.header("User-Agent") == "agent/1" && $0.header("Referer") == "https://ref.example/" && $0.header("Accept") == "*/*"
            })
    }

    @Test(arguments: [
        (["--all-proxy", "ftp://p"], "unsupported proxy type ftp://: use http:// or socks5:// (ftp://p)"),
        (["--https-proxy", "https://u:hidden@p"], "TLS to the proxy itself (https:// proxy URLs) is not supported (https://p); use http://"),
        (["--ca-certificate", "/no/such/ca.pem"], "cannot read the CA certificate file /no/such/ca.pem"),
        (["--certificate", "/etc/hostname"], "a client certificate needs both --certificate and --private-key"),
        (["--connect-timeout", "0"], "--connect-timeout must be between 0 and 3600 seconds"),
        (["--limit-rate", "fast"], "--limit-rate must be a rate such as 2M (0 for no limit), not fast"),
        (["--header-file", "/no/such/headers"], "cannot read the header file /no/such/headers"),
    ])
    func badNetworkFlagsAreOneLine(flags: [String], message: String) async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let (status, _, stderr) = try await HaulProcess.capture(
            ["get", "--state-dir", dir.file("state")] + flags + ["http://127.0.0.1:1/f.bin"], in: dir.path)
        #expect(status != 0)
        // One line that says what is wrong (ArgumentParser's usage hint follows it).
        #expect(stderr.split(separator: "\n").first == "Error: \(message)"[...], "\(stderr)")
        #expect(!stderr.contains("hidden"))
    }

    @Test func credentialsInAURLAreNeverPrinted() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        var route = Route(content: [])
        route.status = 404
        server.serve("/missing.bin", route)
        let url = server.url("/missing.bin").replacingOccurrences(of: "http://", with: "http://me:hunter2@")

        let (status, stdout, stderr) = try await HaulProcess.capture(["get", "--state-dir", dir.file("state"), url], in: dir.path)
        try await server.shutdown()

        #expect(status == 8)
        #expect(stderr.contains("\(server.url("/missing.bin")): 404 Not Found"), "\(stderr)")
        #expect(!(stdout + stderr).contains("hunter2") && !(stdout + stderr).contains("me:"))
    }
}
