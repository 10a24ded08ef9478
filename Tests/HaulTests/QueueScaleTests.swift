import Foundation
import Testing
@testable import Haul

/// The queue's own cost, without the network: a manager on a store in memory whose attempts
/// finish at once. Counts of work, not times, so a loaded machine cannot make them flaky.
@Suite(.serialized) struct QueueScaleTests {
    func requests(_ count: Int, from start: Int = 0) -> [DownloadRequest] {
        (start..<start + count).map { DownloadRequest(url: "http://h\($0 % 7).example/f\($0).bin", file: "/scale/f\($0).bin") }
    }

    /// Adds `count` downloads in batches and lets them all complete; returns the queue's visits.
    func run(_ count: Int) async throws -> (visits: Int, transactions: Int) {
        let (manager, downloader) = try inMemoryManager()
        await manager.setAttemptRunner { request, _, events in
            await events.transferred()
            return .success(DownloadResult(path: request.destination.path, bytes: 1, bytesFetched: 1, wasAlreadyComplete: false))
        }
        var added = 0
        while added < count {
            let batch = min(10_000, count - added)
            let ids = try await manager.add(contentsOf: requests(batch, from: added))
            #expect(ids.allSatisfy { (try? $0.get()) != nil })
            added += batch
        }
        await manager.waitUntilIdle()
        let totals = await manager.totals()
        #expect(totals.completed == count && totals.queued == 0 && totals.running == 0)
        #expect(await manager.stoppedCount == count)
        let visits = await manager.queueVisits
        await manager.shutdown()
        try await downloader.shutdown()
        return (visits, downloader.store.writer.transactions)
    }

    @Test func addingAndRunningOneHundredThousandCostsTheSamePerDownloadAsTenThousand() async throws {
        // A minute of CPU in a debug build: off the threads the other tests' tasks run on.
        let executor = QueueExecutor("queue-scale")
        let (small, large) = try await withTaskExecutorPreference(executor) {
            (try await run(10_000), try await run(100_000))
        }
        let perSmall = Double(small.visits) / 10_000
        let perLarge = Double(large.visits) / 100_000
        // Linear: the same few index operations per download, whatever the queue's length
        // (a quadratic queue would touch ~50,000 entries per download at 100,000).
        #expect(perLarge < 20, "\(perLarge) visits per download")
        #expect(perLarge <= perSmall * 1.2, "\(perSmall) → \(perLarge) visits per download")
        // Group commits: far fewer transactions than the ~4 changes each download makes.
        #expect(large.transactions < 100_000 / 10, "\(large.transactions) transactions for 100,000 downloads")
    }

    @Test func pagesComeFromTheIndex() async throws {
        let (manager, downloader) = try inMemoryManager()
        _ = try await manager.add(contentsOf: requests(20_000), paused: true)
        let before = await manager.queueVisits
        let page = await manager.waiting(from: 10_000, limit: 100)
        #expect(page.count == 100)
        #expect(page.first?.url == "http://h\(10_000 % 7).example/f10000.bin")
        // Moving and finding one download touches a handful of entries, not the queue.
        let id = try #require(page.last?.id)
        #expect(await manager.move(id, to: 10) == 10)
        #expect(await manager.waitingPosition(of: id) == 10)
        await manager.resume(id)
        #expect(await manager.queueVisits - before < 100)
        await manager.shutdown()
        try await downloader.shutdown()
    }

    @Test func aHostAtItsLimitSetsItsDownloadsAsideWithoutRescanning() async throws {
        let (manager, downloader) = try inMemoryManager(maxConcurrent: 8, perHost: 2)
        let gate = Gate()
        await manager.setAttemptRunner { request, _, _ in
            await gate.wait()
            return .success(DownloadResult(path: request.destination.path, bytes: 1, bytesFetched: 1, wasAlreadyComplete: false))
        }
        // 1000 downloads from one host and 10 from another: the second host's start at once.
        var list = (0..<1000).map { DownloadRequest(url: "http://busy.example/f\($0)", file: "/scale/b\($0)") }
        list += (0..<10).map { DownloadRequest(url: "http://quiet.example/f\($0)", file: "/scale/q\($0)") }
        _ = try await manager.add(contentsOf: list)
        let active = await manager.active()
        #expect(active.count == 4)
        #expect(Set(active.map { URLComponents(string: $0.url)?.host }) == ["busy.example", "quiet.example"])
        await gate.open()
        await manager.waitUntilIdle()
        #expect(await manager.totals().completed == 1010)
        #expect(await manager.queueVisits < 1010 * 20)
        await manager.shutdown()
        try await downloader.shutdown()
    }
}

/// Holds every waiter until opened.
actor Gate {
    private var isOpen = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func wait() async {
        guard !isOpen else { return }
        await withCheckedContinuation { waiters.append($0) }
    }

    func open() {
        isOpen = true
        for waiter in waiters { waiter.resume() }
        waiters = []
    }
}
