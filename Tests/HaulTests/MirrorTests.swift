import Foundation
import GRDB
import HaulTestSupport
import Synchronization
import Testing
@testable import Haul

/// The library's ``Mirror``, run in process against the fault server's listings.
@Suite struct MirrorTests {
    /// A folder of `count` files of `size` bytes at `/tree/` (and one subfolder `sub/` with one
    /// more), each sent at `bytesPerSecond` when given; path → bytes.
    static func serveTree(
        on server: FaultServer, count: Int, size: Int, bytesPerSecond: Int? = nil
    ) -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        let names = (0..<count).map { "f\($0).bin" }
        var listing = Route(content: Array((names.map { "<a href=\"\($0)\">\($0)</a>" } + ["<a href=\"sub/\">sub/</a>"]).joined().utf8))
        listing.contentType = "text/html"
        server.serve("/tree/", listing)
        var sub = Route(content: Array("<a href=\"deep.txt\">deep.txt</a>".utf8))
        sub.contentType = "text/html"
        server.serve("/tree/sub/", sub)
        files["sub/deep.txt"] = Array("deep".utf8)
        server.serve("/tree/sub/deep.txt", Route(content: files["sub/deep.txt"]!))
        for (index, name) in names.enumerated() {
            files[name] = testBytes(size, seed: UInt64(index))
            var route = Route(content: files[name]!)
            route.bytesPerSecond = bytesPerSecond
            server.serve("/tree/" + name, route)
        }
        return files
    }

    static func read(_ root: String) -> [String: [UInt8]] { MirrorCommandTests.read(root) }

    @Test func aRunCopiesTheTreeAndARerunFindsItUnchangedWithoutABody() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        let files = Self.serveTree(on: server, count: 8, size: 3000)
        let configuration = Mirror.Configuration(url: server.url("/tree"), directory: dir.file("copy"))
        #expect(configuration.url.hasSuffix("/tree/"))
        try await Downloader.withDownloader(.init(stateDirectory: dir.file("state"))) { downloader throws(DownloadError) in
            let first = try await Mirror(configuration, downloader: downloader).run()
            #expect(first.new == files.count && first.failed == 0 && first.listingsRead == 2 && !first.interrupted)
            #expect(first.bytesFetched == Int64(files.values.map(\.count).reduce(0, +)))
            #expect(Self.read(dir.file("copy")) == files)

            let sentBefore = files.keys.map { server.stats("/tree/" + $0).bodyBytesSent }.reduce(0, +)
            let second = try await Mirror(configuration, downloader: downloader).run()
            #expect(second.unchanged == files.count && second.new == 0 && second.updated == 0 && second.bytesFetched == 0)
            #expect(files.keys.map { server.stats("/tree/" + $0).bodyBytesSent }.reduce(0, +) == sentBefore)
        }
        try await server.shutdown()
    }

    @Test func aDryRunTellsWhatItWouldFetchAndDeleteAndChangesNothing() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        let files = Self.serveTree(on: server, count: 3, size: 100)
        try await Downloader.withDownloader(.init(stateDirectory: dir.file("state"))) { downloader throws(DownloadError) in
            var configuration = Mirror.Configuration(url: server.url("/tree/"), directory: dir.file("copy"))
            _ = try await Mirror(configuration, downloader: downloader).run()
            // The server drops f0.bin and adds f9.bin.
            var listing = Route(content: Array("<a href=\"f1.bin\">f1.bin</a><a href=\"f2.bin\">f2.bin</a><a href=\"f9.bin\">f9.bin</a>".utf8))
            listing.contentType = "text/html"
            server.serve("/tree/", listing)
            server.serve("/tree/f9.bin", Route(content: Array("nine".utf8)))

            configuration.dryRun = true
            configuration.deletesGone = true
            let events = Mutex<[Mirror.Event]>([])
            let summary = try await Mirror(configuration, downloader: downloader).run { event in events.withLock { $0.append(event) } }
            #expect(
                events.withLock { $0 }.sorted { $0.description < $1.description } == [
                    .wouldDelete("f0.bin"), .wouldDelete("sub/deep.txt"), .wouldFetch("f9.bin"),
                ])
            #expect(summary.new == 1 && summary.toCheck == 2 && summary.deleted == 2)
            // Nothing changed on disk (sub/ is gone from the listing too).
            #expect(Self.read(dir.file("copy")) == files)
        }
        try await server.shutdown()
    }

    @Test func stopEndsTheRunAsACrashWouldAndTheNextRunContinues() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        let files = Self.serveTree(on: server, count: 12, size: 256 << 10, bytesPerSecond: 512 << 10)
        var configuration = Mirror.Configuration(url: server.url("/tree/"), directory: dir.file("copy"))
        configuration.maxConcurrentDownloads = 4
        configuration.deletesGone = true
        try await Downloader.withDownloader(.init(stateDirectory: dir.file("state"))) { downloader throws(DownloadError) in
            let mirror = Mirror(configuration, downloader: downloader)
            let problems = Mutex<[String]>([])
            let running = Task { () async -> Result<Mirror.Summary, DownloadError> in
                do throws(DownloadError) {
                    return .success(
                        try await mirror.run { event in
                            if case .problem(let line) = event { problems.withLock { $0.append(line) } }
                        })
                } catch {
                    return .failure(error)
                }
            }
            let done: () -> Int = { files.keys.count { dir.exists("copy/" + $0) } }
            let started = (try? await waitUntil { done() >= 2 }) ?? false
            #expect(started)
            await mirror.stop()
            let stopped = try await running.value.get()
            #expect(stopped.interrupted && stopped.deleted == 0)
            // The files it did not finish are not failures: the next run continues them.
            #expect(stopped.failed == 0 && stopped.errors.isEmpty && problems.withLock { $0 }.isEmpty, "\(problems.withLock { $0 })")
            let copied = files.keys.filter { dir.exists("copy/" + $0) }
            #expect(copied.count < files.count)
            let sent = Dictionary(uniqueKeysWithValues: copied.map { ($0, server.stats("/tree/" + $0).bodyBytesSent) })

            let next = try await Mirror(configuration, downloader: downloader).run()
            #expect(!next.interrupted && next.failed == 0)
            #expect(Self.read(dir.file("copy")) == files)
            // Copied before the stop: asked about, never sent again.
            for name in copied { #expect(server.stats("/tree/" + name).bodyBytesSent == sent[name], "\(name)") }
        }
        try await server.shutdown()
    }
}

