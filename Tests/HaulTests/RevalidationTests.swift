import Foundation
import HaulTestSupport
import Testing
@testable import Haul

/// A completed download asked for again (what rerunning `haul get` does): one conditional
/// request; unchanged costs no body, changed replaces Haul's own file with the new version.
@Suite(.serialized) struct RevalidationTests {
    /// Downloads `/f.bin` (as `content`), lets `change` alter the server, asks again, and
    /// returns what the second round did.
    func round(
        _ content: [UInt8], _ change: (FaultServer) -> Void,
        touch: ((String) throws -> Void)? = nil
    ) async throws -> (result: DownloadResult?, bodies: Int, requests: [RecordedRequest], files: [String], path: String, bytes: [UInt8]?) {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        let downloader = try harness.downloader()
        let manager = harness.manager(downloader)
        server.serve("/f.bin", Route(content: content))
        let id = try await manager.add(harness.request(server.url("/f.bin"), file: "f.bin"))
        await manager.waitUntilIdle()
        #expect(harness.directory.contents("f.bin") == content)
        let path = harness.directory.file("f.bin")
        try touch?(path)
        change(server)
        let (seen, sent) = (server.stats("/f.bin").requests.count, server.stats("/f.bin").bodyBytesSent)
        await manager.requeue(id)
        await manager.waitUntilIdle()
        let download = await manager.download(id)
        let stats = server.stats("/f.bin")
        let files = try FileManager.default.contentsOfDirectory(atPath: harness.directory.path).filter { $0.hasPrefix("f.") }.sorted()
        let bytes = harness.directory.contents("f.bin")
        await manager.shutdown()
        try await downloader.shutdown()
        try await server.shutdown()
        return (download?.result, stats.bodyBytesSent - sent, Array(stats.requests.dropFirst(seen)), files, path, bytes)
    }

    @Test func anUnchangedFileCostsOneConditionalRequestAndNoBody() async throws {
        let content = testBytes(300_000, seed: 1)
        let outcome = try await round(content) { _ in }
        #expect(outcome.result?.wasAlreadyComplete == true)
        #expect(outcome.bodies == 0)
        #expect(outcome.requests.count == 1)
        #expect(outcome.requests.first?.header("If-None-Match") != nil && outcome.requests.first?.status == 304)
        #expect(outcome.bytes == content && outcome.files == ["f.bin"])
    }

    @Test(arguments: [("same size, another ETag", 300_000), ("grew", 500_000), ("shrank", 100_000)])
    func aChangedFileReplacesHaulsOwnWithTheNewVersion(_ what: String, size: Int) async throws {
        let newer = testBytes(size, seed: 2)
        let outcome = try await round(testBytes(300_000, seed: 1)) { server in
            server.update("/f.bin") { $0.content = newer }
        }
        #expect(outcome.result?.wasAlreadyComplete == false, "\(what)")
        #expect(outcome.bytes == newer, "\(what)")
        #expect(outcome.files == ["f.bin"], "no name.1.ext next to Haul's own file (\(what))")
        #expect(outcome.requests.filter { $0.status == 200 }.count == 1, "\(what)")
    }

    @Test func aFileSomeoneElseChangedIsNotOverwritten() async throws {
        let edited = Array("edited by hand\n".utf8)
        let outcome = try await round(
            testBytes(300_000, seed: 1),
            { server in
                server.update("/f.bin") { $0.content = testBytes(400_000, seed: 3) }
            },
            touch: { path in
                try Data(edited).write(to: URL(fileURLWithPath: path))
            })
        #expect(outcome.bytes == edited, "the edited file stays")
        #expect(outcome.files == ["f.1.bin", "f.bin"])
    }
}
