import HaulTestSupport
import Testing

/// Status, headers and bytes of well-behaved and range-related responses.
@Suite struct FaultServerContentTests {
    let content = testContent(1000)

    @Test func fullBodyWithValidators() async throws {
        try await FaultServer.withServer { server in
            server.serve("/f.bin", Route(content: content))
            let response = try RawHTTPClient.fetch(server, "/f.bin?x=1")
            #expect(response.status == 200)
            #expect(response.body == content)
            #expect(response.header("Content-Length") == "1000")
            #expect(response.header("Accept-Ranges") == "bytes")
            #expect(response.header("ETag")?.count == 18)
            #expect(response.header("ETag")?.hasPrefix("\"") == true)
            #expect(response.header("Last-Modified") == "Mon, 01 Jan 2024 00:00:00 GMT")
            #expect(server.stats("/f.bin").requests.first?.target == "/f.bin?x=1")
        }
    }

    @Test(arguments: [
        ("bytes=10-19", 10...19),
        ("bytes=990-", 990...999),
        ("bytes=-5", 995...999),
        ("bytes=900-5000", 900...999),
        ("bytes=0-0, 5-9", 0...0),
    ])
    func rangeGives206(range: String, expected: ClosedRange<Int>) async throws {
        try await FaultServer.withServer { server in
            server.serve("/f.bin", Route(content: content))
            let response = try RawHTTPClient.fetch(server, "/f.bin", headers: [("Range", range)])
            #expect(response.status == 206)
            #expect(response.header("Content-Range") == "bytes \(expected.lowerBound)-\(expected.upperBound)/1000")
            #expect(response.header("Content-Length") == "\(expected.count)")
            #expect(response.body == Array(content[expected]))
        }
    }

    @Test func ifRangeNeedsStrongEqualValidator() async throws {
        try await FaultServer.withServer { server in
            server.serve("/f.bin", Route(content: content))
            let head = try RawHTTPClient.fetch(server, "/f.bin", method: "HEAD")
            let etag = try #require(head.header("ETag"))
            let date = try #require(head.header("Last-Modified"))
            func status(ifRange: String) throws -> Int {
                try RawHTTPClient.fetch(server, "/f.bin", headers: [("Range", "bytes=100-"), ("If-Range", ifRange)]).status
            }
            #expect(try status(ifRange: etag) == 206)
            #expect(try status(ifRange: date) == 206)
            #expect(try status(ifRange: "\"0000000000000000\"") == 200)
            #expect(try status(ifRange: "W/" + etag) == 200)
            #expect(try status(ifRange: "Tue, 02 Jan 2024 00:00:00 GMT") == 200)

            var weak = Route(content: content)
            weak.validators = .weakETagOnly
            server.serve("/weak.bin", weak)
            let weakTag = try #require(try RawHTTPClient.fetch(server, "/weak.bin", method: "HEAD").header("ETag"))
            #expect(weakTag.hasPrefix("W/\""))
            let response = try RawHTTPClient.fetch(
                server, "/weak.bin", headers: [("Range", "bytes=100-"), ("If-Range", weakTag)])
            #expect(response.status == 200)
            #expect(response.body == content)
        }
    }

    @Test func ignoringRangeGives200() async throws {
        try await FaultServer.withServer { server in
            var route = Route(content: content)
            route.honoursRange = false
            server.serve("/f.bin", route)
            let response = try RawHTTPClient.fetch(server, "/f.bin", headers: [("Range", "bytes=100-")])
            #expect(response.status == 200)
            #expect(response.body == content)
        }
    }

    @Test func chunkedHasNoLengthAndNoRanges() async throws {
        try await FaultServer.withServer { server in
            var route = Route(content: testContent(200_000))
            route.chunked = true
            server.serve("/c.bin", route)
            let response = try RawHTTPClient.fetch(server, "/c.bin", headers: [("Range", "bytes=100-")])
            #expect(response.status == 200)
            #expect(response.header("Content-Length") == nil)
            #expect(response.header("Accept-Ranges") == nil)
            #expect(response.header("Transfer-Encoding") == "chunked")
            #expect(dechunk(response.body) == route.content)
            #expect(server.stats("/c.bin").bodyBytesSent == 200_000)
        }
    }

    @Test func wrongContentRangeShiftsStart() async throws {
        try await FaultServer.withServer { server in
            var route = Route(content: content)
            route.wrongContentRange = true
            server.serve("/f.bin", route)
            let response = try RawHTTPClient.fetch(server, "/f.bin", headers: [("Range", "bytes=100-199")])
            #expect(response.status == 206)
            #expect(response.header("Content-Range") == "bytes 101-199/1000")
            #expect(response.body == Array(content[101...199]))
        }
    }

    @Test func unsatisfiableRangeGives416() async throws {
        try await FaultServer.withServer { server in
            server.serve("/f.bin", Route(content: content))
            let past = try RawHTTPClient.fetch(server, "/f.bin", headers: [("Range", "bytes=1000-")])
            #expect(past.status == 416)
            #expect(past.header("Content-Range") == "bytes */1000")

            server.update("/f.bin") { $0.alwaysRangeNotSatisfiable = true }
            let always = try RawHTTPClient.fetch(server, "/f.bin", headers: [("Range", "bytes=0-1")])
            #expect(always.status == 416)
            #expect(server.stats("/f.bin").bodyBytesSent == 0)
        }
    }

    @Test func headDescribesWithoutBody() async throws {
        try await FaultServer.withServer { server in
            var route = Route(content: content)
            route.contentDisposition = "attachment; filename=\"a b.bin\""
            server.serve("/f.bin", route)
            let head = try RawHTTPClient.fetch(server, "/f.bin", method: "HEAD")
            #expect(head.status == 200)
            #expect(head.header("Content-Length") == "1000")
            #expect(head.header("Content-Disposition") == "attachment; filename=\"a b.bin\"")
            #expect(head.body.isEmpty)

            server.update("/f.bin") { $0.headContentLength = 5 }
            #expect(try RawHTTPClient.fetch(server, "/f.bin", method: "HEAD").header("Content-Length") == "5")

            server.update("/f.bin") { $0.headAllowed = false }
            #expect(try RawHTTPClient.fetch(server, "/f.bin", method: "HEAD").status == 405)
            #expect(try RawHTTPClient.fetch(server, "/f.bin").status == 200)
            #expect(server.stats("/f.bin").getCount == 1)
            #expect(server.stats("/f.bin").requests.map(\.status) == [200, 200, 405, 200])
        }
    }

    @Test func unknownPathGives404() async throws {
        try await FaultServer.withServer { server in
            let response = try RawHTTPClient.fetch(server, "/nothing")
            #expect(response.status == 404)
            #expect(server.stats("/nothing").requests.count == 1)
        }
    }
}
