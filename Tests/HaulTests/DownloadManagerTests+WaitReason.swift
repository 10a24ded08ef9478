import Foundation
import HaulTestSupport
import Testing
@testable import Haul

extension DownloadManagerTests {
    /// Each reason a download waits, as the manager's indexes tell it.
    @Test func saysWhyEachWaitingDownloadWaits() async throws {
        try await withManager(maxConcurrent: 2, perHost: 1) { server, harness, _, manager in
            // 256 KiB at 16 KiB/s: the first one runs for the whole test.
            _ = serveFiles(server, count: 5, bytesPerSecond: 16 << 10)
            let request = { (index: Int) in harness.request(server.url("/f\(index).bin"), file: "f\(index).bin") { $0.connections = 1 } }
            let running = try await manager.add(request(0))
            #expect(await manager.download(running)?.status == .running)
            #expect(await manager.waitReason(of: running) == nil)

            let dependant = try await manager.add(request(1), after: [running])
            #expect(await manager.waitReason(of: dependant) == .dependency(running))
            // A second slot is free, but 127.0.0.1's one connection is taken.
            let sameHost = try await manager.add(request(2))
            #expect(await manager.waitReason(of: sameHost) == .host("127.0.0.1", limit: 1))
            await manager.setMaxConcurrentDownloads(1)
            let queued = try await manager.add(request(3))
            #expect(await manager.waitReason(of: queued) == .slot(running: 1, limit: 1))
            let paused = try await manager.add(request(4), paused: true)
            #expect(await manager.waitReason(of: paused) == .paused)
            #expect(await manager.waitReasons(of: [running, dependant, paused]) == [dependant: .dependency(running), paused: .paused])
        }
    }
}