extension MirrorTests {
    @Test func aResyncAsksWithOneConditionalHEADAndOnlyAChangedFilesBodyIsSentOnce() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        var files = Self.serveTree(on: server, count: 6, size: 5000)
        // One route refuses HEAD: it is asked with a conditional GET instead.
        var noHead = Route(content: files["f1.bin"]!)
        noHead.headAllowed = false
        server.serve("/tree/f1.bin", noHead)
        let configuration = Mirror.Configuration(url: server.url("/tree/"), directory: dir.file("copy"))
        try await Downloader.withDownloader(.init(stateDirectory: dir.file("state"))) { downloader throws(DownloadError) in
            _ = try await Mirror(configuration, downloader: downloader).run()
            files["f0.bin"] = testBytes(7000, seed: 77)
            server.serve("/tree/f0.bin", Route(content: files["f0.bin"]!))
            let before = Dictionary(uniqueKeysWithValues: files.keys.map { ($0, server.stats("/tree/" + $0)) })

            let summary = try await Mirror(configuration, downloader: downloader).run()
            #expect(summary.updated == 1 && summary.unchanged == files.count - 1 && summary.failed == 0)
            #expect(MirrorCommandTests.read(dir.file("copy")) == files)
            for name in files.keys {
                let stats = server.stats("/tree/" + name)
                let asked = stats.requests.dropFirst(before[name]!.requests.count)
                let sent = stats.bodyBytesSent - before[name]!.bodyBytesSent
                switch name {
                case "f0.bin":
                    // Asked with a HEAD (200: changed), then fetched once, its body sent once.
                    #expect(asked.map(\.method) == ["HEAD", "GET"], "\(asked.map(\.method))")
                    #expect(sent == 7000)
                case "f1.bin":
                    #expect(asked.map(\.method) == ["HEAD", "GET"] && asked.last?.status == 304, "\(asked.map { ($0.method, $0.status) })")
                    #expect(sent == 0)
                default:
                    #expect(asked.map(\.method) == ["HEAD"] && asked.first?.status == 304, "\(name): \(asked.map { ($0.method, $0.status) })")
                    #expect(asked.first?.header("If-None-Match") != nil)
                    #expect(sent == 0)
                }
            }
        }
        try await server.shutdown()
    }
}

