import Foundation
import HaulTestSupport
import Testing
@testable import Haul
@testable import HaulDaemon

/// One file from several sources: the bytes come from all of them, and a source that goes
/// wrong is dropped while the others finish the file, byte-identical.
@Suite struct SourcesTests {
    static let size = 6 << 20

    /// Serves the same content at /a.bin, /b.bin and /c.bin (the last one changed by
    /// `mirror`) and downloads it from the three with six connections.
    func run(
        stallTimeout: Duration = .seconds(5), _ mirror: (inout Route) -> Void = { _ in }
    ) async throws -> (result: Result<DownloadResult, DownloadError>, got: [UInt8]?, expected: [UInt8], stats: [RouteStats]) {
        let server = try await FaultServer.start()
        var harness = try Harness()
        harness.stallTimeout = stallTimeout
        defer { harness.remove() }
        let content = testBytes(Self.size, seed: 21)
        for name in ["a", "b", "c"] {
            var route = Route(content: content)
            route.bytesPerSecond = 4 << 20
            if name == "c" { mirror(&route) }
            server.serve("/\(name).bin", route)
        }
        var request = harness.request(server.url("/a.bin"), file: "f.bin") {
            $0.connections = 6
            $0.minimumSplitSize = 256 << 10
            $0.maxTries = 3
        }
        request.sources += ["/b.bin", "/c.bin"].map { DownloadRequest.Source(uri: server.url($0)) }
        let result = try await harness.download(request)
        let stats = ["a", "b", "c"].map { server.stats("/\($0).bin") }
        let got = harness.directory.contents("f.bin")
        try await server.shutdown()
        return (result, got, content, stats)
    }

    @Test func theBytesComeFromEverySource() async throws {
        let run = try await run()
        _ = try run.result.get()
        #expect(digest(run.got) == digest(run.expected))
        for (name, stats) in zip(["a", "b", "c"], run.stats) {
            #expect(stats.bodyBytesSent > 0, "\(name).bin served part of the file")
        }
    }

    /// Each way a mirror can go wrong: it is dropped, and the file is still byte-identical.
    @Test(arguments: ["404", "no ranges", "another length", "stall"])
    func aMirrorThatGoesWrongIsDropped(fault: String) async throws {
        let run = try await run(stallTimeout: .milliseconds(500)) { route in
            switch fault {
            case "404": route.status = 404
            case "no ranges": route.honoursRange = false
            case "another length": route.content = Array(route.content.prefix(Self.size - 1000))
            default: route.stallAfter = 64 << 10
            }
        }
        let result = try run.result.get()
        #expect(result.bytes == Int64(Self.size))
        #expect(digest(run.got) == digest(run.expected))
        // The bad mirror's connections stopped at their first answers: at most a bounded share of
        // the file came from it, never a 200 body past what was asked.
        let bad = run.stats[2]
        #expect(bad.requests.count <= 8, "\(fault): \(bad.requests.count) requests to a dropped source")
        #expect(run.stats[0].bodyBytesSent + run.stats[1].bodyBytesSent > 0)
    }

    @Test func theOneSourceCaseIsTheURL() throws {
        var request = DownloadRequest(url: "http://a.example/f", directory: "/tmp")
        #expect(request.sources == [.init(uri: "http://a.example/f")])
        request.sources.append(.init(uri: "http://b.example/f", priority: 2, location: "de"))
        request.url = "http://c.example/f"
        #expect(request.sources.map(\.uri) == ["http://c.example/f", "http://b.example/f"])
        try request.validate()
    }

