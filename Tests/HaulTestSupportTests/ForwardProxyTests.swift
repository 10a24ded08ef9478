import Foundation
@testable import HaulTestSupport
import Testing

/// tinyproxy through curl: forwarded GETs, CONNECT tunnels to any port, credentials, refusal.
@Suite(.enabled(if: runsWith(ForwardProxy.executablePath), "tinyproxy or curl is not installed"))
struct ForwardProxyTests {
    let content = testContent(1000)

    @Test func forwardsGetAndTunnelsConnectToAnyPort() async throws {
        try await FaultServer.withServer { origin in
            origin.serve("/f.bin", Route(content: content))
            try await ForwardProxy.withProxy { proxy in
                let get = try curl(["-x", proxy.url, origin.url("/f.bin")])
                #expect(get.status == 200, "\(get)")
                #expect(Array(get.body) == content)
                // The origin sees the proxy's Via header on a forwarded request.
                let via = origin.stats("/f.bin").requests.first?.header("Via")
                #expect(via?.contains(ForwardProxy.viaName) == true, "Via: \(via ?? "none")")

                // -p: CONNECT to the origin's port (not 443), then plain HTTP through the tunnel.
                let tunnel = try curl(["-p", "-x", proxy.url, origin.url("/f.bin")])
                #expect(tunnel.status == 200, "\(tunnel)")
                #expect(Array(tunnel.body) == content)

                let requests = proxy.requests()
                #expect(
                    requests.map(\.description) == [
                        "GET \(origin.url("/f.bin")) HTTP/1.1",
                        "CONNECT 127.0.0.1:\(origin.port) HTTP/1.1",
                    ], "\(proxy.log())")
            }
        }
    }

    @Test func credentials() async throws {
        let alice = TestCredentials(user: "alice", password: "s3cret.Pa-ss_9")
        try await FaultServer.withServer { origin in
            origin.serve("/f.bin", Route(content: content))
            try await ForwardProxy.withProxy(credentials: alice) { proxy in
                #expect(proxy.urlWithCredentials == "http://alice:s3cret.Pa-ss_9@127.0.0.1:\(proxy.port)")

                let missing = try curl(["-x", proxy.url, origin.url("/f.bin")])
                #expect(missing.status == 407, "\(missing)")
                let missingTunnel = try curl(["-p", "-x", proxy.url, origin.url("/f.bin")])
                #expect(missingTunnel.exitCode == 56, "\(missingTunnel)")  // CONNECT answered 407
                #expect(missingTunnel.error.contains("407"), "\(missingTunnel)")

                // tinyproxy answers wrong credentials with 401, not 407.
                let wrong = try curl(["-x", proxy.url, "-U", "alice:nope", origin.url("/f.bin")])
                #expect(wrong.status == 401, "\(wrong)")
                #expect(origin.stats("/f.bin").requests.isEmpty)

                let get = try curl(["-x", proxy.urlWithCredentials, origin.url("/f.bin")])
                #expect(get.status == 200, "\(get)")
                let tunnel = try curl(["-p", "-x", proxy.url, "-U", "alice:s3cret.Pa-ss_9", origin.url("/f.bin")])
                #expect(tunnel.status == 200, "\(tunnel)")
                #expect(Array(tunnel.body) == content)
                #expect(origin.stats("/f.bin").getCount == 2)
                // The proxy's credentials are not passed on to the origin.
                #expect(origin.stats("/f.bin").requests.allSatisfy { $0.header("Proxy-Authorization") == nil })

                // Refused requests are logged too: the log says what was asked, the status how it went.
                #expect(proxy.requests().map(\.method) == ["GET", "CONNECT", "GET", "GET", "CONNECT"])
            }
        }
    }

    @Test func refuseAll() async throws {
        try await FaultServer.withServer { origin in
            origin.serve("/f.bin", Route(content: content))
            try await ForwardProxy.withProxy(refuseAll: true) { proxy in
                let get = try curl(["-x", proxy.url, origin.url("/f.bin")])
                #expect(get.status == 403, "\(get)")
                let tunnel = try curl(["-p", "-x", proxy.url, origin.url("/f.bin")])
                #expect(tunnel.exitCode == 56 && tunnel.error.contains("403"), "\(tunnel)")
                #expect(origin.stats("/f.bin").requests.isEmpty)
                #expect(proxy.requests().isEmpty)
            }
        }
    }

    @Test func unreachableTargetIs500() async throws {
        try await ForwardProxy.withProxy { proxy in
            let closed = try await closedPort()
            let get = try curl(["-x", proxy.url, "http://127.0.0.1:\(closed)/f"])
            #expect(get.status == 500, "\(get)")
            #expect(proxy.requests().map(\.target) == ["http://127.0.0.1:\(closed)/f"])
        }
    }

    @Test func credentialsTinyproxyCannotTakeAreRefused() async throws {
        await #expect(throws: TestServerError.invalidOptions) {
            try await ForwardProxy.start(credentials: TestCredentials(user: "a b", password: "x"))
        }
    }

    @Test func stopFreesThePort() async throws {
        let proxy = try await ForwardProxy.start()
        await proxy.stop()
        await proxy.stop()
        let after = try curl(["-x", proxy.url, "http://127.0.0.1:1/"])
        #expect(after.exitCode == 7, "\(after)")
    }

    @Test func parsesRequestLines() {
        let log = """
            NOTICE    Nov 23 19:08:12.680 [9629]: Initializing tinyproxy ...
            CONNECT   Nov 23 19:08:20.283 [9797]: Request (file descriptor 5): CONNECT 127.0.0.1:18081 HTTP/1.1
            CONNECT   Nov 23 19:08:20.283 [9797]: Request (file descriptor 5): GET
            CONNECT   Nov 23 19:08:20.290 [9797]: Request (file descriptor 7): GET http://h:1/a%20b HTTP/1.0
            """
        #expect(ForwardProxy.parseRequests(log).map(\.description) == ["CONNECT 127.0.0.1:18081 HTTP/1.1", "GET http://h:1/a%20b HTTP/1.0"])
    }
}

/// A port nobody listens on (a moment ago): bind, read, close.
func closedPort() async throws -> Int {
    let server = try await FaultServer.start()
    let port = server.port
    try await server.shutdown()
    return port
}
