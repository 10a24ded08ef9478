import Foundation
import HaulTestSupport
import NIOHTTP1
import Testing
@testable import Haul

/// Pausing an upload returns a token; another process, with a store of its own, continues the
/// same upload from it and sends only the rest.
@Suite(.serialized)
struct UploadResumeTokenTests {
    /// Uploads `file` to `url` until `pauseAt` bytes are on their way, then pauses.
    func pausedUpload(
        _ file: String, to url: String, state: String, pauseAt: Int64, protocol kind: UploadProtocol = .ietf,
        ietfInteropVersion: Int? = nil
    ) async throws -> (token: UploadResumeToken?, result: Result<UploadResult, DownloadError>) {
        var configuration = Downloader.Configuration(stateDirectory: state)
        configuration.stallTimeout = .seconds(10)
        return try await Downloader.withDownloader(configuration) { downloader in
            var request = UploadRequest(file: file, url: url)
            request.protocol = kind
            request.ietfInteropVersion = ietfInteropVersion
            request.rateLimit = 16 << 20
            let task = try await downloader.upload(request)
            for await progress in task.progress where progress.bytesSent >= pauseAt { break }
            let token = await task.pause()
            do throws(DownloadError) { return (token, .success(try await task.result())) } catch { return (token, .failure(error)) }
        }
    }

    @Test func aPausedUploadContinuesInAnotherProcessFromItsTokensJSON() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let server = try await ResumableUploadTestServer.start()
        let size = 24 << 20
        let content = testBytes(size, seed: 71)
        try dir.write("v.bin", content)
        let (token, first) = try await pausedUpload(dir.file("v.bin"), to: server.url("v.bin"), state: dir.file("state-a"), pauseAt: 8 << 20)
        #expect(first.error?.kind == .cancelled)
        let paused = try #require(token)
        #expect(paused.protocol == .ietf)
        #expect(paused.file == dir.file("v.bin"))
        #expect(paused.length == Int64(size))
        #expect(paused.location.contains("/resumable_upload/"), "\(paused.location)")
        let before = await settled({ server.received() }, bytes: \.bytes)

        // Another process: its own state folder, only the token's JSON.
        let json = try JSONEncoder().encode(paused)
        let decoded = try JSONDecoder().decode(UploadResumeToken.self, from: json)
        #expect(decoded == paused)
        var configuration = Downloader.Configuration(stateDirectory: dir.file("state-b"))
        configuration.stallTimeout = .seconds(10)
        let done = try await Downloader.withDownloader(configuration) { downloader in
            try await downloader.upload(resuming: decoded).result()
        }
        let after = server.received()
        let stored = try? [UInt8](Data(contentsOf: server.folder.appendingPathComponent("v.bin")))
        await server.stop()

