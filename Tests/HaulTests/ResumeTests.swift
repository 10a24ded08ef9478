import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HaulTestSupport
import Testing
@testable import Haul

/// The resume contract end to end: every interruption ends in the right bytes, and a
/// continuation fetches only what was missing.
@Suite struct ResumeTests {
    static let size = 4 << 20
    /// Bytes a dropped connection may cost twice: AsyncHTTPClient drops the read it had not yet
    /// handed over when the connection fails, and reads are up to 1 MiB
    /// (`HTTPTransport.receiveAllocator`).
    /// (The cut points below are past this allowance, so a restart from zero could not pass.)
    static let inFlightAllowance = (1 << 20) + (64 << 10)

    func run(
        _ configure: (inout Route) -> Void, _ request: (inout DownloadRequest) -> Void = { _ in },
        stallTimeout: Duration = .seconds(5)
    ) async throws -> (result: Result<DownloadResult, DownloadError>, expected: [UInt8], sent: Int, got: [UInt8]?, gets: Int) {
        let server = try await FaultServer.start()
        var harness = try Harness()
        harness.stallTimeout = stallTimeout
        defer { harness.remove() }
        var route = Route(content: testBytes(Self.size))
        configure(&route)
        server.serve("/f.bin", route)
        let result = try await harness.download(harness.request(server.url("/f.bin"), file: "f.bin", request))
        let stats = server.stats("/f.bin")
        let expected = route.contentAfterFirstGet ?? route.content
        let got = harness.directory.contents("f.bin")
        try await server.shutdown()
        return (result, expected, stats.bodyBytesSent, got, stats.getCount)
    }

    @Test func aDroppedConnectionContinuesWhereItStopped() async throws {
        let outcome = try await run { $0.cutFirstAfter = 1_500_000 }
        _ = try outcome.result.get()
        #expect(digest(outcome.got) == digest(outcome.expected))
        // Only what was in flight when the connection dropped is fetched again.
        #expect(outcome.sent <= Self.size + Self.inFlightAllowance, "sent \(outcome.sent)")
        #expect(outcome.gets == 2)
    }

    @Test func aServerThatDropsEveryResponseStillGetsThereBecauseProgressResetsTries() async throws {
        let outcome = try await run({ $0.cutAfter = 300_000 }, { $0.maxTries = 2 })
        _ = try outcome.result.get()
        #expect(digest(outcome.got) == digest(outcome.expected))
    }

    @Test func aStallIsRetriedFromWhereItWas() async throws {
        // Three seconds, not one: AsyncHTTPClient's read timeout also runs while the engine is
        // busy with what it has (a checkpoint's fsync on a loaded machine), and what it had not
        // taken yet is dropped with the connection.
        let outcome = try await run({ $0.stallFirstAfter = 1_500_000 }, stallTimeout: .seconds(3))
        _ = try outcome.result.get()
        #expect(digest(outcome.got) == digest(outcome.expected))
        // Each abandoned connection (the stall, and any a loaded machine times out) costs at most one read.
        #expect(outcome.sent <= Self.size + (outcome.gets - 1) * Self.inFlightAllowance, "sent \(outcome.sent)")
    }

    @Test func aServerThatIgnoresRangesGetsAFullRestartNeverAnAppend() async throws {
        let outcome = try await run {
            $0.cutFirstAfter = 600_000
            $0.honoursRange = false
        }
        _ = try outcome.result.get()
        #expect(digest(outcome.got) == digest(outcome.expected))
    }

    @Test(arguments: [false, true])
    func aFileThatChangesBetweenRequestsIsFetchedAnew(sameSize: Bool) async throws {
        let outcome = try await run {
            $0.cutFirstAfter = 600_000
            $0.contentAfterFirstGet = testBytes(sameSize ? Self.size : Self.size + 12345, seed: 99)
        }
        _ = try outcome.result.get()
        #expect(digest(outcome.got) == digest(outcome.expected))
    }