extension MirrorTests {
    /// A resync asks about a listing's files with pipelined HEADs. What a pipeline does not
    /// settle is asked alone: the answers after one that ends its connection (`Connection:
    /// close`), and a redirect, which is followed. Every file is still found unchanged, and
    /// none is fetched.
    @Test func whatAPipelineLeavesUnansweredIsAskedAlone() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        var files: [String: [UInt8]] = [:]
        var names = (0..<12).map { "f\($0).bin" }
        for (index, name) in names.enumerated() {
            files[name] = testBytes(1000 + index, seed: UInt64(index))
            var route = Route(content: files[name]!)
            if index % 3 == 1 { route.responseHeaders = [("Connection", "close")] }
            server.serve("/tree/" + name, route)
        }
        files["moved.bin"] = testBytes(900, seed: 99)
        server.serve("/elsewhere/moved.bin", Route(content: files["moved.bin"]!))
        var moved = Route(content: [])
        moved.redirectTo = server.url("/elsewhere/moved.bin")
        server.serve("/tree/moved.bin", moved)
        names.insert("moved.bin", at: 5)
        var listing = Route(content: Array(names.map { "<a href=\"\($0)\">\($0)</a>" }.joined().utf8))
        listing.contentType = "text/html"
        server.serve("/tree/", listing)
        let configuration = Mirror.Configuration(url: server.url("/tree/"), directory: dir.file("copy"))
        try await Downloader.withDownloader(.init(stateDirectory: dir.file("state"))) { downloader throws(DownloadError) in
            let first = try await Mirror(configuration, downloader: downloader).run()
            #expect(first.new == files.count && first.failed == 0)
            let before = Dictionary(uniqueKeysWithValues: names.map { ($0, server.stats("/tree/" + $0).requests.count) })

            let second = try await Mirror(configuration, downloader: downloader).run()
            #expect(second.unchanged == files.count && second.updated == 0 && second.failed == 0 && second.bytesFetched == 0)
            #expect(Self.read(dir.file("copy")) == files)
            for name in names {
                let asked = server.stats("/tree/" + name).requests.dropFirst(before[name]!)
                #expect(!asked.isEmpty && asked.allSatisfy { $0.method == "HEAD" }, "\(name): \(asked.map { ($0.method, $0.status) })")
                let answer = name == "moved.bin" ? 302 : 304
                #expect(asked.last?.status == answer, "\(name): \(asked.map { ($0.method, $0.status) })")
            }
            // The redirect was asked about where it points, once.
            #expect(server.stats("/elsewhere/moved.bin").requests.last.map { ($0.method, $0.status) } ?? ("", 0) == ("HEAD", 304))
        }
        try await server.shutdown()
    }

    /// A server that answers the first request of a pipeline and drops the rest, keeping the
    /// connection: the pipeline's other files wait out the stall timeout and are asked alone,
    /// and every file after that is asked alone. One pipeline is all such a server costs.
    @Test func aServerThatDropsPipelinedRequestsCostsOnePipeline() async throws {
        let folders = ["a", "b", "c"]
        let names = (0..<5).map { "f\($0).txt" }
        let server = try ScriptedServer { _, connection, server in
            while let request = connection.readRequest() {
                let line = request.prefix { $0 != "\r" }.split(separator: " ")
                guard line.count >= 2 else { return }
                let (method, path) = (String(line[0]), String(line[1]))
                // What came in with this request, pipelined behind it, is dropped unanswered
                // (looked at before the answer: after it, the client may send its next request).
                var pending = [UInt8](repeating: 0, count: 64 << 10)
                let count = recv(connection.fd, &pending, pending.count, Int32(MSG_DONTWAIT))
                if count > 0 {
                    let dropped = String(decoding: pending[..<count], as: UTF8.self).components(separatedBy: "HEAD /").count - 1
                    server.note("dropped \(dropped)")
                }
                let etag = "\"\(path)\""
                let links = path == "/tree/" ? folders.map { $0 + "/" } : names
                let page = links.map { "<a href=\"\($0)\">\($0)</a>" }.joined()
                if path.hasSuffix("/") {
                    connection.write("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: \(page.utf8.count)\r\n\r\n" + page)
                } else if method == "HEAD", request.contains("If-None-Match: \(etag)") {
                    connection.write("HTTP/1.1 304 Not Modified\r\nETag: \(etag)\r\n\r\n")
                } else {
                    let body = "content of " + path
                    connection.write(
                        "HTTP/1.1 200 OK\r\nETag: \(etag)\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + (method == "HEAD" ? "" : body))
                }
            }
        }
        defer { server.stop() }
        let dir = try TestDirectory()
        defer { dir.remove() }
        var configuration = Mirror.Configuration(url: "http://127.0.0.1:\(server.port)/tree/", directory: dir.file("copy"))
        configuration.parallelListings = 1
        configuration.maxConcurrentDownloads = 1
        configuration.maxConnectionsPerHost = 1
        var settings = Downloader.Configuration(stateDirectory: dir.file("state"))
        settings.stallTimeout = .seconds(1)
        try await Downloader.withDownloader(settings) { downloader throws(DownloadError) in
            let first = try await Mirror(configuration, downloader: downloader).run()
            #expect(first.new == folders.count * names.count && first.failed == 0, "\(first)")
            #expect(server.notes.isEmpty, "\(server.notes)")
            let second = try await Mirror(configuration, downloader: downloader).run()
            #expect(second.unchanged == folders.count * names.count && second.failed == 0 && second.bytesFetched == 0, "\(second)")
        }
        // One pipeline of a listing's five files: the first answered, four dropped.
        #expect(server.notes == ["dropped 4"], "\(server.notes)")
    }

    /// Through a proxy nothing is pipelined, and nothing goes around it: each file's `HEAD`
    /// goes to the proxy alone.
    @Test(.enabled(if: ForwardProxy.executablePath != nil || ProcessInfo.processInfo.environment["CI"] != nil))
    func throughAProxyEachFileIsAskedAloneThroughIt() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        let files = Self.serveTree(on: server, count: 10, size: 700)
        try await ForwardProxy.withProxy { proxy in
            var template = DownloadRequest(url: server.url("/tree/"), directory: dir.file("copy"))
            template.network.proxy = ProxySettings(http: proxy.url)
            let configuration = Mirror.Configuration(url: server.url("/tree/"), directory: dir.file("copy"), template: template)
            try await Downloader.withDownloader(.init(stateDirectory: dir.file("state"))) { downloader throws(DownloadError) in
                #expect(!downloader.pipelinesHEADs(configuration.template))
                _ = try await Mirror(configuration, downloader: downloader).run()
                let before = proxy.requests().count
                let second = try await Mirror(configuration, downloader: downloader).run()
                #expect(second.unchanged == files.count && second.bytesFetched == 0 && second.failed == 0, "\(second)")
                let heads = proxy.requests().dropFirst(before).filter { $0.method == "HEAD" }
                #expect(Set(heads.map(\.target)) == Set(files.keys.map { server.url("/tree/" + $0) }), "\(heads)")
            }
        }
        try await server.shutdown()
    }

    /// The records of earlier runs are read while the listings are: when they cannot be, the
    /// walk stops, nothing is fetched, and the run ends with the store's error (never waits on).
    @Test func recordsThatCannotBeReadEndTheRunWithTheStoresError() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        _ = Self.serveTree(on: server, count: 5, size: 1000)
        let configuration = Mirror.Configuration(url: server.url("/tree/"), directory: dir.file("copy"))
        try await Downloader.withDownloader(.init(stateDirectory: dir.file("state"))) { downloader throws(DownloadError) in
            // The table goes away behind the store's back (made, then dropped, before the store
            // opens the database at its first read): every read of it fails.
            do {
                let other = try DatabaseQueue(path: dir.file("state/state.sqlite"))
                try Store.migrator.migrate(other)
                try other.write { try $0.execute(sql: "DROP TABLE download") }
            } catch {
                Issue.record("cannot drop the table: \(error)")
                return
            }
            await #expect {
                _ = try await Mirror(configuration, downloader: downloader).run()
            } throws: { error in
                (error as? DownloadError)?.message.contains("cannot read the download records") == true
            }
        }
        #expect(!FileManager.default.fileExists(atPath: dir.file("copy/f0.bin")))
        #expect(server.stats("/tree/f0.bin").getCount == 0)
        try await server.shutdown()
    }

    @Test func withOneConnectionPerHostChangedAndNewFilesStillRunAfterTheChecks() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        var files = Self.serveTree(on: server, count: 5, size: 3000)
        var configuration = Mirror.Configuration(url: server.url("/tree/"), directory: dir.file("copy"))
        configuration.maxConnectionsPerHost = 1
        try await Downloader.withDownloader(.init(stateDirectory: dir.file("state"))) { downloader throws(DownloadError) in
            _ = try await Mirror(configuration, downloader: downloader).run()
            // One file changes; the checks hold the host's only slot in turn, and the download
            // of the changed file, set aside meanwhile, must start once they give it back.
            files["f2.bin"] = testBytes(3100, seed: 55)
            server.serve("/tree/f2.bin", Route(content: files["f2.bin"]!))
            let summary = try await Mirror(configuration, downloader: downloader).run()
            #expect(summary.updated == 1 && summary.unchanged == files.count - 1 && summary.failed == 0, "\(summary.errors)")
            #expect(MirrorCommandTests.read(dir.file("copy")) == files)
        }
        try await server.shutdown()
    }

    @Test func aFileEditedHereKeepsItsPlaceWhenTheServerDropsIt() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        _ = Self.serveTree(on: server, count: 2, size: 1000)
        var configuration = Mirror.Configuration(url: server.url("/tree/"), directory: dir.file("copy"))
        configuration.deletesGone = true
        try await Downloader.withDownloader(.init(stateDirectory: dir.file("state"))) { downloader throws(DownloadError) in
            _ = try await Mirror(configuration, downloader: downloader).run()
            // Edited here with the same size (a later time), then gone from the server.
            let edited = testBytes(1000, seed: 9)
            try? await Task.sleep(for: .milliseconds(20))
            #expect(FileManager.default.createFile(atPath: dir.file("copy/f0.bin"), contents: Data(edited)))
            var listing = Route(content: Array("<a href=\"f1.bin\">f1.bin</a><a href=\"sub/\">sub/</a>".utf8))
            listing.contentType = "text/html"
            server.serve("/tree/", listing)
            let events = Mutex<[Mirror.Event]>([])
            let summary = try await Mirror(configuration, downloader: downloader).run { event in events.withLock { $0.append(event) } }
            #expect(summary.deleted == 0)
            #expect(dir.exists("copy/f0.bin") && Array(FileManager.default.contents(atPath: dir.file("copy/f0.bin")) ?? Data()) == edited)
            #expect(events.withLock { $0 }.contains { $0.description.contains("kept") && $0.description.contains("f0.bin") })
        }
        try await server.shutdown()
    }
}

