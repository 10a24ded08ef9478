import Foundation
import HaulTestSupport
import Testing
@testable import Haul

/// Uploads in a ``DownloadManager``: queued with the downloads under one `-j`, by priority,
/// paused and resumed from the server's offset, kept in the store across a restart. Against
/// Apple's NIOResumableUpload (``ResumableUploadTestServer``), which keeps every byte it reads,
/// so its count of received bytes shows any byte sent twice.
@Suite(.serialized)
struct ManagedUploadTests {
    /// The draft's suite's folder and server, with a manager on top.
    typealias Fixture = ResumableUploadTests.Fixture

    /// Polls the manager until `condition` holds for upload `id`, at most 20 s.
    static func waitFor(
        _ id: DownloadManager.ID, in manager: DownloadManager, _ condition: (DownloadManager.Upload) -> Bool
    ) async throws -> DownloadManager.Upload {
        let deadline = ContinuousClock.now + .seconds(20)
        while true {
            if let upload = await manager.upload(id), condition(upload) { return upload }
            guard ContinuousClock.now < deadline else {
                Issue.record("timed out; the upload is \(String(describing: await manager.upload(id)))")
                throw DownloadError.cancelled
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// The most uploads and downloads between their start and their end at once, from events.
    static func peakRunning(_ events: [DownloadManager.Event]) -> Int {
        var running = Set<DownloadManager.ID>()
        var peak = 0
        for event in events {
            switch event {
            case .started(let id), .upload(let id, .started): running.insert(id)
            default: if event.isTerminal { running.remove(event.id) }
            }
            peak = max(peak, running.count)
        }
        return peak
    }

    @Test func uploadsShareTheManagersLimitAndStartByPriority() async throws {
        let t = try await Fixture()
        let (first, firstContent) = try t.request("first.bin", size: 3 << 20, seed: 61, rateLimit: 8 << 20)
        let (low, lowContent) = try t.request("low.bin", size: 1 << 20, seed: 62)
        let (high, highContent) = try t.request("high.bin", size: 1 << 20, seed: 63)
        // A download queued first holds the only slot for a while.
        let files = try await FaultServer.start()
        let downloadContent = testBytes(1 << 20, seed: 60)
        var route = Route(content: downloadContent)
        route.bytesPerSecond = 512 << 10
        files.serve("/d.bin", route)
        let ((download, ids, uploads), events) = try await t.withManager(maxConcurrent: 1) { manager in
            let download = try await manager.add(DownloadRequest(url: files.url("/d.bin"), file: t.dir.file("d.bin")))
            let ids = [
                try await manager.addUpload(first), try await manager.addUpload(low),
                try await manager.addUpload(high, priority: 5),
            ]
            await manager.waitUntilIdle()
            return (download, ids, await manager.uploads())
        }
        try await files.shutdown()
        let downloaded = try [UInt8](Data(contentsOf: URL(fileURLWithPath: t.dir.file("d.bin"))))
        let received = t.server.received()
        let stored = (t.stored("first.bin"), t.stored("low.bin"), t.stored("high.bin"))
        await t.remove()

        // A download stops counting once its bytes are in (it puts its file in place), so only
        // the uploads' own overlap is certain to be none.
        #expect(Self.peakRunning(events.filter { if case .upload = $0 { true } else { false } }) == 1, "-j 1 holds for uploads")
        #expect(downloaded == downloadContent)
        #expect(events.first { if case .started = $0 { true } else { false } }?.id == download, "the download went first")
        let started = events.compactMap { event -> DownloadManager.ID? in
            if case .upload(let id, .started) = event { return id }
            return nil
        }
        #expect(started == [ids[2], ids[0], ids[1]], "once the download's slot was free, the higher priority went first")
        #expect(uploads.map(\.status) == [.completed, .completed, .completed])
        #expect(uploads.map(\.id) == started, "finished ones listed in the order they ended")
        #expect(uploads.allSatisfy { $0.result?.protocol == .ietf })
        #expect(digest(stored.0) == digest(firstContent))
        #expect(digest(stored.1) == digest(lowContent))
        #expect(digest(stored.2) == digest(highContent))
        #expect(received.creations == 3)
    }

    @Test func aPausedUploadResumesFromTheServersOffset() async throws {
        let t = try await Fixture()
        let size = 24 << 20
        let (request, content) = try t.request("p.bin", size: size, seed: 64, rateLimit: 16 << 20)
        let ((paused, done), events) = try await t.withManager { manager in
            let id = try await manager.addUpload(request)
            _ = try await Self.waitFor(id, in: manager) { ($0.progress?.bytesSent ?? 0) >= 10 << 20 }
            await manager.pause(id)
            let paused = await manager.upload(id)
            await manager.resume(id)
            await manager.waitUntilIdle()
            return (paused, await manager.upload(id))
        }
        let received = t.server.received()
        let stored = t.stored("p.bin")
        await t.remove()

        #expect(paused?.status == .paused)
        #expect(done?.status == .completed)
        #expect((done?.result?.bytesSent ?? .max) <= Int64(size) - (8 << 20), "the second attempt sent only the rest")
        #expect(received.creations == 1, "the same upload went on")
        #expect(received.bytes == Int64(size), "no byte sent twice: \(received.bytes)")
        #expect(digest(stored) == digest(content))
        let id = done?.id.description ?? ""
        #expect(
            Fixture.lifecycle(events) == [
                "upload added \(id)", "upload started \(id)", "upload paused \(id)", "upload started \(id)", "upload completed \(id)",
            ])
    }

    @Test func anUploadRunningWhenTheManagerStoppedContinuesAfterRestore() async throws {
        let t = try await Fixture()
        let size = 24 << 20
        var (request, content) = try t.request("r.bin", size: size, seed: 65, rateLimit: 16 << 20)
        request.headers = [DownloadRequest.Header(name: "Authorization", value: "Bearer sekrit")]
        let (id, _) = try await t.withManager { manager in
            let id = try await manager.addUpload(request, priority: 3)
            _ = try await Self.waitFor(id, in: manager) { ($0.progress?.bytesSent ?? 0) >= 10 << 20 }
            return id
        }
        let before = await settled({ t.server.received() }, bytes: \.bytes)
        let rows = try await Store(directory: t.state).uploadJobs(queue: "default").jobs
        let ((restored, done), _) = try await t.withManager { manager in
            try await manager.restore()
            let restored = await manager.upload(id)
            await manager.waitUntilIdle()
            return (restored, await manager.upload(id))
        }
        let rowsAfter = try await Store(directory: t.state).uploadJobs(queue: "default").jobs
        let received = t.server.received()
        let stored = t.stored("r.bin")
        await t.remove()

        #expect(rows.map(\.status) == [.running], "left as a crash would leave it")
        #expect(rows.first?.request.headers.count == 1, "an unfinished upload keeps what its next attempt needs")
        #expect(restored?.priority == 3)
        #expect(restored.map { [.queued, .running].contains($0.status) } == true)
        #expect(done?.status == .completed)
        #expect(before.bytes >= 10 << 20)
        #expect(received.creations == 1, "the restored upload went on")
        #expect(received.bytes == Int64(size), "no byte sent twice: \(received.bytes)")
        #expect(digest(stored) == digest(content))
        #expect(rowsAfter.map(\.status) == [.completed])
        #expect(rowsAfter.first?.request.headers == [], "a finished upload keeps no secrets")
    }

    @Test func aCancelledUploadIsListedAsCancelledAndARemovedOneIsForgotten() async throws {
        let t = try await Fixture()
        let (slow, _) = try t.request("slow.bin", size: 16 << 20, seed: 66, rateLimit: 4 << 20)
        let (queued, _) = try t.request("queued.bin", size: 1 << 10, seed: 67)
        let ((cancelled, removed), events) = try await t.withManager(maxConcurrent: 1) { manager in
            let running = try await manager.addUpload(slow)
            let waiting = try await manager.addUpload(queued, paused: true)
            _ = try await Self.waitFor(running, in: manager) { ($0.progress?.bytesSent ?? 0) > 0 }
            await manager.cancel(running)
            await manager.remove(waiting)
            return (await manager.upload(running), await manager.upload(waiting))
        }
        // Read once the manager has shut down, which waits for its records.
        let rows = try await Store(directory: t.state).uploadJobs(queue: "default").jobs
        await t.remove()

        #expect(cancelled?.status == .failed)
        #expect(cancelled?.error?.kind == .cancelled)
        #expect(removed == nil)
        #expect(rows.map(\.status) == [.failed], "the removed one is gone from the store too")
        #expect(Fixture.lifecycle(events).filter { $0.hasPrefix("upload removed") }.count == 1)
    }

    @Test func addingTheSameFileForTheSameURLGivesTheUploadThereIs() async throws {
        let t = try await Fixture()
        let (request, _) = try t.request("same.bin", size: 1 << 10, seed: 68)
        let ((first, again, afterDone, count), _) = try await t.withManager { manager in
            let first = try await manager.addUpload(request, paused: true)
            let again = try await manager.addUpload(request)
            await manager.resume(first)
            await manager.waitUntilIdle()
            let afterDone = try await manager.addUpload(request)
            await manager.waitUntilIdle()
            return (first, again, afterDone, await manager.uploads().count)
        }
        let received = t.server.received()
        await t.remove()

        #expect(first == again)
        #expect(first == afterDone, "a finished one is queued again under its id")
        #expect(count == 1)
        #expect(received.creations == 2, "sent again once finished")
    }

    @Test func aBadUploadRequestIsRefusedBeforeItIsQueued() async throws {
        let t = try await Fixture()
        let (refused, _) = try await t.withManager { manager in
            do {
                try await manager.addUpload(UploadRequest(file: t.dir.file("x"), url: "ftp://example.com/x"))
                return nil as DownloadError?
            } catch let error as DownloadError {
                return error
            }
        }
        await t.remove()
        #expect(refused?.kind == .invalidRequest)
    }

    @Test func pausingEverythingStartsNoQueuedUploadOnTheWay() async throws {
        let t = try await Fixture()
        let (running, _) = try t.request("running.bin", size: 16 << 20, seed: 69, rateLimit: 4 << 20)
        let (waiting, _) = try t.request("waiting.bin", size: 1 << 10, seed: 70)
        let ((first, second, statuses), events) = try await t.withManager(maxConcurrent: 1) { manager in
            let first = try await manager.addUpload(running)
            let second = try await manager.addUpload(waiting)
            _ = try await Self.waitFor(first, in: manager) { ($0.progress?.bytesSent ?? 0) > 0 }
            await manager.pauseAll()
            return (first, second, await manager.uploads().map(\.status))
        }
        await t.remove()

        #expect(statuses == [.paused, .paused])
        #expect(Fixture.lifecycle(events, of: first) == ["upload added \(first)", "upload started \(first)", "upload paused \(first)"])
        #expect(Fixture.lifecycle(events, of: second) == ["upload added \(second)", "upload paused \(second)"], "never started")
    }

    @Test func anUploadTakesTheSlotAHigherDownloadSetAsideForItsHostLeft() async throws {
        let t = try await Fixture()
        // Slots are counted by host name, not port: the short download and the upload go to
        // `localhost`, the others to `127.0.0.1`.
        var (request, content) = try t.request("u.bin", size: 1 << 10, seed: 75)
        request.url = request.url.replacingOccurrences(of: "127.0.0.1", with: "localhost")
        let (x, y) = (try await FaultServer.start(), try await FaultServer.start())
        var long = Route(content: testBytes(1 << 20, seed: 76))
        long.bytesPerSecond = 256 << 10
        x.serve("/long.bin", long)
        x.serve("/high.bin", Route(content: testBytes(1 << 10, seed: 77)))
        var short = Route(content: testBytes(256 << 10, seed: 78))
        short.bytesPerSecond = 1 << 20
        y.serve("/short.bin", short)
        let ((longID, uploadID), events) = try await t.withManager(maxConcurrent: 2, perHost: 1) { manager in
            // Two downloads fill -j; the upload and a download of a higher priority, for the host
            // the long one holds, wait. When the short one ends, the high one cannot start (its
            // host is full) and the upload takes the slot, long before the long one ends.
            let longID = try await manager.add(DownloadRequest(url: x.url("/long.bin"), file: t.dir.file("long.bin")))
            let shortURL = y.url("/short.bin").replacingOccurrences(of: "127.0.0.1", with: "localhost")
            _ = try await manager.add(DownloadRequest(url: shortURL, file: t.dir.file("short.bin")))
            let uploadID = try await manager.addUpload(request)
            _ = try await manager.add(DownloadRequest(url: x.url("/high.bin"), file: t.dir.file("high.bin")), priority: 5)
            await manager.waitUntilIdle()
            return (longID, uploadID)
        }
        try await x.shutdown()
        try await y.shutdown()
        let stored = t.stored("u.bin")
        await t.remove()

        let ends = events.compactMap { event -> DownloadManager.ID? in
            switch event {
            case .completed(let id, _), .upload(let id, .completed): id
            default: nil
            }
        }
        #expect(digest(stored) == digest(content))
        #expect(
            (ends.firstIndex(of: uploadID) ?? .max) < (ends.firstIndex(of: longID) ?? -1), "the upload ended before the long download")
    }
}

/// Requests to the draft's server, and a manager on top of its folder.
extension ResumableUploadTests.Fixture {
    /// A file of `size` bytes named `name` in the folder, and its request to the server.
    func request(_ name: String, size: Int, seed: UInt64, rateLimit: Int64? = nil) throws -> (UploadRequest, [UInt8]) {
        let content = testBytes(size, seed: seed)
        try dir.write(name, content)
        var request = UploadRequest(file: dir.file(name), url: server.url(name))
        request.protocol = .ietf
        request.rateLimit = rateLimit
        request.retryWait = .milliseconds(50)
        return (request, content)
    }

