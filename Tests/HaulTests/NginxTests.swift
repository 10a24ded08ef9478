import Foundation
import HaulTestSupport
import Testing
@testable import Haul

/// End to end against a server nobody here wrote. Skipped where nginx is missing, except in
/// CI (`CI` set), where a missing nginx is a failure.
@Suite(.serialized, .enabled(if: NginxServer.executablePath != nil || ProcessInfo.processInfo.environment["CI"] != nil))
struct NginxTests {
    @Test func downloadsAFileByteForByte() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let content = testBytes(5 << 20)
        try dir.write("www/file.bin", content, creatingFolders: true)
        let harness = try Harness()
        defer { harness.remove() }
        try await NginxServer.withServer(root: dir.file("www")) { nginx in
            let result = try await harness.download(harness.request(nginx.url("/file.bin"))).get()
            #expect(digest(harness.directory.contents("out/file.bin")) == digest(content))
            #expect(result.bytes == Int64(content.count))
            let missing = try await harness.download(harness.request(nginx.url("/nope.bin")))
            guard case .failure(let error) = missing else { Issue.record("404 must fail"); return }
            #expect(error.status == 404)
            #expect(!harness.directory.exists("out/nope.bin"))
        }
    }

    @Test func killNineAndRerunContinuesWithNginxRanges() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let size = 24 << 20
        let content = testBytes(size, seed: 11)
        try dir.write("www/big.bin", content, creatingFolders: true)
        try await NginxServer.withServer(root: dir.file("www"), limitRate: 8 << 20) { nginx in
            // One stream, so the part file's size is the progress to kill at.
            let arguments = ["get", "-q", "-x", "1", "-o", "big.bin", "--state-dir", dir.file("state"), nginx.url("/limited/big.bin")]
            let haul = try HaulProcess(arguments, in: dir.path)
            #expect(try await waitUntil { fileSize(dir.file("big.bin.part")) >= 10 << 20 })
            haul.signal(SIGKILL)
            _ = try await haul.finish()
            let record = try #require(try await Store(directory: dir.file("state")).row(path: dir.file("big.bin")))
            #expect(record.recorded.contiguousPrefix >= 1 << 20, "the bytes written were recorded before the kill")
            #expect(record.validators.etag != nil, "nginx's ETag is kept for If-Range")

            let (status, stderr) = try await HaulProcess.run(arguments, in: dir.path)
            #expect(status == 0, "\(stderr)")
            #expect(digest(dir.contents("big.bin")) == digest(content))
        }
    }

    @Test func aFileReplacedOnTheServerBetweenRunsIsFetchedAnew() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let size = 16 << 20
        try dir.write("www/big.bin", testBytes(size, seed: 1), creatingFolders: true)
        try await NginxServer.withServer(root: dir.file("www"), limitRate: 8 << 20) { nginx in
            let arguments = ["get", "-q", "-o", "big.bin", "--state-dir", dir.file("state"), nginx.url("/limited/big.bin")]
            let haul = try HaulProcess(arguments, in: dir.path)
            #expect(try await waitUntil { fileSize(dir.file("big.bin.part")) >= 4 << 20 })
            haul.signal(SIGKILL)
            _ = try await haul.finish()
            // Same size, new bytes, new mtime: nginx's ETag changes, so If-Range yields a 200.
            let replacement = testBytes(size, seed: 2)
            try await Task.sleep(for: .milliseconds(1100))
            try dir.write("www/big.bin", replacement)
            let (status, stderr) = try await HaulProcess.run(arguments, in: dir.path)
            #expect(status == 0, "\(stderr)")
            #expect(digest(dir.contents("big.bin")) == digest(replacement))
        }
    }
}