extension MirrorTests {
    @Test func deletingWhatIsGoneNeverFollowsAFolderSwappedForALink() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        _ = Self.serveTree(on: server, count: 2, size: 1000)
        var configuration = Mirror.Configuration(url: server.url("/tree/"), directory: dir.file("copy"))
        configuration.deletesGone = true
        try await Downloader.withDownloader(.init(stateDirectory: dir.file("state"))) { downloader throws(DownloadError) in
            _ = try await Mirror(configuration, downloader: downloader).run()
            // copy/sub moves elsewhere (its file as written, size and time) and a link takes
            // its place; then the server drops sub/.
            #expect(rename(dir.file("copy/sub"), dir.file("elsewhere")) == 0)
            #expect(symlink(dir.file("elsewhere"), dir.file("copy/sub")) == 0)
            var listing = Route(content: Array("<a href=\"f0.bin\">f0.bin</a><a href=\"f1.bin\">f1.bin</a>".utf8))
            listing.contentType = "text/html"
            server.serve("/tree/", listing)
            let events = Mutex<[Mirror.Event]>([])
            let summary = try await Mirror(configuration, downloader: downloader).run { event in events.withLock { $0.append(event) } }
            #expect(summary.deleted == 0)
            #expect(dir.exists("elsewhere/deep.txt"), "the file the link leads to is still there")
            #expect(events.withLock { $0 }.contains { $0.description.contains("sub/deep.txt not deleted") }, "\(events.withLock { $0 })")
        }
        try await server.shutdown()
    }
}