    @Test func aFileThatChangesIsCaughtEvenWhenTheServerIgnoresIfRange() async throws {
        let outcome = try await run {
            $0.cutFirstAfter = 600_000
            $0.honoursIfRange = false
            $0.contentAfterFirstGet = testBytes(Self.size, seed: 5)
        }
        _ = try outcome.result.get()
        #expect(digest(outcome.got) == digest(outcome.expected))
    }

    @Test func a206ForOtherBytesIsNeverWrittenAndFallsBackToAFullDownload() async throws {
        let outcome = try await run {
            $0.cutFirstAfter = 600_000
            $0.wrongContentRange = true
        }
        _ = try outcome.result.get()
        #expect(digest(outcome.got) == digest(outcome.expected))
    }

    @Test func unknownLengthWithoutRangeSupportStartsOver() async throws {
        let outcome = try await run {
            $0.chunked = true
            $0.cutFirstAfter = 600_000
        }
        _ = try outcome.result.get()
        #expect(digest(outcome.got) == digest(outcome.expected))
    }
}

/// A partial and a record already on disk from an earlier run.
@Suite struct ContinuationTests {
    /// Leaves `f.bin.part` and its record as a paused run would, holding `bytes` bytes.
    func interruptedRun(_ harness: Harness, server: FaultServer, bytes: Int) async throws {
        server.update("/f.bin") { $0.stallFirstAfter = bytes }
        var patient = harness
        patient.stallTimeout = .seconds(30)  // the stall is the pause point, not a failure
        let downloader = try patient.downloader()
        let task = try await downloader.download(harness.request(server.url("/f.bin"), file: "f.bin"))
        #expect(try await waitUntil { fileSize(harness.directory.file("f.bin.part")) >= bytes })
        await task.pause()
        #expect(task.isPaused)
        try await downloader.shutdown()
        server.update("/f.bin") { $0.stallFirstAfter = nil }
    }

    @Test func pauseKeepsThePartialAndAResumeFetchesOnlyTheRest() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        let content = testBytes(3 << 20)
        server.serve("/f.bin", Route(content: content))
        try await interruptedRun(harness, server: server, bytes: 1 << 20)
        #expect(harness.directory.exists("f.bin.part"))
        let sentBefore = server.stats("/f.bin").bodyBytesSent
        let record = try #require(try await harness.record(for: harness.directory.file("f.bin")))
        #expect(record.status == .paused)

        _ = try await harness.download(harness.request(server.url("/f.bin"), file: "f.bin")).get()
        let sentAfter = server.stats("/f.bin").bodyBytesSent
        let lastRange = server.stats("/f.bin").requests.last { $0.method == "GET" }?.header("Range")
        try await server.shutdown()

