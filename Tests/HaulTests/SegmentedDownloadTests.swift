import Foundation
import HaulTestSupport
import Testing
@testable import Haul

/// Several connections per download: the result is byte-identical to one stream, whatever
/// the server does.
@Suite struct SegmentedDownloadTests {
    static let size = 6 << 20

    func run(
        connections: Int, _ configure: (inout Route) -> Void = { _ in }
    ) async throws
        -> (result: DownloadResult, got: [UInt8]?, expected: [UInt8], stats: RouteStats)
    {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        var route = Route(content: testBytes(Self.size, seed: 8))
        configure(&route)
        server.serve("/f.bin", route)
        let result = try await harness.download(
            harness.request(server.url("/f.bin"), file: "f.bin") {
                $0.connections = connections
                $0.minimumSplitSize = 256 << 10
            }
        ).get()
        let stats = server.stats("/f.bin")
        let got = harness.directory.contents("f.bin")
        try await server.shutdown()
        return (result, got, route.contentAfterFirstGet ?? route.content, stats)
    }

    @Test func eightConnectionsGiveTheSameBytesAsOne() async throws {
        let one = try await run(connections: 1)
        let eight = try await run(connections: 8) { $0.bytesPerSecond = 16 << 20 }
        #expect(digest(eight.got) == digest(one.got))
        #expect(digest(eight.got) == digest(eight.expected))
        // The first GET's body feeds the first segment; the other seven ask for ranges.
        let ranged = eight.stats.requests.filter { $0.method == "GET" && $0.status == 206 }
        let plain = eight.stats.requests.filter { $0.method == "GET" && $0.status == 200 }
        #expect(ranged.count >= 7 && plain.count == 1, "every connection fetched a segment")
        #expect(eight.stats.bodyBytesSent <= Self.size + 8 * ResumeTests.inFlightAllowance)
    }

    /// The first contact's answer is the whole file and feeds the first segment: once that
    /// segment is written, the rest of the answer is not waited for. Here the server sends
    /// nothing more on it and the stall timeout is an hour; a server that throttles sends the
    /// next bytes when its next second's allowance opens, which cost throttled downloads up to
    /// a second each.
    @Test func theFirstAnswerIsLeftWhenItsSegmentIsWritten() async throws {
        let content = testBytes(Self.size, seed: 8)
        let server = try await FaultServer.start()
        var harness = try Harness()
        harness.stallTimeout = .seconds(3600)
        defer { harness.remove() }
        var route = Route(content: content)
        route.stallFirstAfter = Self.size / 2
        server.serve("/f.bin", route)
        let downloader = try harness.downloader()
        // Two connections cut the file in halves, too small to split again: the first answer
        // stops where its half does.
        let task = try await downloader.download(
            harness.request(server.url("/f.bin"), file: "f.bin") {
                $0.connections = 2
                $0.minimumSplitSize = Int64(Self.size) / 4 + 1
            })
        // Waiting for the stall timeout would take an hour: the test gives up long before.
        let watchdog = Task {
            try await Task.sleep(for: .seconds(30))
            task.cancel()
        }
        let result: Result<DownloadResult, DownloadError>
        do throws(DownloadError) { result = .success(try await task.result()) } catch { result = .failure(error) }
        watchdog.cancel()
        try await downloader.shutdown()
        try await server.shutdown()
        #expect(throws: Never.self) { try result.get() }
        #expect(digest(harness.directory.contents("f.bin")) == digest(content))
        #expect(server.stats("/f.bin").requests.filter { $0.method == "GET" }.map(\.status).sorted() == [200, 206])
    }

    @Test func aServerThatIgnoresRangesFallsBackToOneStream() async throws {
        let outcome = try await run(connections: 4) { $0.honoursRange = false }
        #expect(digest(outcome.got) == digest(outcome.expected))
    }

    /// Ranges work for the first requests, then the server (a new backend behind a load
    /// balancer, say) answers with the whole file: the first connection to come back for more
    /// (here, the one whose first answer is cut) finds out, and one stream finishes the file.
    @Test func aServerThatStopsHonouringRangesOnLaterRequestsFallsBack() async throws {
        let outcome = try await run(connections: 8) {
            $0.honoursRangeForFirstGets = 8
            $0.cutFirstAfter = 100_000
            $0.bytesPerSecond = 8 << 20
        }
        #expect(digest(outcome.got) == digest(outcome.expected))
        let gets = outcome.stats.requests.filter { $0.method == "GET" }
        #expect(gets.contains { $0.status == 206 } && gets.contains { $0.status == 200 })
    }

    @Test func droppedConnectionsRetryTheirOwnSegment() async throws {
        let outcome = try await run(connections: 4) { $0.cutAfter = 700_000 }
        #expect(digest(outcome.got) == digest(outcome.expected))
    }

    @Test func aWrongContentRangeIsNeverWritten() async throws {
        let outcome = try await run(connections: 4) { $0.wrongContentRange = true }
        #expect(digest(outcome.got) == digest(outcome.expected))
    }

    @Test func aFileThatChangesMidwayEndsAsTheNewFile() async throws {
        let outcome = try await run(connections: 4) {
            $0.contentAfterFirstGet = testBytes(Self.size, seed: 9)
            $0.bytesPerSecond = 16 << 20
        }
        #expect(digest(outcome.got) == digest(outcome.expected))
    }

    @Test func aChecksumIsVerifiedOverOutOfOrderBytes() async throws {
        let content = testBytes(Self.size, seed: 8)
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        server.serve("/f.bin", Route(content: content))
        let good = try Checksum(parsing: "sha-256=" + sha256Hex(content))
        let bad = try Checksum(parsing: "sha-256=" + String(repeating: "1", count: 64))
        let ok = try await harness.download(
            harness.request(server.url("/f.bin"), file: "good.bin") {
                $0.connections = 4; $0.minimumSplitSize = 256 << 10; $0.checksum = good
            })
        let mismatch = try await harness.download(
            harness.request(server.url("/f.bin"), file: "bad.bin") {
                $0.connections = 4; $0.minimumSplitSize = 256 << 10; $0.checksum = bad
            })
        try await server.shutdown()
        #expect(throws: Never.self) { try ok.get() }
        guard case .failure(let error) = mismatch else { Issue.record("mismatch must fail"); return }
        #expect(error.kind == .checksum)
        #expect(!harness.directory.exists("bad.bin"))
    }
}