    @Test(arguments: [
        (["http://a/f", "ftp://b/f"], "not a URL Haul can download"),
        (["http://a/f", "http://a/f"], "is given twice"),
        ([String](), "at least one URL"),
    ])
    func badSourcesAreRefusedInOneLine(uris: [String], message: String) {
        let request = DownloadRequest(sources: uris.map { .init(uri: $0) }, directory: "/tmp")
        #expect {
            try request.validate()
        } throws: { error in
            let text = (error as? DownloadError)?.message ?? ""
            return text.contains(message) && !text.contains("\n")
        }
    }

    @Test func theSourcesSurviveTheStore() throws {
        var request = DownloadRequest(url: "http://a.example/f", file: "/tmp/f")
        request.sources.append(.init(uri: "http://b.example/f", priority: 1, location: "fr"))
        let row = DownloadRow(id: .next(), queue: "q", request: request)
        let values = try row.storedValues()
        let columns = Dictionary(uniqueKeysWithValues: zip(DownloadRow.storedColumns, values))
        let read = try DownloadRow.request(
            options: try #require(columns["request"] as? String), url: try #require(columns["url"] as? String),
            sources: try #require(columns["sources"] as? String), destinationKind: 0, destination: "/tmp/f")
        #expect(read.sources == request.sources)
        // A download from one URL keeps the column empty, as every row before v6 has it.
        #expect(try DownloadRow.storedSources(of: DownloadRequest(url: "http://a.example/f", file: "/tmp/f")) == "")
    }

    /// Real nginx as three mirrors of one file: one refuses ranges (dropped and named), one
    /// stalls after 64 KiB (its segments go to the good one, which finishes the file; the fault
    /// server's stall test shows the drop). The file is byte-identical.
    @Test func nginxMirrorsThatRefuseRangesOrStallDoNotSpoilTheFile() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let content = testBytes(Self.size, seed: 25)
        try dir.write("www/f.bin", content, creatingFolders: true)
        var harness = try Harness()
        // nginx's limit_rate sends a second's allowance at a time: a stall is longer than that.
        harness.stallTimeout = .seconds(2)
        defer { harness.remove() }
        try await NginxServer.withServer(root: dir.file("www"), limitRate: 4 << 20) { nginx in
            var request = DownloadRequest(
                sources: ["/limited/f.bin", "/noranges/f.bin", "/stalled/f.bin"].map { .init(uri: nginx.url($0)) },
                file: harness.directory.file("f.bin"))
            request.connections = 6
            request.minimumSplitSize = 256 << 10
            request.retryWait = .milliseconds(10)
            let downloader = try harness.downloader()
            let task = try await downloader.download(request)
            let dropped = Task {
                var dropped: [String: String] = [:]
                for await progress in task.progress {
                    for source in progress.sources { if let why = source.dropped { dropped[source.uri] = why } }
                }
                return dropped
            }
            let result = try await task.result()
            try await downloader.shutdown()
            #expect(result.bytes == Int64(Self.size))
            #expect(digest(harness.directory.contents("f.bin")) == digest(content))
            let why = await dropped.value
            #expect(why[nginx.url("/noranges/f.bin")]?.contains("does not serve ranges") == true, "\(why)")
            #expect(why[nginx.url("/limited/f.bin")] == nil, "\(why)")
        }
    }

    @Test func eachSourcesValidatorsSurviveTheStore() async throws {
        let store = try Store(inMemory: ())
        var request = DownloadRequest(url: "http://a.example/f", file: "/tmp/f")
        request.sources.append(.init(uri: "http://b.example/f"))
        var row = DownloadRow(id: .next(), queue: "q", request: request)
        row.path = "/tmp/f"
        row.sourceValidators = ["http://b.example/f": Validators(etag: "\"b1\"", lastModified: "Tue, 03 Mar 2026 10:00:00 GMT")]
        store.writer.insert(row)
        #expect(try await store.row(path: "/tmp/f")?.sourceValidators == row.sourceValidators)
        store.writer.update(row.id, try .sourceValidators(["http://c.example/f": Validators(etag: "\"c\"")]))
        #expect(try await store.row(path: "/tmp/f")?.sourceValidators == ["http://c.example/f": Validators(etag: "\"c\"")])
        #expect(ResumeToken(try #require(try await store.row(path: "/tmp/f"))).sourceValidators?.count == 1)
        // None for a download from one URL: the column stays empty.
        #expect(try DownloadRow.storedSourceValidators([:]) == "")
        #expect(DownloadRow.sourceValidators(stored: "") == [:])
        #expect(DownloadRow.sourceValidators(stored: "not json") == [:])
    }

    /// A mirror whose file changed between two runs (the same length, another ETag) is dropped
    /// at its first answer to the rerun, never mixed in: each source's validators are kept with
    /// the row, and the rerun sends each its own `If-Range`.
    @Test func aMirrorWhoseFileChangedSinceTheLastRunIsDroppedNotMixedIn() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        let content = testBytes(Self.size, seed: 22)
        for name in ["a", "b"] {
            var route = Route(content: content)
            route.bytesPerSecond = 2 << 20
            server.serve("/\(name).bin", route)
        }
        var request = harness.request(server.url("/a.bin"), file: "f.bin") {
            $0.connections = 4
            $0.minimumSplitSize = 256 << 10
            $0.maxTries = 3
        }
        let mirror = server.url("/b.bin")
        request.sources.append(.init(uri: mirror))
        let downloader = try harness.downloader()
        let task = try await downloader.download(request)
        #expect(try await waitUntil { server.stats("/b.bin").bodyBytesSent >= 512 << 10 })
        let token = try #require(await task.pause())
        try await downloader.shutdown()
        #expect(token.sourceValidators?[mirror]?.etag == server.validators("/b.bin").etag)
        #expect(token.ranges.byteCount > 0)
        let row = try #require(try await harness.record(for: harness.directory.file("f.bin")))
        #expect(row.sourceValidators[mirror]?.etag == server.validators("/b.bin").etag)

        // The mirror's file changes; its length does not.
        server.update("/b.bin") { $0.content = testBytes(Self.size, seed: 23) }
        let sentBefore = server.stats("/b.bin").bodyBytesSent
        let result = try await harness.download(request).get()
        #expect(result.bytes == Int64(Self.size))
        #expect(digest(harness.directory.contents("f.bin")) == digest(content))
        // Its 200s were cut at their heads: none of its new bytes went into the file.
        #expect(server.stats("/b.bin").bodyBytesSent - sentBefore < Self.size)
    }

    /// A rerun whose first source is gone continues from the recorded bytes with the next one,
    /// compared with that source's own validators (not the first's, which are another server's).
    @Test func aRerunWhoseFirstSourceIsGoneContinuesWithTheNext() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        let content = testBytes(Self.size, seed: 24)
        for name in ["a", "b"] {
            var route = Route(content: content)
            route.bytesPerSecond = 2 << 20
            server.serve("/\(name).bin", route)
        }
        // The same bytes with another Last-Modified: another server's copy of the file.
        server.update("/b.bin") { $0.content = testBytes(16) }
        _ = server.validators("/b.bin")
        server.update("/b.bin") { $0.content = content }
        #expect(server.validators("/a.bin").lastModified != server.validators("/b.bin").lastModified)
        var request = harness.request(server.url("/a.bin"), file: "f.bin") {
            $0.connections = 4
            $0.minimumSplitSize = 256 << 10
            $0.maxTries = 2
        }
        request.sources.append(.init(uri: server.url("/b.bin")))
        let downloader = try harness.downloader()
        let task = try await downloader.download(request)
        #expect(try await waitUntil { server.stats("/b.bin").bodyBytesSent >= 512 << 10 })
        let token = try #require(await task.pause())
        try await downloader.shutdown()
        let kept = token.ranges.byteCount
        #expect(kept > 0)

        server.update("/a.bin") { $0.status = 404 }
        let sentBefore = server.stats("/b.bin").bodyBytesSent
        let result = try await harness.download(request).get()
        #expect(digest(harness.directory.contents("f.bin")) == digest(content))
        // Only what was missing came again.
        #expect(server.stats("/b.bin").bodyBytesSent - sentBefore <= Self.size - Int(kept) + (1 << 20))
        #expect(result.bytes == Int64(Self.size))
    }
}

