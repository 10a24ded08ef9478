import Foundation
import HaulTestSupport
import Testing

/// nginx's `/auth/`, `/cookie/`, `/setcookie/`, `/mtls/` and `/redirect-to/`, seen through curl.
@Suite(
    .enabled(
        if: runsWith(NginxServer.executablePath) && runsWith(TestCertificates.opensslPath),
        "nginx, openssl or curl is not installed"))
struct NginxLocationTests {
    let content = testContent(1000)
    let alice = TestCredentials(user: "alice", password: "s3cret: with spaces & ü")

    @Test func basicAuth() async throws {
        try await withFolder { folder in
            try await NginxServer.withServer(root: folder, options: .init(basicAuth: alice)) { nginx in
                let none = try curl([nginx.url("/auth/data.bin")], writeOut: "%{http_code} %header{www-authenticate}")
                #expect(none.writeOut == #"401 Basic realm="haul-test""#, "\(none)")
                let wrong = try curl(["-u", "alice:nope", nginx.url("/auth/data.bin")])
                #expect(wrong.status == 401, "\(wrong)")
                let right = try curl(["-u", "\(alice.user):\(alice.password)", nginx.url("/auth/data.bin")])
                #expect(right.status == 200, "\(right)")
                #expect(Array(right.body) == content)
                // The rest of the folder needs no credentials.
                #expect(try curl([nginx.url("/data.bin")]).status == 200)

                let entries = await nginx.accessLog(waitingFor: 4)
                #expect(entries.map(\.status) == [401, 401, 200, 200])
                #expect(entries.map(\.authorization) == ["", "Basic YWxpY2U6bm9wZQ==", alice.basicAuthorization, ""])
            }
        }
    }

    @Test func cookie() async throws {
        let session = NginxServer.Cookie(name: "session_id", value: "abc.123-XYZ")
        try await withFolder { folder in
            try await NginxServer.withServer(root: folder, options: .init(cookie: session)) { nginx in
                #expect(try curl([nginx.url("/cookie/data.bin")]).status == 403)
                #expect(try curl(["-b", "session_id=other", nginx.url("/cookie/data.bin")]).status == 403)
                let right = try curl(["-b", "theme=dark; \(session.header)", nginx.url("/cookie/data.bin")])
                #expect(right.status == 200, "\(right)")
                #expect(Array(right.body) == content)

                // /setcookie/ sets it and redirects; a client with a cookie jar keeps it across
                // the redirect, one without does not.
                let jar = FileManager.default.temporaryDirectory.appendingPathComponent("jar-\(UUID().uuidString)").path
                defer { try? FileManager.default.removeItem(atPath: jar) }
                let kept = try curl(
                    ["-L", "-c", jar, "-b", jar, nginx.url("/setcookie/data.bin")],
                    writeOut: "%{http_code} %{num_redirects}")
                #expect(kept.writeOut == "200 1", "\(kept)")
                #expect(Array(kept.body) == content)
                let lost = try curl(["-L", nginx.url("/setcookie/data.bin")], writeOut: "%{http_code} %{num_redirects}")
                #expect(lost.writeOut == "403 1", "\(lost)")

                let entries = await nginx.accessLog(waitingFor: 7)
                #expect(entries.map(\.status) == [403, 403, 200, 302, 200, 302, 403])
                let redirect = entries[3]
                #expect(redirect.setCookie == "session_id=abc.123-XYZ; Path=/")
                #expect(redirect.location == nginx.url("/cookie/data.bin"))
                #expect(entries[4].cookie == session.header)
                #expect(entries[6].cookie == "")
            }
        }
    }

    @Test func clientCertificate() async throws {
        let certs = try TestCertificates.shared()
        try await withFolder { folder in
            try await NginxServer.withServer(root: folder, options: .init(tls: .testServer(certs))) { nginx in
                let trust = ["--cacert", certs.ca.certificate]
                let without = try curl(trust + [nginx.url("/mtls/data.bin")])
                #expect(without.status == 403, "\(without)")
                let with = try curl(trust + ["--cert", certs.client.certificate, "--key", certs.client.key, nginx.url("/mtls/data.bin")])
                #expect(with.status == 200, "\(with)")
                #expect(Array(with.body) == content)
                // A client without a certificate is still served elsewhere.
                #expect(try curl(trust + [nginx.url("/data.bin")]).status == 200)

                let entries = await nginx.accessLog(waitingFor: 3)
                #expect(entries.map(\.sslClientVerify) == ["NONE", "SUCCESS", "NONE"])
            }
            // Without a client CA there is no /mtls/ and no certificate request.
            try await NginxServer.withServer(root: folder, options: .init(tls: .init(certs.server))) { nginx in
                let result = try curl([
                    "--cacert", certs.ca.certificate, "--cert", certs.client.certificate,
                    "--key", certs.client.key, nginx.url("/mtls/data.bin"),
                ])
                #expect(result.status == 404, "\(result)")
            }
        }
    }

