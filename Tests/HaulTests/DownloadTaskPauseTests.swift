import Foundation
import HaulTestSupport
import Testing
@testable import Haul

/// Pausing a task, and every wait on it ending: the library as ResumeSemantics.md describes it.
@Suite struct DownloadTaskPauseTests {
    /// A download of `size` bytes at `rate` bytes a second, paused once at least `pauseAt`
    /// bytes are in its part file.
    struct Paused {
        let server: FaultServer
        let harness: Harness
        let downloader: Downloader
        let task: DownloadTask
        let route: Route
        let token: ResumeToken
        let partSize: Int
    }

    func pausedDownload(size: Int = 4 << 20, rate: Int = 8 << 20, pauseAt: Int = 1 << 20) async throws -> Paused {
        let server = try await FaultServer.start()
        let harness = try Harness()
        var route = Route(content: testBytes(size))
        route.bytesPerSecond = rate
        server.serve("/f.bin", route)
        let downloader = try harness.downloader()
        let task = try await downloader.download(harness.request(server.url("/f.bin"), file: "f.bin"))
        #expect(try await waitUntil { fileSize(harness.directory.file("f.bin.part")) >= pauseAt })
        let token = try #require(await task.pause())
        let partSize = fileSize(harness.directory.file("f.bin.part"))
        return Paused(server: server, harness: harness, downloader: downloader, task: task, route: route, token: token, partSize: partSize)
    }

    @Test func pauseReturnsATokenWhoseRangesAreTheBytesOnDisk() async throws {
        let paused = try await pausedDownload()
        defer { paused.harness.remove() }
        // Nothing is written after the pause returned: what is on disk now is what the token says.
        try await Task.sleep(for: .milliseconds(300))
        let onDisk = fileSize(paused.harness.directory.file("f.bin.part"))
        #expect(onDisk == paused.partSize)
        #expect(paused.token.ranges == ByteRanges([0..<Int64(onDisk)]))
        #expect(paused.token.destination == paused.harness.directory.file("f.bin"))
        #expect(paused.token.totalLength == 4 << 20)
        #expect(try await paused.task.resumeToken() == paused.token)
        #expect(paused.task.isPaused)
        try await paused.downloader.shutdown()
        try await paused.server.shutdown()
    }

    @Test func aFreshDownloaderResumesFromTheTokensJSONAndFetchesOnlyTheRest() async throws {
        let paused = try await pausedDownload()
        defer { paused.harness.remove() }
        let json = try JSONEncoder().encode(paused.token)
        try await paused.downloader.shutdown()
        let sentBefore = paused.server.stats("/f.bin").bodyBytesSent
        let start = paused.token.ranges.contiguousPrefix

        // Another process: its own state folder, only the JSON and the part file.
        var configuration = Downloader.Configuration(stateDirectory: paused.harness.directory.file("other-state"))
        configuration.clock = paused.harness.clock
        let result = try await Downloader.withDownloader(configuration) { downloader throws(DownloadError) in
            let token: ResumeToken
            do { token = try JSONDecoder().decode(ResumeToken.self, from: json) } catch { throw .invalidRequest("\(error)") }
            return try await downloader.download(resuming: token).result()
        }
        let stats = paused.server.stats("/f.bin")
        try await paused.server.shutdown()

        #expect(stats.requests.last { $0.method == "GET" }?.header("Range") == "bytes=\(start)-")
        #expect(stats.bodyBytesSent - sentBefore == (4 << 20) - Int(start))
        #expect(result.bytesFetched == (4 << 20) - start)
        #expect(digest(paused.harness.directory.contents("f.bin")) == digest(paused.route.content))
    }

    /// A download from several sources, with piece digests, pauses into a token that keeps
    /// both: continued from its JSON, the rest comes from every source and is checked.
    @Test func aTokenKeepsTheSourcesAndThePieces() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        let content = testBytes(8 << 20, seed: 31)
        for path in ["/a.bin", "/b.bin"] {
            var route = Route(content: content)
            route.bytesPerSecond = 2 << 20
            server.serve(path, route)
        }
        let pieces = PieceChecksumTests.pieces(of: content)
        var request = harness.request(server.url("/a.bin"), file: "f.bin") {
            $0.connections = 4
            $0.minimumSplitSize = 256 << 10
            $0.pieces = pieces
        }
        request.sources.append(.init(uri: server.url("/b.bin"), priority: 2))
        let downloader = try harness.downloader()
        let task = try await downloader.download(request)
        #expect(try await waitUntil { fileSize(harness.directory.file("f.bin.part")) >= 1 << 20 })
        let token = try #require(await task.pause())
        try await downloader.shutdown()
        #expect(token.sources == request.sources)
        #expect(token.pieces == pieces)
        let json = try JSONEncoder().encode(token)
        let sentByB = server.stats("/b.bin").bodyBytesSent