/// Several URIs over aria2's RPC: one download from all of them, as aria2 does.
@Suite struct SourcesRPCTests {
    @Test func addUriWithSeveralURIsIsOneDownloadFromEach() async throws {
        try await RPCFixture.with(connections: 4) { t async throws in
            let content = testBytes(4 << 20, seed: 5)
            for path in ["/r1.bin", "/r2.bin"] {
                var route = Route(content: content)
                route.bytesPerSecond = 1 << 20
                t.server.serve(path, route)
            }
            let uris: JSONValue = [.string(t.server.url("/r1.bin")), .string(t.server.url("/r2.bin"))]
            let gid = try #require(try await t.call("aria2.addUri", [uris, ["min-split-size": "1M"]]).string)
            let listed = try await t.call("aria2.getUris", [.string(gid)]).array?.compactMap { $0["uri"] }
            #expect(listed == uris.array)
            // While it runs, each source is a server of its own.
            try await t.waitFor(gid) { $0["status"] == "complete" || ($0["status"] == "active" && $0["completedLength"] != "0") }
            if let servers = try? await t.call("aria2.getServers", [.string(gid)]) {
                let listed = servers.array?.first?["servers"]?.array?.compactMap { $0["uri"] }
                #expect(listed == uris.array)
            }
            try await t.waitFor(gid) { $0["status"] == "complete" }
            #expect(t.dir.contents("downloads/r1.bin") == content)
            #expect(!t.dir.exists("downloads/r2.bin"), "one file, not two")
            #expect(t.server.stats("/r1.bin").bodyBytesSent > 0 && t.server.stats("/r2.bin").bodyBytesSent > 0)
        }
    }

