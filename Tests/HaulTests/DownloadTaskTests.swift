import Foundation
import HaulTestSupport
import Testing
@testable import Haul

/// The library surface: progress, pause and resume on one task.
@Suite struct DownloadTaskTests {
    @Test func progressRisesToTheTotalAndEndsWithTheDownload() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        var route = Route(content: testBytes(3 << 20))
        route.bytesPerSecond = 6 << 20
        server.serve("/f.bin", route)
        let downloader = try harness.downloader()
        let task = try await downloader.download(harness.request(server.url("/f.bin"), file: "f.bin"))
        var snapshots: [DownloadProgress] = []
        for await snapshot in task.progress { snapshots.append(snapshot) }
        let result = try await task.result()
        try await downloader.shutdown()
        try await server.shutdown()

        #expect(snapshots.count >= 3)
        #expect(zip(snapshots, snapshots.dropFirst()).allSatisfy { $0.bytesDone <= $1.bytesDone })
        #expect(snapshots.last?.bytesDone == 3 << 20)
        #expect(snapshots.last?.totalBytes == 3 << 20)
        #expect(snapshots.last?.destination == result.path)
        #expect(snapshots.contains { $0.bytesPerSecond > 0 && $0.eta != nil })
    }

    @Test func pauseThenResumeOnTheSameTaskFinishesWithoutRefetching() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        var route = Route(content: testBytes(4 << 20))
        route.bytesPerSecond = 8 << 20
        server.serve("/f.bin", route)
        let downloader = try harness.downloader()
        let task = try await downloader.download(harness.request(server.url("/f.bin"), file: "f.bin"))
        #expect(try await waitUntil { fileSize(harness.directory.file("f.bin.part")) >= 1 << 20 })
        await task.pause()
        #expect(task.isPaused)
        let record = try #require(try await harness.record(for: harness.directory.file("f.bin")))
        #expect(record.status == .paused)
        #expect(
            record.ranges.contiguousPrefix == Int64(fileSize(harness.directory.file("f.bin.part"))),
            "a pause records every byte it wrote")

        task.resume()
        let result = try await task.result()
        let resumedWith = server.stats("/f.bin").requests.last { $0.method == "GET" }?.header("Range")
        try await downloader.shutdown()
        try await server.shutdown()
        #expect(result.bytes == 4 << 20)
        #expect(result.bytesFetched == (4 << 20) - record.ranges.contiguousPrefix)
        #expect(resumedWith == "bytes=\(record.ranges.contiguousPrefix)-")
        #expect(digest(harness.directory.contents("f.bin")) == digest(route.content))
    }
}
