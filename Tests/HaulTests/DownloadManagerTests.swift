import Foundation
import HaulTestSupport
import Testing
@testable import Haul

/// The manager end to end, against the fault server.
@Suite struct DownloadManagerTests {
    static let size = 256 << 10

    /// Serves `count` files `/f0.bin`… at `bytesPerSecond` each.
    func serveFiles(_ server: FaultServer, count: Int, bytesPerSecond: Int? = nil) -> [[UInt8]] {
        (0..<count).map { index in
            var route = Route(content: testBytes(Self.size, seed: UInt64(100 + index)))
            route.bytesPerSecond = bytesPerSecond
            server.serve("/f\(index).bin", route)
            return route.content
        }
    }

    /// A fault server, a throwaway state folder and a manager on it, all shut down after
    /// `body` whatever happens.
    func withManager(
        maxConcurrent: Int = 5, perHost: Int = 16,
        _ body: (FaultServer, Harness, Downloader, DownloadManager) async throws -> Void
    ) async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        let downloader = try harness.downloader()
        let manager = harness.manager(downloader, maxConcurrent: maxConcurrent, perHost: perHost)
        do {
            try await body(server, harness, downloader, manager)
        } catch {
            await manager.shutdown()
            try? await downloader.shutdown()
            try? await server.shutdown()
            throw error
        }
        await manager.shutdown()
        try await downloader.shutdown()
        try await server.shutdown()
    }

    @Test func manyDownloadsRunNoMoreThanTheLimitAtOnce() async throws {
        try await withManager(maxConcurrent: 3) { server, harness, _, manager in
            let contents = serveFiles(server, count: 12, bytesPerSecond: 1 << 20)
            let log = await EventLog.recording(manager)
            let ids = try await manager.add(
                contentsOf: contents.indices.map {
                    harness.request(server.url("/f\($0).bin"), file: "f\($0).bin")
                }
            ).map { try $0.get() }
            await manager.waitUntilIdle()
            for (index, content) in contents.enumerated() {
                #expect(digest(harness.directory.contents("f\(index).bin")) == digest(content))
            }
            let totals = await manager.totals()
            #expect(totals.completed == 12 && totals.bytesDone == Int64(12 * Self.size) && totals.totalBytes == totals.bytesDone)
            await manager.shutdown()
            await log.ended()
            // Three transfers at once; a download whose bytes are all in gives its place up
            // while it is put at its final name.
            #expect(server.peakConcurrentBodies == 3)
            #expect(log.peakRunning >= 3)
            #expect(log.everyAttemptEndsOnce)
            let started = log.lifecycle().filter { $0.hasPrefix("started") }
            #expect(started == ids.map { "started \($0)" }, "equal priorities start in the order added")
        }
    }

    /// A stream asked for without progress gets every other event, in the same order, and no
    /// snapshot of a transfer; one with progress (asked for beside it) gets them all.
    @Test func eventsWithoutProgressAreEveryOtherEvent() async throws {
        try await withManager(maxConcurrent: 2) { server, harness, _, manager in
            let contents = serveFiles(server, count: 3, bytesPerSecond: 1 << 20)
            let all = await EventLog.recording(manager)
            let lives = await EventLog.recording(manager, includingProgress: false)
            let ids = try await manager.add(
                contentsOf: contents.indices.map { harness.request(server.url("/f\($0).bin"), file: "f\($0).bin") }
            ).map { try $0.get() }
            await manager.waitUntilIdle()
            await manager.shutdown()
            await all.ended()
            await lives.ended()
            #expect(all.events.contains { if case .progress = $0 { true } else { false } })
            #expect(!lives.events.contains { if case .progress = $0 { true } else { false } })
            #expect(lives.lifecycle() == all.lifecycle())
            #expect(Set(lives.lifecycle().filter { $0.hasPrefix("completed") }) == Set(ids.map { "completed \($0)" }))
        }
    }

    /// With only streams that want no progress, no transfer's snapshot is sent at all.
    @Test func noProgressIsSentToStreamsThatDoNotWantIt() async throws {
        let hub = EventHub()
        let stream = hub.subscribe(open: true, progress: false)
        #expect(!hub.wantsProgress)
        let watching = hub.subscribe(open: true)
        #expect(hub.wantsProgress)
        let id = DownloadManager.ID(rawValue: 7)
        hub.send(.started(id))
        hub.send(.progress(id, DownloadProgress(bytesDone: 1, bytesPerSecond: 0)))
        hub.send(.removed(id))
        hub.finish()
        #expect(!hub.wantsProgress)
        var kinds: [String] = []
        for await event in stream { kinds.append("\(event)".prefix { $0 != "(" }.description) }
        #expect(kinds == ["started", "removed"])
        var all = 0
        for await _ in watching { all += 1 }
        #expect(all == 3)
    }

    @Test func addingTheSameDownloadTwiceReturnsTheFirst() async throws {
        try await withManager { server, harness, _, manager in
            var stuck = Route(content: testBytes(Self.size, seed: 100))
            stuck.stallAfter = 64 << 10  // still running whatever the machine's load when it is replaced
            server.serve("/f0.bin", stuck)
            server.serve("/f1.bin", Route(content: testBytes(Self.size, seed: 101)))
            let first = try await manager.add(harness.request(server.url("/f0.bin"), file: "x.bin"))
            let again = try await manager.add(harness.request(server.url("/f0.bin"), file: "x.bin"))
            #expect(again == first)
            // The same file from another URL is refused, unless replacing.
            await #expect(throws: DownloadError.self) {
                try await manager.add(harness.request(server.url("/f1.bin"), file: "x.bin"))
            }
            let replacement = try await manager.add(harness.request(server.url("/f1.bin"), file: "x.bin"), replacing: true)
            #expect(replacement != first)
            #expect(await manager.download(first) == nil)
            await manager.waitUntilIdle()
            #expect(await manager.download(replacement)?.status == .completed)
            #expect(digest(harness.directory.contents("x.bin")) == digest(testBytes(Self.size, seed: 101)))
        }
    }

    @Test func aDependantStartsAfterItsDependencyAndFailsWithIt() async throws {
        try await withManager { server, harness, downloader, manager in
            _ = serveFiles(server, count: 2)
            var missing = Route(content: [])
            missing.status = 404
            server.serve("/missing", missing)
            let log = await EventLog.recording(manager)
            let a = try await manager.add(harness.request(server.url("/f0.bin"), file: "a.bin"))
            let b = try await manager.add(harness.request(server.url("/f1.bin"), file: "b.bin"), after: [a])
            let broken = try await manager.add(harness.request(server.url("/missing"), file: "m.bin"))
            let orphan = try await manager.add(harness.request(server.url("/f1.bin"), file: "c.bin"), after: [broken])
            await #expect(throws: DownloadError.self) {
                try await manager.add(harness.request(server.url("/f1.bin"), file: "d.bin"), after: [DownloadID(rawValue: 42)])
            }
            await manager.waitUntilIdle()
            await manager.shutdown()
            await log.ended()
            let order = log.lifecycle()
            let completedA = try #require(order.firstIndex(of: "completed \(a)"))
            let startedB = try #require(order.firstIndex(of: "started \(b)"))
            #expect(completedA < startedB)
            let failed = try #require(await manager.download(orphan))
            #expect(failed.status == .failed)
            #expect(failed.error?.kind == .dependency)
            #expect(failed.error?.message.contains(broken.description) == true)
            #expect(!log.lifecycle(of: orphan).contains("started \(orphan)"))
            // The store remembers why.
            let restored = harness.manager(downloader)
            try await restored.restore()
            #expect(await restored.download(orphan)?.error == failed.error)
            #expect(await restored.download(b)?.status == .completed)
            await restored.shutdown()
        }
    }

    @Test func aRestoredPausedDownloadReportsWhatItsPartialHolds() async throws {
        try await withManager { server, harness, downloader, manager in
            var route = Route(content: testBytes(2 << 20, seed: 6))
            route.bytesPerSecond = 256 << 10  // seconds between the check and the pause, even on a loaded machine
            server.serve("/p.bin", route)
            let id = try await manager.add(harness.request(server.url("/p.bin"), file: "p.bin"))
            #expect(try await waitUntil { fileSize(harness.directory.file("p.bin.part")) > 300_000 })
            await manager.pause(id)
            // A new process (here: a new manager on the same store) shows the paused download's
            // bytes before it runs again, not 0.
            let restored = harness.manager(downloader)
            try await restored.restore()
            let download = try #require(await restored.download(id))
            #expect(download.status == .paused)
            #expect((download.progress?.bytesDone ?? 0) > 300_000)
            #expect(download.progress?.totalBytes == Int64(2 << 20))
            await restored.shutdown()
        }
    }

    @Test func pauseKeepsThePartialAndResumeFinishesIt() async throws {
        try await withManager { server, harness, _, manager in
            var route = Route(content: testBytes(2 << 20, seed: 5))
            route.bytesPerSecond = 512 << 10
            server.serve("/big.bin", route)
            let log = await EventLog.recording(manager)
            let id = try await manager.add(harness.request(server.url("/big.bin"), file: "big.bin"))
            #expect(try await waitUntil { fileSize(harness.directory.file("big.bin.part")) > 300_000 })
            await manager.pause(id)
            #expect(await manager.download(id)?.status == .paused)
            #expect(harness.directory.exists("big.bin.part"))
            await manager.waitUntilIdle()
            await manager.resume(id)
            #expect(try await log.waitFor("completed \(id)"))
            #expect(digest(harness.directory.contents("big.bin")) == digest(route.content))
            #expect(server.stats("/big.bin").bodyBytesSent <= route.content.count + ResumeTests.inFlightAllowance)
            await manager.shutdown()
            await log.ended()
            #expect(log.lifecycle(of: id) == ["added \(id)", "started \(id)", "paused \(id)", "started \(id)", "completed \(id)"])
        }
    }

    @Test func aChangedLimitAppliesAtOnceAndOtherChangesRestartWithTheNewRequest() async throws {
        try await withManager { server, harness, _, manager in
            var route = Route(content: testBytes(4 << 20, seed: 6))
            route.bytesPerSecond = 1 << 20
            server.serve("/big.bin", route)
            let log = await EventLog.recording(manager)
            let id = try await manager.add(harness.request(server.url("/big.bin"), file: "big.bin"))
            #expect(try await waitUntil { fileSize(harness.directory.file("big.bin.part")) > 100_000 })
            // The limit alone: set on the running attempt, which goes on (no pause, no restart).
            try await manager.change(id) { $0.rateLimit = 50 << 10 }
            #expect(await manager.liveRateLimit(id) == 50 << 10)
            #expect(await manager.download(id)?.request.rateLimit == 50 << 10)
            try await manager.change(id) { $0.rateLimit = 80 << 10 }
            #expect(await manager.liveRateLimit(id) == 80 << 10)
            #expect(log.lifecycle(of: id) == ["added \(id)", "started \(id)"])
            // Anything else restarts it, and the restart runs with the change just made (it ran
            // with the one before).
            try await manager.change(id) {
                $0.rateLimit = nil
                $0.maxTries = 7
            }
            #expect(try await waitUntil { log.lifecycle(of: id).count == 4 })
            #expect(log.lifecycle(of: id) == ["added \(id)", "started \(id)", "paused \(id)", "started \(id)"])
            #expect(await manager.liveRateLimit(id) == 0)
            #expect(await manager.download(id)?.request.maxTries == 7)
            #expect(try await log.waitFor("completed \(id)", timeout: .seconds(30)))
            #expect(digest(harness.directory.contents("big.bin")) == digest(route.content))
        }
    }

    @Test func cancelDeletesThePartialAndRemoveForgetsTheDownload() async throws {
        try await withManager { server, harness, _, manager in
            var route = Route(content: testBytes(2 << 20, seed: 6))
            route.bytesPerSecond = 256 << 10
            server.serve("/big.bin", route)
            let log = await EventLog.recording(manager)
            let cancelled = try await manager.add(harness.request(server.url("/big.bin"), file: "c.bin"))
            let removed = try await manager.add(harness.request(server.url("/big.bin"), file: "r.bin"))
            #expect(
                try await waitUntil {
                    fileSize(harness.directory.file("c.bin.part")) > 100_000
                        && fileSize(harness.directory.file("r.bin.part")) > 100_000
                })
            await manager.cancel(cancelled)
            await manager.remove(removed)
            #expect(await manager.download(cancelled)?.error?.kind == .cancelled)
            #expect(await manager.download(removed) == nil)
            #expect(!harness.directory.exists("c.bin.part") && !harness.directory.exists("r.bin.part"))
            await manager.shutdown()
            await log.ended()
            #expect(log.lifecycle(of: removed).last == "removed \(removed)")
            #expect(log.lifecycle(of: cancelled).last == "failed \(cancelled)")
            #expect(log.everyAttemptEndsOnce)
        }
    }

    @Test func aMovedDownloadStartsFirst() async throws {
        try await withManager(maxConcurrent: 1) { server, harness, _, manager in
            _ = serveFiles(server, count: 4, bytesPerSecond: 1 << 20)
            // The first runs for seconds: the others are still waiting when one is moved.
            var first = Route(content: testBytes(Self.size, seed: 100))
            first.bytesPerSecond = 64 << 10
            server.serve("/f0.bin", first)
            let log = await EventLog.recording(manager)
            var ids: [DownloadManager.ID] = []
            for index in 0..<4 {
                ids.append(try await manager.add(harness.request(server.url("/f\(index).bin"), file: "f\(index).bin")))
            }
            // ids[0] is running; of the waiting ids[1...3], move the last to the front.
            #expect(await manager.move(ids[3], to: 0) == 0)
            await manager.waitUntilIdle()
            await manager.shutdown()
            await log.ended()
            let started = log.lifecycle().filter { $0.hasPrefix("started") }
            #expect(started == [ids[0], ids[3], ids[1], ids[2]].map { "started \($0)" })
        }
    }

    @Test func theHostLimitCapsDownloadsToOneServer() async throws {
        try await withManager(maxConcurrent: 5, perHost: 2) { server, harness, _, manager in
            let contents = serveFiles(server, count: 6, bytesPerSecond: 1 << 20)
            let log = await EventLog.recording(manager)
            _ = try await manager.add(
                contentsOf: contents.indices.map {
                    harness.request(server.url("/f\($0).bin"), file: "f\($0).bin")
                })
            await manager.waitUntilIdle()
            #expect(await manager.totals().completed == 6)
            await manager.shutdown()
            await log.ended()
            #expect(server.peakConcurrentBodies == 2)
        }
    }

    /// Segmented downloads take extra connections only while the host has free slots.
    @Test func theHostLimitCountsEveryConnectionOfSegmentedDownloads() async throws {
        try await withManager(maxConcurrent: 5, perHost: 5) { server, harness, _, manager in
            var route = Route(content: testBytes(4 << 20, seed: 9))
            route.bytesPerSecond = 2 << 20
            server.serve("/big.bin", route)
            for name in ["a.bin", "b.bin"] {
                try await manager.add(
                    harness.request(server.url("/big.bin"), file: name) {
                        $0.connections = 8
                        $0.minimumSplitSize = 128 << 10
                    })
            }
            await manager.waitUntilIdle()
            #expect(await manager.totals().completed == 2)
            #expect(digest(harness.directory.contents("a.bin")) == digest(route.content))
            #expect(digest(harness.directory.contents("b.bin")) == digest(route.content))
            #expect(server.peakConcurrentBodies <= 5, "peak \(server.peakConcurrentBodies) connections")
            #expect(server.peakConcurrentBodies >= 3, "segmented downloads still used the free slots")
        }
    }

    /// A segmented download that started while its host's slots were taken runs on one
    /// connection; as the others end, it takes the slots they leave, up to the connections it
    /// asked for (never more than the host's limit at once).
    @Test func aSegmentedDownloadTakesTheSlotsOthersLeave() async throws {
        try await withManager(maxConcurrent: 5, perHost: 4) { server, harness, _, manager in
            var slow = Route(content: testBytes(256 << 10, seed: 11))
            slow.bytesPerSecond = 512 << 10
            server.serve("/slow.bin", slow)
            var big = Route(content: testBytes(8 << 20, seed: 12))
            big.bytesPerSecond = 1 << 20
            server.serve("/big.bin", big)
            for index in 0..<3 {
                try await manager.add(harness.request(server.url("/slow.bin"), file: "s\(index).bin") { $0.connections = 1 })
            }
            try await manager.add(
                harness.request(server.url("/big.bin"), file: "big.bin") {
                    $0.connections = 4
                    $0.minimumSplitSize = 256 << 10
                })
            await manager.waitUntilIdle()
            #expect(await manager.totals().completed == 4)
            #expect(digest(harness.directory.contents("big.bin")) == digest(big.content))
            // It began alone on one plain GET; the connections that joined asked for ranges.
            let ranged = server.stats("/big.bin").requests.filter { $0.header("Range") != nil }
            #expect(ranged.count >= 1, "\(server.stats("/big.bin").requests.map(\.headers))")
            #expect(server.peakConcurrentBodies <= 4, "peak \(server.peakConcurrentBodies) connections")
        }
    }

    /// A new manager on the same store picks up where the last one stopped, as after a crash:
    /// `shutdown()` leaves the rows exactly as a kill would, with the last bytes flushed.
    @Test func aNewManagerRestoresTheQueue() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        var big = Route(content: testBytes(2 << 20, seed: 7))
        big.bytesPerSecond = 512 << 10
        server.serve("/big.bin", big)
        let small = serveFiles(server, count: 3)

        let first = try harness.downloader()
        let before = harness.manager(first, maxConcurrent: 1)
        let done = try await before.add(harness.request(server.url("/f0.bin"), file: "done.bin"))
        await before.waitUntilIdle()
        let running = try await before.add(harness.request(server.url("/big.bin"), file: "big.bin"))
        let queued = try await before.add(harness.request(server.url("/f1.bin"), file: "queued.bin"))
        let paused = try await before.add(harness.request(server.url("/f2.bin"), file: "paused.bin"))
        await before.pause(paused)
        #expect(try await waitUntil { fileSize(harness.directory.file("big.bin.part")) > 500_000 })
        await before.shutdown()
        try await first.shutdown()
        #expect(!harness.directory.exists("queued.bin"))
        let sentBefore = server.stats("/big.bin").bodyBytesSent

        let second = try harness.downloader()
        let after = harness.manager(second, maxConcurrent: 1)
        let log = await EventLog.recording(after)
        try await after.restore()
        await after.waitUntilIdle()
        #expect(await after.download(done)?.status == .completed)
        #expect(await after.download(paused)?.status == .paused)
        #expect(await after.download(running)?.status == .completed)
        #expect(digest(harness.directory.contents("big.bin")) == digest(big.content))
        #expect(digest(harness.directory.contents("queued.bin")) == digest(small[1]))
        #expect(!harness.directory.exists("paused.bin"))
        let refetched = server.stats("/big.bin").bodyBytesSent - sentBefore
        #expect(refetched < big.content.count - 500_000 + ResumeTests.inFlightAllowance, "continued, not restarted")
        await after.shutdown()
        await log.ended()
        #expect(log.lifecycle().filter { $0.hasPrefix("started") } == ["started \(running)", "started \(queued)"])
        try await second.shutdown()
        try await server.shutdown()
    }

    /// What `haul get` relies on when run again: adding a download an earlier process left
    /// unfinished continues that one; another queue on the same store never sees it.
    @Test func addingWhatAnEarlierManagerLeftContinuesIt() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        var big = Route(content: testBytes(2 << 20, seed: 8))
        big.bytesPerSecond = 512 << 10
        server.serve("/big.bin", big)

        let first = try harness.downloader()
        let before = harness.manager(first)
        let id = try await before.add(harness.request(server.url("/big.bin"), file: "big.bin"))
        #expect(try await waitUntil { fileSize(harness.directory.file("big.bin.part")) > 500_000 })
        await before.shutdown()
        try await first.shutdown()

        let second = try harness.downloader()
        let other = DownloadManager(downloader: second, configuration: .init(queue: "other"))
        try await other.restore()
        #expect(await other.downloads().isEmpty)
        let after = harness.manager(second)
        let again = try await after.add(harness.request(server.url("/big.bin"), file: "big.bin"))
        #expect(again == id)
        await after.waitUntilIdle()
        #expect(await after.download(id)?.status == .completed)
        #expect(digest(harness.directory.contents("big.bin")) == digest(big.content))
        // Requeuing a completed download asks the server again (one conditional request) and
        // keeps the file: no body is sent.
        let (requests, sent) = (server.stats("/big.bin").requests.count, server.stats("/big.bin").bodyBytesSent)
        await after.requeue(id)
        await after.waitUntilIdle()
        #expect(await after.download(id)?.result?.wasAlreadyComplete == true)
        #expect(server.stats("/big.bin").bodyBytesSent == sent)
        let asked = server.stats("/big.bin").requests.dropFirst(requests)
        #expect(asked.count == 1 && asked.first?.header("If-None-Match") != nil && asked.first?.status == 304)
        await after.shutdown()
        await other.shutdown()
        try await second.shutdown()
        try await server.shutdown()
    }
}

extension DownloadManager {
    /// The rate limit set on the running attempt of `id` (0: none), if one runs.
    func liveRateLimit(_ id: ID) -> Int64? {
        book.entries[id]?.live?.limiter?.bytesPerSecond
    }
}
