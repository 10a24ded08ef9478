import Foundation
import HaulTestSupport
import Testing
@testable import Haul

@Suite struct RateLimitTests {
    @Test func reservationsAreFIFOAndAnIdleLimiterBanksNothing() async throws {
        let clock = RecordingClock()
        let limiter = RateLimiter(bytesPerSecond: 1000, clock: clock)
        try await limiter.acquire(500)  // free: the limiter was idle
        try await limiter.acquire(500)  // waits for the first 500
        #expect(clock.sleeps.count == 1)
        #expect(clock.totalSlept > .milliseconds(490) && clock.totalSlept <= .milliseconds(500))
    }

    @Test(arguments: [(1, false), (4, false), (4, true)])
    func aDownloadIsHeldToTheLimit(connections: Int, perDownload: Bool) async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        let size = 3 << 20
        server.serve("/f.bin", Route(content: testBytes(size)))
        var configuration = Downloader.Configuration(stateDirectory: harness.stateDirectory)
        configuration.clock = harness.clock
        configuration.rateLimit = perDownload ? nil : 1 << 20
        let downloader = try Downloader(configuration)
        let started = harness.clock.now
        let task = try await downloader.download(
            harness.request(server.url("/f.bin"), file: "f.bin") {
                $0.connections = connections
                $0.minimumSplitSize = 256 << 10
                $0.rateLimit = perDownload ? 1 << 20 : nil
            })
        _ = try await task.result()
        let took = harness.clock.now - started
        try await downloader.shutdown()
        try await server.shutdown()
        // 3 MiB at 1 MiB/s takes 3 s on the clock (less the first read, which flows at once),
        // whether the time passed in waits or in work.
        #expect(took >= .milliseconds(2800), "took \(took)")
        #expect(digest(harness.directory.contents("f.bin")) == digest(testBytes(size)))
    }
}