        let result = try await Downloader.withDownloader(.init(stateDirectory: harness.directory.file("other-state"))) {
            downloader throws(DownloadError) in
            let token: ResumeToken
            do { token = try JSONDecoder().decode(ResumeToken.self, from: json) } catch { throw .invalidRequest("\(error)") }
            return try await downloader.download(resuming: token) { $0.connections = 4 }.result()
        }
        try await server.shutdown()
        #expect(result.bytes == Int64(content.count))
        #expect(digest(harness.directory.contents("f.bin")) == digest(content))
        #expect(server.stats("/b.bin").bodyBytesSent > sentByB, "the mirror served part of the rest")
    }

    @Test func resultAndProgressOfAPausedTaskEndWithTheToken() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        var route = Route(content: testBytes(4 << 20))
        route.bytesPerSecond = 4 << 20
        server.serve("/f.bin", route)
        let downloader = try harness.downloader()
        let task = try await downloader.download(harness.request(server.url("/f.bin"), file: "f.bin"))
        // Awaited before the pause, in a task group, as a program would.
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                let error = await #expect(throws: DownloadError.self) { try await task.result() }
                #expect(error?.kind == .paused)
                #expect(error?.resumeToken?.ranges.isEmpty == false)
            }
            group.addTask { for await _ in task.progress {} }
            #expect(try await waitUntil { fileSize(harness.directory.file("f.bin.part")) >= 1 << 20 })
            let token = await task.pause()
            let clock = ContinuousClock()
            let paused = clock.now
            try await group.waitForAll()
            #expect(clock.now - paused < .seconds(1))
            // Asked again while paused: at once, with the same token.
            let again = await #expect(throws: DownloadError.self) { try await task.result() }
            #expect(again?.resumeToken == token)
        }

        // A resume starts a new run: its own progress, and result() waits for it.
        task.resume()
        var last: DownloadProgress?
        for await progress in task.progress { last = progress }
        let result = try await task.result()
        try await downloader.shutdown()
        try await server.shutdown()
        #expect(last?.bytesDone == 4 << 20)
        #expect(result.bytes == 4 << 20)
        #expect(digest(harness.directory.contents("f.bin")) == digest(route.content))
    }

    @Test func resultEndsWhenTheDownloaderShutsDown() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        var route = Route(content: testBytes(2 << 20))
        route.stallAfter = 1 << 20
        server.serve("/f.bin", route)
        var patient = harness
        patient.stallTimeout = .seconds(30)  // the stall keeps it running, it is no failure
        let downloader = try patient.downloader()
        let running = try await downloader.download(harness.request(server.url("/f.bin"), file: "f.bin"))
        let paused = try await downloader.download(harness.request(server.url("/f.bin"), file: "g.bin"))
        #expect(try await waitUntil { fileSize(harness.directory.file("f.bin.part")) >= 1 << 20 })
        #expect(try await waitUntil { fileSize(harness.directory.file("g.bin.part")) >= 1 << 20 })
        _ = await paused.pause()

        let clock = ContinuousClock()
        async let runningOutcome = running.outcome()
        async let pausedOutcome = paused.outcome()
        try await Task.sleep(for: .milliseconds(100))
        let closing = clock.now
        try await downloader.shutdown()
        let outcomes = await [runningOutcome, pausedOutcome]
        #expect(clock.now - closing < .seconds(1))
        try await server.shutdown()

        #expect(outcomes.map { $0.failure?.kind } == [.paused, .paused])
        #expect(outcomes[0].failure?.message.contains("shut down") == true)
        // Asked after the shutdown, both say so, with their tokens.
        for task in [running, paused] {
            let error = await #expect(throws: DownloadError.self) { try await task.result() }
            #expect(error?.message.contains("shut down") == true)
            #expect(error?.resumeToken != nil)
        }
        // The running one was paused with every byte it wrote recorded.
        let token = try #require(outcomes[0].failure?.resumeToken)
        #expect(token.ranges == ByteRanges([0..<Int64(fileSize(harness.directory.file("f.bin.part")))]))
        running.resume()
        #expect(running.isPaused == false)
        await #expect(throws: DownloadError.self) {
            _ = try await downloader.download(harness.request(server.url("/f.bin"), file: "h.bin"))
        }
    }

    @Test func cancellingTheAwaitingTaskEndsItsWaitAndNotTheDownload() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        var route = Route(content: testBytes(2 << 20))
        route.stallAfter = 1 << 20
        server.serve("/f.bin", route)
        var patient = harness
        patient.stallTimeout = .seconds(30)
        let downloader = try patient.downloader()
        let task = try await downloader.download(harness.request(server.url("/f.bin"), file: "f.bin"))
        #expect(try await waitUntil { fileSize(harness.directory.file("f.bin.part")) >= 1 << 20 })

        let waiter = Task { await task.outcome() }
        try await Task.sleep(for: .milliseconds(100))
        let clock = ContinuousClock()
        let cancelled = clock.now
        waiter.cancel()
        let outcome = await waiter.value
        #expect(clock.now - cancelled < .seconds(1))
        #expect(outcome.failure?.kind == .cancelled)
        // The download goes on: it is neither paused nor ended, and a pause still works.
        #expect(!task.isPaused)
        #expect(await task.pause() != nil)
        try await downloader.shutdown()
        try await server.shutdown()
    }

    @Test func aTypedCatchOfDownloadErrorCompilesInAndAroundWithDownloader() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        server.serve("/f.bin", Route(content: testBytes(1000)))
        var configuration = Downloader.Configuration(stateDirectory: harness.stateDirectory)
        configuration.clock = harness.clock
        let missing = harness.request(server.url("/missing.bin"), file: "m.bin")

        // Inside the body: `do throws(DownloadError)` (Swift infers `any Error` for a plain
        // `do` in a closure).
        let inside = try await Downloader.withDownloader(configuration) { downloader in
            do throws(DownloadError) {
                _ = try await downloader.download(missing).result()
                return DownloadError.invalidRequest("no failure")
            } catch {
                let typed: DownloadError = error
                return typed
            }
        }
        #expect(inside.status == 404)

        // Around it: a body that says `throws(DownloadError)` keeps the type for the caller.
        do {
            try await Downloader.withDownloader(configuration) { downloader throws(DownloadError) in
                _ = try await downloader.download(missing).result()
            }
            Issue.record("a 404 did not fail")
        } catch {
            let typed: DownloadError = error
            #expect(typed.kind == .http)
            #expect(typed.status == 404)
        }
        try await server.shutdown()
    }
}
