import HaulTestSupport
import Testing

/// Injected faults: failures, redirects, cut, stalled and trickled bodies, changing content.
@Suite struct FaultServerFaultTests {
    let content = testContent(10_000)

    @Test func cutAfterClosesEarly() async throws {
        try await FaultServer.withServer { server in
            var route = Route(content: content)
            route.cutAfter = 1000
            server.serve("/f.bin", route)
            let response = try RawHTTPClient.fetch(server, "/f.bin")
            #expect(response.header("Content-Length") == "10000")
            #expect(response.body == Array(content[..<1000]))
            #expect(!response.timedOut)
        }
    }

    @Test func failFirstThenSucceeds() async throws {
        try await FaultServer.withServer { server in
            var route = Route(content: content)
            route.failFirst = 1
            route.retryAfter = "2"
            server.serve("/f.bin", route)
            let failure = try RawHTTPClient.fetch(server, "/f.bin")
            #expect(failure.status == 503)
            #expect(failure.header("Retry-After") == "2")
            #expect(String(decoding: failure.body, as: UTF8.self).contains("503"))
            #expect(failure.header("Content-Length") == "\(failure.body.count)")
            let success = try RawHTTPClient.fetch(server, "/f.bin")
            #expect(success.status == 200)
            #expect(success.body == content)
            #expect(server.stats("/f.bin").requests.map(\.status) == [503, 200])
        }
    }

    @Test func redirectGivesLocation() async throws {
        try await FaultServer.withServer { server in
            var route = Route(content: [])
            route.redirectTo = "/elsewhere"
            server.serve("/go", route)
            let response = try RawHTTPClient.fetch(server, "/go")
            #expect(response.status == 302)
            #expect(response.header("Location") == "/elsewhere")
        }
    }

    @Test func contentAfterFirstGetChangesContentAndValidators() async throws {
        try await FaultServer.withServer { server in
            var route = Route(content: content)
            route.contentAfterFirstGet = testContent(10_000, seed: 7)
            route.cutFirstAfter = 500
            server.serve("/f.bin", route)
            let first = try RawHTTPClient.fetch(server, "/f.bin")
            let second = try RawHTTPClient.fetch(server, "/f.bin")
            #expect(first.body == Array(content[..<500]))
            #expect(second.body == testContent(10_000, seed: 7))
            #expect(first.header("ETag") != second.header("ETag"))
            #expect(first.header("Last-Modified") != second.header("Last-Modified"))
        }
    }

    @Test func countsContentBytesOnly() async throws {
        try await FaultServer.withServer { server in
            var route = Route(content: content)
            route.failFirst = 1
            route.cutFirstAfter = 3000
            server.serve("/f.bin", route)
            server.serve("/g.bin", Route(content: testContent(42)))
            _ = try RawHTTPClient.fetch(server, "/f.bin")
            _ = try RawHTTPClient.fetch(server, "/f.bin")
            _ = try RawHTTPClient.fetch(server, "/f.bin", headers: [("Range", "bytes=3000-")])
            _ = try RawHTTPClient.fetch(server, "/g.bin")
            #expect(server.stats("/f.bin").bodyBytesSent == 10_000)
            #expect(server.stats("/f.bin").getCount == 3)
            #expect(server.totalBodyBytesSent == 10_042)
        }
    }

    @Test func trickleTakesAboutTheRate() async throws {
        try await FaultServer.withServer { server in
            var route = Route(content: testContent(20_000))
            route.bytesPerSecond = 40_000
            server.serve("/slow.bin", route)
            let started = ContinuousClock.now
            let response = try RawHTTPClient.fetch(server, "/slow.bin")
            #expect(response.body == route.content)
            #expect(ContinuousClock.now - started > .milliseconds(350))
        }
    }

    @Test func stallKeepsConnectionOpenUntilShutdown() async throws {
        let server = try await FaultServer.start()
        var route = Route(content: content)
        route.stallFirstAfter = 700
        server.serve("/f.bin", route)
        let client = try RawHTTPClient(port: server.port, timeout: 0.5)
        try client.send("GET", "/f.bin")
        let stalled = try client.receive()
        #expect(stalled.timedOut)
        #expect(stalled.body == Array(content[..<700]))

        // Shutdown must close the stalled connection rather than wait for it; the client then
        // reads EOF. (No timing assertion: these machines are shared and noisy.)
        try await server.shutdown()
        #expect(client.readsEOF())
    }
}