    /// tellStatus (and so the page's detail view) gives each source's speed while it runs, and
    /// why one was dropped.
    @Test func eachSourceShowsItsSpeedOrWhyItWasDropped() async throws {
        try await RPCFixture.with(connections: 4) { t async throws in
            var route = Route(content: testBytes(4 << 20, seed: 6))
            route.bytesPerSecond = 1 << 20
            t.server.serve("/ok.bin", route)
            t.server.serve(
                "/gone.bin",
                {
                    var gone = Route(content: []); gone.status = 404; return gone
                }())
            let uris: JSONValue = [.string(t.server.url("/ok.bin")), .string(t.server.url("/gone.bin"))]
            let gid = try #require(try await t.call("aria2.addUri", [uris, ["min-split-size": "1M"]]).string)
            func entries(_ status: JSONValue) -> [JSONValue] { status["files"]?.array?.first?["uris"]?.array ?? [] }
            let status = try await t.waitFor(gid) { status in
                entries(status).last?["dropped"] != nil && entries(status).first?["downloadSpeed"] != nil
            }
            #expect(entries(status).last?["dropped"]?.string?.contains("404") == true, "\(status)")
            #expect(entries(status).last?["status"] == "waiting")
            #expect(entries(status).first?["status"] == "used")
            try await t.waitFor(gid) { $0["status"] == "complete" }
        }
    }

    @Test func changeUriAddsAndRemovesSources() async throws {
        try await RPCFixture.with(connections: 1) { t async throws in
            let (a, b, c) = (t.server.url("/a.bin"), t.server.url("/b.bin"), t.server.url("/c.bin"))
            let gid = try #require(try await t.call("aria2.addUri", [[.string(a), .string(b)], ["pause": "true"]]).string)
            #expect(try await t.call("aria2.changeUri", [.string(gid), 1, [.string(a)], [.string(c)]]) == [1, 1])
            let listed = try await t.call("aria2.getUris", [.string(gid)]).array?.compactMap { $0["uri"] }
            #expect(listed == [.string(b), .string(c)])
            #expect(await t.failure("aria2.addUri", [[.string(a), "ftp://x/y"]])?.contains("not a URL") == true)
        }
    }
}