        #expect(done.restartReason == nil)
        #expect(after.creations == 1, "the same upload continued")
        #expect(before.bytes >= 7 << 20)
        #expect(done.bytesSent <= Int64(size) - before.bytes + (1 << 20), "only the rest was sent: \(done.bytesSent)")
        #expect(digest(stored) == digest(content))
    }

    /// The token keeps the interop version the upload began in; the other process speaks it
    /// to a server that takes no other.
    @Test func aTokenKeepsItsUploadsInteropVersion() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let server = try await ResumableUploadTestServer.start(interopVersions: [5])
        let content = testBytes(12 << 20, seed: 75)
        try dir.write("i.bin", content)
        let (token, _) = try await pausedUpload(
            dir.file("i.bin"), to: server.url("i.bin"), state: dir.file("state-a"), pauseAt: 4 << 20, ietfInteropVersion: 5)
        let paused = try #require(token)
        #expect(paused.ietfInteropVersion == 5)
        let done = try await Downloader.withDownloader(.init(stateDirectory: dir.file("state-b"))) { downloader in
            try await downloader.upload(resuming: paused).result()
        }
        let stored = try? [UInt8](Data(contentsOf: server.folder.appendingPathComponent("i.bin")))
        let received = server.received()
        await server.stop()
        #expect(received.creations == 1, "the same upload continued")
        #expect(done.bytesSent < 12 << 20)
        #expect(digest(stored) == digest(content))
    }

    @Test func aTokenOfAFileChangedSinceStartsANewUploadAndSaysWhy() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let server = try await ResumableUploadTestServer.start()
        try dir.write("c.bin", testBytes(12 << 20, seed: 72))
        let (token, _) = try await pausedUpload(dir.file("c.bin"), to: server.url("c.bin"), state: dir.file("state-a"), pauseAt: 4 << 20)
        let paused = try #require(token)
        let changed = testBytes(12 << 20, seed: 73)
        try dir.write("c.bin", changed)
        let done = try await Downloader.withDownloader(.init(stateDirectory: dir.file("state-b"))) { downloader in
            try await downloader.upload(resuming: paused).result()
        }
        let stored = try? [UInt8](Data(contentsOf: server.folder.appendingPathComponent("c.bin")))
        let received = server.received()
        await server.stop()
        #expect(done.restartReason?.contains("changed since its upload began") == true, "\(done.restartReason ?? "nil")")
        #expect(received.creations == 2)
        #expect(digest(stored) == digest(changed))
    }

    @Test func aPlainPutOrAFinishedUploadHasNoToken() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let server = try await ResumableUploadTestServer.start()
        try dir.write("s.bin", testBytes(1 << 20, seed: 74))
        // Finished before the pause: nothing is left to continue.
        let (token, result) = try await pausedUpload(dir.file("s.bin"), to: server.url("s.bin"), state: dir.file("state"), pauseAt: Int64.max)
        // A plain PUT keeps no record: it starts over, as curl -T does.
        let (put, _) = try await pausedUpload(
            dir.file("s.bin"), to: server.url("p.bin"), state: dir.file("state"), pauseAt: 0, protocol: .put)
        await server.stop()
        #expect(token == nil)
        #expect((try? result.get())?.bytes == 1 << 20)
        #expect(put == nil)
    }

    @Test(arguments: [
        (
            UploadResumeToken(file: "/f", url: "http://h.example/u", protocol: .tus, location: "http://h.example/u/1", length: 1, modified: 0, sample: ""),
            "version 9"
        ),
        (
            UploadResumeToken(file: "/f", url: "http://h.example/u", protocol: .put, location: "http://h.example/u", length: 1, modified: 0, sample: ""),
            "not put"
        ),
        (
            UploadResumeToken(file: "/f", url: "http://h.example/u", protocol: .tus, location: "file:///etc/passwd", length: 1, modified: 0, sample: ""),
            "not an http(s) URL"
        ),
    ])
    func aBadTokenIsRefusedInOneLine(token: UploadResumeToken, message: String) async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        var token = token
        if message == "version 9" { token.version = 9 }
        let error = try await Downloader.withDownloader(.init(stateDirectory: dir.file("state"))) { downloader in
            do throws(DownloadError) {
                _ = try await downloader.upload(resuming: token)
                return nil as DownloadError?
            } catch {
                return error
            }
        }
        #expect(error?.kind == .invalidRequest)
        #expect(error?.message.contains(message) == true, "\(error?.message ?? "no error")")
        #expect(error?.message.contains("\n") == false)
    }
}

extension Result {
    /// The failure, if it is one.
    fileprivate var error: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

/// The IETF draft's `Upload-Limit`: a file larger than the server takes is refused before any
/// upload is made, and appending requests keep within the server's bounds.
@Suite struct UploadLimitTests {
    @Test func theLimitsAreReadFromTheStructuredField() throws {
        var headers = HTTPHeaders()
        headers.add(name: "Upload-Limit", value: "max-size=1000, max-append-size=100")
        headers.add(name: "Upload-Limit", value: "min-append-size=10, expires=60, max-size=x")
        let limits = try #require(UploadRunner.IETFLimits(headers))
        #expect(limits == UploadRunner.IETFLimits(maxSize: 1000, maxAppendSize: 100, minAppendSize: 10))
        #expect(limits.chunkSize == 100)
        #expect(UploadRunner.IETFLimits(HTTPHeaders()) == nil)
        #expect(UploadRunner.IETFLimits().chunkSize == UploadRunner.ietfChunkSize)
        #expect(UploadRunner.IETFLimits(minAppendSize: 16 << 20).chunkSize == 16 << 20)
        // A minimum above the maximum leaves the maximum.
        #expect(UploadRunner.IETFLimits(maxAppendSize: 1 << 20, minAppendSize: 2 << 20).chunkSize == 1 << 20)
        #expect(throws: DownloadError.self) { try limits.check(1001, file: "/f") }
        try limits.check(1000, file: "/f")
    }

    @Test func aFileLargerThanTheServerTakesIsRefusedBeforeAnyUploadIsMade() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let server = try await FaultServer.start()
        var route = Route(content: [])
        route.optionsAllowed = true
        route.responseHeaders = [("Upload-Limit", "min-size=0, max-size=1000"), ("Upload-Draft-Interop-Version", "6")]
        server.serve("/up", route)
        try dir.write("big.bin", testBytes(2000, seed: 76))
        let error = try await Downloader.withDownloader(.init(stateDirectory: dir.file("state"))) { downloader in
            do throws(DownloadError) {
                _ = try await downloader.upload(UploadRequest(file: dir.file("big.bin"), url: server.url("/up"))).result()
                return nil as DownloadError?
            } catch {
                return error
            }
        }
        let methods = server.stats("/up").requests.map(\.method)
        try await server.shutdown()
        #expect(error?.kind == .invalidRequest)
        #expect(error?.message.contains("is 2000 bytes; the server takes at most 1000 (Upload-Limit: max-size)") == true, "\(error?.message ?? "")")
        #expect(methods == ["OPTIONS"], "no upload was made: \(methods)")
    }
}
