import Foundation
@testable import HaulTestSupport
import Testing

/// microsocks through curl: addresses and names, credentials, the connection log.
@Suite(.enabled(if: runsWith(SocksProxy.executablePath), "microsocks or curl is not installed"))
struct SocksProxyTests {
    let content = testContent(1000)

    @Test func tunnelsAndLogsEachConnection() async throws {
        try await FaultServer.withServer { origin in
            origin.serve("/f.bin", Route(content: content))
            try await SocksProxy.withProxy { socks in
                let byAddress = try curl(["-x", socks.url, origin.url("/f.bin")])
                #expect(byAddress.status == 200, "\(byAddress)")
                #expect(Array(byAddress.body) == content)
                let byName = try curl(["-x", socks.urlResolvingOnProxy, "http://localhost:\(origin.port)/f.bin"])
                #expect(byName.status == 200, "\(byName)")
                #expect(
                    socks.connections().map(\.description) == [
                        "127.0.0.1 -> 127.0.0.1:\(origin.port)",
                        "127.0.0.1 -> localhost:\(origin.port)",
                    ], "\(socks.log())")
            }
        }
    }

    @Test func credentials() async throws {
        // SOCKS5 carries any bytes: spaces, ':' and '@' too (percent-encoded in the URL).
        let bob = TestCredentials(user: "bob", password: "pa ss:w@rd")
        try await FaultServer.withServer { origin in
            origin.serve("/f.bin", Route(content: content))
            try await SocksProxy.withProxy(credentials: bob) { socks in
                #expect(socks.urlWithCredentials == "socks5://bob:pa%20ss%3Aw%40rd@127.0.0.1:\(socks.port)")
                let missing = try curl(["-x", socks.url, origin.url("/f.bin")])
                #expect(missing.exitCode == 97, "\(missing)")  // no acceptable authentication method
                let wrong = try curl(["-x", socks.url, "-U", "bob:nope", origin.url("/f.bin")])
                #expect(wrong.exitCode == 97, "\(wrong)")
                #expect(socks.connections().isEmpty)

                let viaURL = try curl(["-x", socks.urlWithCredentials, origin.url("/f.bin")])
                #expect(viaURL.status == 200, "\(viaURL)")
                let viaFlag = try curl(["-x", socks.url, "-U", "bob:pa ss:w@rd", origin.url("/f.bin")])
                #expect(viaFlag.status == 200, "\(viaFlag)")
                #expect(Array(viaFlag.body) == content)
                #expect(socks.connections().count == 2)
                #expect(origin.stats("/f.bin").getCount == 2)
            }
        }
    }

    @Test func unreachableTargetFails() async throws {
        try await SocksProxy.withProxy { socks in
            let closed = try await closedPort()
            let result = try curl(["-x", socks.url, "http://127.0.0.1:\(closed)/f"])
            #expect(result.exitCode == 97, "\(result)")
            #expect(socks.connections().isEmpty)
        }
    }

    @Test func stopFreesThePort() async throws {
        let socks = try await SocksProxy.start()
        await socks.stop()
        await socks.stop()
        let after = try curl(["-x", socks.url, "http://127.0.0.1:1/"])
        #expect(after.exitCode == 7 || after.exitCode == 97, "\(after)")
    }

    @Test func parsesConnectionLines() {
        let log = """
            client[4] 127.0.0.1: connected to 127.0.0.1:18081
            server_setup: Address already in use
            client[5] 127.0.0.1: connected to localhost:443
            client]x: connected to
            """
        #expect(
            SocksProxy.parseConnections(log).map(\.description) == [
                "127.0.0.1 -> 127.0.0.1:18081", "127.0.0.1 -> localhost:443",
            ])
    }
}