        #expect(digest(harness.directory.contents("f.bin")) == digest(content))
        #expect(sentAfter - sentBefore == content.count - Int(record.ranges.contiguousPrefix))
        #expect(lastRange == "bytes=\(record.ranges.contiguousPrefix)-")
    }

    @Test func aPartialBiggerThanTheRemoteStartsOver() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        let content = testBytes(3 << 20)
        server.serve("/f.bin", Route(content: content))
        try await interruptedRun(harness, server: server, bytes: 1 << 20)
        let smaller = testBytes(500_000, seed: 3)
        server.update("/f.bin") { $0.content = smaller }

        _ = try await harness.download(harness.request(server.url("/f.bin"), file: "f.bin")).get()
        try await server.shutdown()
        #expect(digest(harness.directory.contents("f.bin")) == digest(smaller))
    }

    @Test func everythingAlreadyInThePartialIsConfirmedWith416AndFinished() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        let content = testBytes(1 << 20)
        server.serve("/f.bin", Route(content: content))
        // A record claiming every byte, as after a crash between the last write and the rename.
        try harness.directory.write("f.bin.part", content)
        let store = try Store(directory: harness.stateDirectory)
        let etag = try await probeETag(server.url("/f.bin"))
        var row = DownloadRow(id: .next(), queue: nil, request: DownloadRequest(url: server.url("/f.bin"), file: harness.directory.file("f.bin")))
        row.status = .running
        row.path = harness.directory.file("f.bin")
        row.totalLength = Int64(content.count)
        row.validators = Validators(etag: etag)
        row.acceptsRanges = true
        row.ranges = ByteRanges([0..<Int64(content.count)])
        store.writer.insert(row)
        try await store.flush()

        _ = try await harness.download(harness.request(server.url("/f.bin"), file: "f.bin")).get()
        let sent = server.stats("/f.bin").bodyBytesSent
        try await server.shutdown()
        #expect(digest(harness.directory.contents("f.bin")) == digest(content))
        #expect(sent == 0)
    }

    @Test func cancelRemovesThePartialAndTheRecord() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        var route = Route(content: testBytes(2 << 20))
        route.stallAfter = 1 << 20
        server.serve("/f.bin", route)
        let downloader = try harness.downloader()
        let task = try await downloader.download(harness.request(server.url("/f.bin"), file: "f.bin"))
        #expect(try await waitUntil { fileSize(harness.directory.file("f.bin.part")) >= 1 << 20 })
        task.cancel()
        await #expect(throws: DownloadError.self) { try await task.result() }
        try await downloader.shutdown()
        try await server.shutdown()
        #expect(!harness.directory.exists("f.bin.part"))
        #expect(!harness.directory.exists("f.bin"))
        #expect(try await harness.record(for: harness.directory.file("f.bin")) == nil)
    }

    @Test func aResumeTokenLetsAnotherStoreContinue() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        let content = testBytes(3 << 20)
        server.serve("/f.bin", Route(content: content))
        try await interruptedRun(harness, server: server, bytes: 1 << 20)
        let record = try #require(try await harness.record(for: harness.directory.file("f.bin")))
        let token = try JSONDecoder().decode(ResumeToken.self, from: JSONEncoder().encode(ResumeToken(record)))
        let sentBefore = server.stats("/f.bin").bodyBytesSent

        // Another process: its own state folder, only the token and the part file.
        var configuration = Downloader.Configuration(stateDirectory: harness.directory.file("other-state"))
        configuration.clock = harness.clock
        let other = try Downloader(configuration)
        let task = try await other.download(resuming: token)
        _ = try await task.result()
        try await other.shutdown()
        let sentAfter = server.stats("/f.bin").bodyBytesSent
        try await server.shutdown()

        #expect(digest(harness.directory.contents("f.bin")) == digest(content))
        #expect(sentAfter - sentBefore == content.count - Int(token.ranges.contiguousPrefix))
    }

    @Test func twoWritersOfOneDestinationTakeTurnsAndTheFileIsRight() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        var route = Route(content: testBytes(2 << 20))
        route.bytesPerSecond = 8 << 20
        server.serve("/f.bin", route)
        let downloader = try harness.downloader()
        let first = try await downloader.download(harness.request(server.url("/f.bin"), file: "f.bin"))
        let second = try await downloader.download(harness.request(server.url("/f.bin"), file: "f.bin"))
        let a = try await first.result()
        let b = try await second.result()
        try await downloader.shutdown()
        try await server.shutdown()
        #expect(digest(harness.directory.contents("f.bin")) == digest(route.content))
        #expect(a.path == b.path)
        #expect(a.wasAlreadyComplete != b.wasAlreadyComplete)
    }
}

/// The ETag the fault server gives a path, read with a plain HEAD.
func probeETag(_ url: String) async throws -> String? {
    var request = URLRequest(url: URL(string: url)!)
    request.httpMethod = "HEAD"
    let (_, response) = try await URLSession.shared.data(for: request)
    return (response as? HTTPURLResponse)?.value(forHTTPHeaderField: "ETag")
}
