import Testing
@testable import Haul

/// The attempts' reports to their manager: kept in order, and one take asked for however many
/// come before it.
@Suite struct AttemptReportsTests {
    @Test func oneTakeIsAskedForUntilEveryReportIsTaken() {
        let reports = AttemptReports()
        let (first, second, third) = (DownloadID(rawValue: 1), DownloadID(rawValue: 2), DownloadID(rawValue: 3))
        #expect(reports.post(.transferred(first, attempt: 1)))
        #expect(!reports.post(.transferred(second, attempt: 1)))
        #expect(reports.take().map(\.id) == [first, second])
        // The take found reports, so the one that asked for it looks again: no new ask.
        #expect(!reports.post(.transferred(third, attempt: 2)))
        #expect(reports.take().map(\.id) == [third])
        #expect(reports.take().isEmpty)
        // Everything was taken: the next report asks for a take again.
        #expect(reports.post(.transferred(first, attempt: 2)))
        #expect(reports.takes == 2)
    }

    @Test func attemptsThatEndTogetherAreTakenInTogether() async throws {
        let (manager, downloader) = try inMemoryManager(maxConcurrent: 64, perHost: 64)
        let gate = Gate()
        await manager.setAttemptRunner { request, _, events in
            await gate.wait()
            await events.transferred()
            return .success(DownloadResult(path: request.destination.path, bytes: 1, bytesFetched: 1, wasAlreadyComplete: false))
        }
        let list = (0..<64).map { DownloadRequest(url: "http://together.example/f\($0)", file: "/together/f\($0)") }
        _ = try await manager.add(contentsOf: list)
        #expect(await manager.active().count == 64)
        await gate.open()
        await manager.waitUntilIdle()
        #expect(await manager.totals().completed == 64)
        // 128 reports (each attempt's transfer and end); one take each would be 128.
        let takes = await manager.reports.takes
        #expect(takes < 64, "\(takes) takes for 128 reports")
        await manager.shutdown()
        try await downloader.shutdown()
    }
}

extension AttemptReports.Report {
    var id: DownloadID {
        switch self {
        case .transferred(let id, _), .ended(let id, _, _, _): id
        }
    }
}