    @Test func crossOriginRedirectShowsWhatReachesTheOtherServer() async throws {
        let session = NginxServer.Cookie(name: "session", value: "abc")
        try await withFolder { folder in
            try await NginxServer.withServer(root: folder, options: .init()) { other in
                // Another host name, not just another port: cookies do not tell ports apart.
                let target = other.url("/", host: "localhost")
                let options = NginxServer.Options(basicAuth: alice, cookie: session, redirectTarget: target)
                try await NginxServer.withServer(root: folder, options: options) { nginx in
                    let jar = FileManager.default.temporaryDirectory.appendingPathComponent("jar-\(UUID().uuidString)").path
                    defer { try? FileManager.default.removeItem(atPath: jar) }
                    // A cookie for 127.0.0.1, as a session would leave it (Netscape jar format).
                    try "127.0.0.1\tFALSE\t/\tFALSE\t0\tsession\tabc\n".write(toFile: jar, atomically: true, encoding: .utf8)
                    let user = "\(alice.user):\(alice.password)"

                    let plain = try curl(["-L", "-b", jar, nginx.url("/redirect-to/data.bin")], writeOut: "%{http_code} %{url_effective}")
                    #expect(plain.writeOut == "200 \(other.url("/data.bin", host: "localhost"))", "\(plain)")
                    #expect(Array(plain.body) == content)

                    #expect(try curl(["-L", nginx.url("/auth/redirect-to/data.bin")]).status == 401)
                    let authed = try curl(["-L", "-u", user, "-b", jar, nginx.url("/auth/redirect-to/data.bin")])
                    #expect(authed.status == 200, "\(authed)")
                    // --location-trusted sends the credentials on: the other server's log shows it.
                    let leaked = try curl(["-L", "--location-trusted", "-u", user, nginx.url("/auth/redirect-to/data.bin")])
                    #expect(leaked.status == 200, "\(leaked)")

                    let here = await nginx.accessLog(waitingFor: 4)
                    #expect(here.map(\.status) == [302, 401, 302, 302])
                    #expect(
                        here.map(\.location) == [
                            other.url("/data.bin", host: "localhost"), "",
                            other.url("/data.bin", host: "localhost"), other.url("/data.bin", host: "localhost"),
                        ])
                    #expect(here[0].cookie == session.header && here[2].cookie == session.header)
                    #expect(here[2].authorization == alice.basicAuthorization)

                    let there = await other.accessLog(waitingFor: 3)
                    #expect(there.map(\.host) == Array(repeating: "localhost:\(other.port)", count: 3))
                    #expect(there.map(\.cookie) == ["", "", ""])
                    #expect(there.map(\.authorization) == ["", "", alice.basicAuthorization])
                }
            }
        }
    }

    @Test func optionsNginxCannotTakeAreRefused() async throws {
        let bad: [NginxServer.Options] = [
            .init(cookie: .init(name: "my-cookie", value: "x")),
            .init(cookie: .init(name: "c", value: "a b")),
            .init(cookie: .init(name: "c", value: "$x")),
            .init(redirectTarget: "/relative/"),
            .init(redirectTarget: #"http://x/"; evil"#),
            .init(basicAuth: TestCredentials(user: "a:b", password: "x")),
        ]
        for options in bad {
            await #expect(throws: NginxServerError.invalidOptions) {
                try await NginxServer.start(root: "/tmp", options: options)
            }
        }
    }

    /// A temp folder holding `data.bin` (the test content), removed afterwards.
    private func withFolder(_ body: (String) async throws -> Void) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("nginx-loc-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try Data(content).write(to: folder.appendingPathComponent("data.bin"))
        try await body(folder.path)
    }
}