    /// Runs `body` with a manager on the folder's store, shutting both down afterwards;
    /// what it returned, and every event the manager sent.
    func withManager<T>(
        maxConcurrent: Int = 5, perHost: Int = 16, _ body: (DownloadManager) async throws -> T
    ) async throws -> (T, [DownloadManager.Event]) {
        var configuration = Downloader.Configuration(stateDirectory: state)
        configuration.stallTimeout = .seconds(10)
        let downloader = try Downloader(configuration)
        let manager = DownloadManager(
            downloader: downloader, configuration: .init(maxConcurrentDownloads: maxConcurrent, maxConnectionsPerHost: perHost))
        let log = await EventLog.recording(manager)
        do {
            let value = try await body(manager)
            await manager.shutdown()
            try await downloader.shutdown()
            await log.ended()
            return (value, log.events)
        } catch {
            await manager.shutdown()
            try? await downloader.shutdown()
            throw error
        }
    }

    /// Events other than progress, as "kind id" strings.
    static func lifecycle(_ events: [DownloadManager.Event], of id: DownloadManager.ID? = nil) -> [String] {
        events.compactMap { event -> String? in
            guard id == nil || event.id == id, case .upload(let id, let kind) = event else { return nil }
            return "upload \(String(describing: kind).prefix { $0 != "(" }) \(id)"
        }
    }
}
