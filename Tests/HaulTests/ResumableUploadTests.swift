import Foundation
import HaulTestSupport
import NIOHTTP1
import Testing
@testable import Haul

/// The IETF draft "Resumable Uploads for HTTP" against Apple's NIOResumableUpload
/// (``ResumableUploadTestServer``), in this process: the library's upload task, and the built
/// `haul put` killed and rerun.
@Suite(.serialized)
struct ResumableUploadTests {
    /// A state folder, a file to send and a server, for one test.
    struct Fixture {
        let dir: TestDirectory
        let server: ResumableUploadTestServer
        var state: String { dir.file("state") }

        init(interopVersions: [Int]? = nil) async throws {
            dir = try TestDirectory()
            server = try await ResumableUploadTestServer.start(interopVersions: interopVersions)
        }

        func remove() async {
            await server.stop()
            dir.remove()
        }

        func stored(_ name: String) -> [UInt8]? {
            try? [UInt8](Data(contentsOf: server.folder.appendingPathComponent(name)))
        }

        /// Uploads `file` to the server's target of that name in the draft's interop `version`
        /// (nil: Haul's choice), cancelling once `cancelAt` bytes are on their way (nil: to the end).
        func upload(
            _ file: String, protocol kind: UploadProtocol = .ietf, version: Int? = nil, rateLimit: Int64? = nil, cancelAt: Int64? = nil
        ) async throws -> (result: Result<UploadResult, DownloadError>, restart: String?) {
            var configuration = Downloader.Configuration(stateDirectory: state)
            configuration.stallTimeout = .seconds(10)
            return try await Downloader.withDownloader(configuration) { downloader in
                var request = UploadRequest(file: dir.file(file), url: server.url(file))
                request.protocol = kind
                request.ietfInteropVersion = version
                request.rateLimit = rateLimit
                request.retryWait = .milliseconds(50)
                let task = try await downloader.upload(request)
                var restart: String?
                for await progress in task.progress {
                    restart = restart ?? progress.restartReason
                    if let cancelAt, progress.bytesSent >= cancelAt { task.cancel() }
                }
                do throws(DownloadError) { return (.success(try await task.result()), restart) } catch { return (.failure(error), restart) }
            }
        }

        func row(_ file: String) async throws -> UploadRow? {
            try await Store(directory: state).upload(file: dir.file(file), url: server.url(file))
        }

        /// Runs `haul` with `arguments` in the folder, killed with -9 once the server has received
        /// `bytes`; returns what the server had received then.
        func putKilled(_ arguments: [String], after bytes: Int64) async throws -> ResumableUploadTestServer.Received {
            let haul = try HaulProcess(arguments, in: dir.path)
            let reached = try await waitUntil {
                guard server.received().bytes >= bytes else { return false }
                haul.signal(SIGKILL)
                return true
            }
            #expect(reached)
            haul.signal(SIGKILL)
            _ = try await haul.finish()
            return server.received()
        }
    }

    /// How `requests` stray from the draft's interop `version` (empty when they do not): each
    /// names it, a creation and a `PATCH` say whether they complete the upload in its form
    /// (`Upload-Incomplete` in 3, `Upload-Complete` in 5 and 6), and only 6 types a `PATCH`
    /// `application/partial-upload`.
    static func strays(from version: Int, _ requests: [ResumableUploadTestServer.Request]) -> [String] {
        requests.compactMap { request -> String? in
            let method = request.method
            if request.interopVersion != String(version) { return "\(method) named version \(request.interopVersion ?? "none")" }
            let says = method == "POST" || method == "PATCH"
            let form = version == 3 ? request.uploadIncomplete : request.uploadComplete
            let other = version == 3 ? request.uploadComplete : request.uploadIncomplete
            if says != (form != nil) || other != nil { return "\(method) said completeness wrongly: \(request)" }
            if method == "PATCH", request.contentType != (version == 6 ? "application/partial-upload" : nil) {
                return "PATCH was typed \(request.contentType ?? "nothing")"
            }
            return nil
        }
    }

    /// Whether each of `requests` said it completes the upload, read in `version`'s form.
    static func completes(_ version: Int, _ requests: [ResumableUploadTestServer.Request]) -> [Bool?] {
        requests.map { version == 3 ? $0.uploadIncomplete.map { $0 == "?0" } : $0.uploadComplete.map { $0 == "?1" } }
    }

    @Test func anUploadArrivesByteForByteInChunks() async throws {
        let t = try await Fixture()
        let content = testBytes(20 << 20 + 12345, seed: 31)
        try t.dir.write("a.bin", content)
        let (result, restart) = try await t.upload("a.bin")
        let done = try result.get()
        let received = t.server.received()
        let stored = t.stored("a.bin")
        let row = try await t.row("a.bin")
        await t.remove()

        #expect(done.protocol == .ietf)
        #expect(done.bytes == Int64(content.count))
        #expect(done.bytesSent == Int64(content.count))
        #expect(done.location.contains("/resumable_upload/"), "the upload's own URL: \(done.location)")
        #expect(restart == nil)
        #expect(digest(stored) == digest(content))
        #expect(received.bytes == Int64(content.count))
        #expect(received.creations == 1)
        #expect(received.completions == 1)
        // Created without bytes, then three 8 MiB PATCHes; no OPTIONS when the protocol is given.
        #expect(received.methods == ["POST": 1, "PATCH": 3], "\(received.methods)")
        #expect(row == nil, "a finished upload leaves no record")
    }

    @Test func autoChoosesTheDraftWhenTheServerSpeaksIt() async throws {
        let t = try await Fixture()
        let content = testBytes(3 << 20, seed: 32)
        try t.dir.write("auto.bin", content)
        let done = try await t.upload("auto.bin", protocol: .auto).result.get()
        let received = t.server.received()
        let stored = t.stored("auto.bin")
        await t.remove()

        #expect(done.protocol == .ietf)
        #expect(received.methods == ["OPTIONS": 1, "POST": 1, "PATCH": 1], "\(received.methods)")
        #expect(digest(stored) == digest(content))
    }

    @Test func aCutConnectionIsResumedFromTheServersOffset() async throws {
        let t = try await Fixture()
        let size = 20 << 20
        let content = testBytes(size, seed: 33)
        try t.dir.write("cut.bin", content)
        // In the middle of the second PATCH.
        t.server.cutConnection(afterBytes: 11 << 20)
        let done = try await t.upload("cut.bin").result.get()
        let received = t.server.received()
        let stored = t.stored("cut.bin")
        await t.remove()

        #expect(received.cuts == 1)
        #expect(received.creations == 1, "the same upload continued")
        #expect((received.methods["HEAD"] ?? 0) >= 1, "the offset was asked: \(received.methods)")
        #expect(done.bytesSent == Int64(size))
        // NIOResumableUpload keeps every byte it read: nothing is sent twice but what the
        // kernel held when the connection was cut.
        #expect(received.bytes <= Int64(size) + (8 << 20), "received \(received.bytes)")
        #expect(digest(stored) == digest(content))
    }

    @Test func aCancelledUploadContinuesOnTheNextRun() async throws {
        let t = try await Fixture()
        let size = 24 << 20
        let content = testBytes(size, seed: 34)
        try t.dir.write("b.bin", content)
        let (first, _) = try await t.upload("b.bin", rateLimit: 16 << 20, cancelAt: 12 << 20)
        #expect(throws: DownloadError.self) { try first.get() }
        let before = await settled({ t.server.received() }, bytes: \.bytes)
        let row = try await t.row("b.bin")
        let (second, restart) = try await t.upload("b.bin")
        let done = try second.get()
        let after = t.server.received()
        let stored = t.stored("b.bin")
        let rowAfter = try await t.row("b.bin")
        await t.remove()

        #expect(row?.protocol == .ietf)
        #expect(row?.location?.contains("/resumable_upload/") == true, "the upload's URL is recorded before its bytes go")
        #expect(restart == nil)
        #expect(after.creations == 1, "the same upload continued")
        #expect(after.methods["HEAD"] == 1)
        #expect(before.bytes >= 11 << 20)
        #expect(done.bytesSent <= Int64(size) - (11 << 20), "only the rest was sent: \(done.bytesSent)")
        // NIOResumableUpload keeps every byte it read: none came twice.
        #expect(after.bytes == Int64(size), "received \(after.bytes)")
        #expect(digest(stored) == digest(content))
        #expect(rowAfter == nil)
    }

    @Test func aFileChangedSinceItsUploadBeganStartsANewOne() async throws {
        let t = try await Fixture()
        try t.dir.write("c.bin", testBytes(24 << 20, seed: 35))
        let (first, _) = try await t.upload("c.bin", rateLimit: 16 << 20, cancelAt: 12 << 20)
        #expect(throws: DownloadError.self) { try first.get() }
        let changed = testBytes(20 << 20, seed: 36)
        try t.dir.write("c.bin", changed)
        let (second, restart) = try await t.upload("c.bin")
        let done = try second.get()
        let received = t.server.received()
        let stored = t.stored("c.bin")
        await t.remove()

        #expect(restart?.contains("changed since its upload began (its length changed") == true, "\(restart ?? "no reason")")
        #expect(done.restartReason == restart)
        #expect(done.bytesSent == Int64(changed.count))
        #expect(received.creations == 2)
        #expect(received.methods["HEAD"] == nil, "a changed file's old upload is not asked about")
        #expect(digest(stored) == digest(changed))
    }

    @Test func anEmptyFileIsUploadedByCreationAlone() async throws {
        let t = try await Fixture()
        try t.dir.write("empty.bin", [])
        let done = try await t.upload("empty.bin").result.get()
        let received = t.server.received()
        let stored = t.stored("empty.bin")
        let row = try await t.row("empty.bin")
        await t.remove()

        #expect(done.protocol == .ietf)
        #expect(done.bytes == 0)
        #expect(received.methods == ["POST": 1])
        #expect(received.completions == 1)
        #expect(stored == [])
        #expect(row == nil)
    }

    @Test(.enabled(if: NginxServer.executablePath != nil || ProcessInfo.processInfo.environment["CI"] != nil))
    func autoStillPutsToAPlainServer() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let content = testBytes(2 << 20 + 3, seed: 37)
        try dir.write("p.bin", content)
        try FileManager.default.createDirectory(atPath: dir.file("www"), withIntermediateDirectories: true)
        let done = try await NginxServer.withServer(root: dir.file("www"), options: .init(webDAV: true)) { nginx in
            var configuration = Downloader.Configuration(stateDirectory: dir.file("state"))
            configuration.stallTimeout = .seconds(10)
            return try await Downloader.withDownloader(configuration) { downloader in
                let task = try await downloader.upload(UploadRequest(file: dir.file("p.bin"), url: nginx.url("/dav/p.bin")))
                return try await task.result()
            }
        }
        #expect(done.protocol == .put)
        #expect(digest(dir.contents("www/p.bin")) == digest(content))
    }

    // MARK: Interop versions 3, 5 and 6

    @Test(arguments: [3, 5, 6])
    func eachInteropVersionUploadsByteForByte(version: Int) async throws {
        let t = try await Fixture()
        let content = testBytes(20 << 20 + 12345, seed: 41)
        try t.dir.write("v.bin", content)
        let done = try await t.upload("v.bin", version: version).result.get()
        let received = t.server.received()
        let stored = t.stored("v.bin")
        await t.remove()

        #expect(done.protocol == .ietf)
        #expect(done.bytesSent == Int64(content.count))
        #expect(digest(stored) == digest(content))
        #expect(received.methods == ["POST": 1, "PATCH": 3], "\(received.methods)")
        #expect(received.bytes == Int64(content.count))
        #expect(Self.strays(from: version, received.requests) == [])
        #expect(Self.completes(version, received.requests) == [false, false, false, true])
    }

    @Test(arguments: [3, 5, 6])
    func anEmptyFileIsUploadedByCreationInEachInteropVersion(version: Int) async throws {
        let t = try await Fixture()
        try t.dir.write("e.bin", [])
        let done = try await t.upload("e.bin", version: version).result.get()
        let received = t.server.received()
        let stored = t.stored("e.bin")
        await t.remove()

        #expect(done.bytes == 0)
        #expect(received.completions == 1)
        #expect(stored == [])
        #expect(Self.strays(from: version, received.requests) == [])
        #expect(Self.completes(version, received.requests) == [true])
    }

    @Test(arguments: [3, 5, 6])
    func eachInteropVersionResumesACutUploadFromTheServersOffset(version: Int) async throws {
        let t = try await Fixture()
        let size = 20 << 20
        let content = testBytes(size, seed: 42)
        try t.dir.write("cut.bin", content)
        // In the middle of the second PATCH.
        t.server.cutConnection(afterBytes: 11 << 20)
        let done = try await t.upload("cut.bin", version: version).result.get()
        let received = t.server.received()
        let stored = t.stored("cut.bin")
        await t.remove()

        #expect(received.cuts == 1)
        #expect(received.creations == 1, "the same upload continued")
        #expect((received.methods["HEAD"] ?? 0) >= 1, "the offset was asked: \(received.methods)")
        #expect(received.bytes <= Int64(size) + (8 << 20), "received \(received.bytes)")
        #expect(done.bytesSent == Int64(size))
        #expect(digest(stored) == digest(content))
        #expect(Self.strays(from: version, received.requests) == [])
    }

    @Test(arguments: [3, 5, 6])
    func theVersionAnUploadBeganInIsSpokenByItsRerun(version: Int) async throws {
        let t = try await Fixture()
        let size = 24 << 20
        let content = testBytes(size, seed: 43)
        try t.dir.write("k.bin", content)
        let (first, _) = try await t.upload("k.bin", version: version, rateLimit: 16 << 20, cancelAt: 12 << 20)
        #expect(throws: DownloadError.self) { try first.get() }
        let before = await settled({ t.server.received() }, bytes: \.bytes)
        let row = try await t.row("k.bin")
        // The rerun names no version: the row's is the one spoken.
        let (second, restart) = try await t.upload("k.bin")
        let done = try second.get()
        let after = t.server.received()
        let stored = t.stored("k.bin")
        await t.remove()

        #expect(row?.ietfInteropVersion == version)
        #expect(restart == nil)
        #expect(after.creations == 1, "the same upload continued")
        #expect(after.methods["HEAD"] == 1)
        #expect(before.bytes >= 11 << 20)
        #expect(done.bytesSent <= Int64(size) - (11 << 20), "only the rest was sent: \(done.bytesSent)")
        #expect(after.bytes == Int64(size), "received \(after.bytes)")
        #expect(digest(stored) == digest(content))
        #expect(Self.strays(from: version, after.requests) == [])
    }

    @Test(arguments: [3, 5])
    func anUploadOfNoVersionSpeaksTheOneTheServerNames(version: Int) async throws {
        let t = try await Fixture(interopVersions: [version])
        let size = 24 << 20
        let content = testBytes(size, seed: 44)
        try t.dir.write("n.bin", content)
        let (first, _) = try await t.upload("n.bin", rateLimit: 16 << 20, cancelAt: 12 << 20)
        #expect(throws: DownloadError.self) { try first.get() }
        let before = await settled({ t.server.received() }, bytes: \.bytes)
        let row = try await t.row("n.bin")
        let done = try await t.upload("n.bin").result.get()
        let after = t.server.received()
        let stored = t.stored("n.bin")
        await t.remove()

        // 6 first, refused with 400 naming the server's version, then that one, recorded for the rerun.
        #expect(before.requests.map(\.method).prefix(2) == ["POST", "POST"], "\(before.requests)")
        #expect(before.requests.first?.interopVersion == "6")
        #expect(Self.strays(from: version, Array(after.requests.dropFirst())) == [])
        #expect(row?.ietfInteropVersion == version)
        #expect(after.creations == 1, "the same upload continued")
        #expect(done.bytesSent <= Int64(size) - (11 << 20), "only the rest was sent: \(done.bytesSent)")
        #expect(digest(stored) == digest(content))
    }

    @Test(arguments: [3, 5])
    func autoSpeaksTheVersionTheServerNamesToOptions(version: Int) async throws {
        let t = try await Fixture(interopVersions: [version])
        let content = testBytes(3 << 20, seed: 45)
        try t.dir.write("o.bin", content)
        let done = try await t.upload("o.bin", protocol: .auto).result.get()
        let received = t.server.received()
        let stored = t.stored("o.bin")
        await t.remove()

        #expect(done.protocol == .ietf)
        #expect(received.methods == ["OPTIONS": 1, "POST": 1, "PATCH": 1], "\(received.methods)")
        #expect(received.requests.first?.interopVersion == "6", "the probe asks in 6")
        #expect(Self.strays(from: version, Array(received.requests.dropFirst())) == [])
        #expect(digest(stored) == digest(content))
    }

    @Test func aVersionTheRequestNamesIsNotTradedForTheServers() async throws {
        let t = try await Fixture(interopVersions: [5])
        try t.dir.write("x.bin", testBytes(1 << 20, seed: 46))
        let (result, _) = try await t.upload("x.bin", version: 3)
        let received = t.server.received()
        await t.remove()

        #expect(throws: DownloadError.self) { try result.get() }
        if case .failure(let error) = result {
            #expect(error.kind == .protocolViolation)
            #expect(error.message == "the server does not speak interop version 3 of the IETF draft but 5: use --ietf-version 5, or leave it out")
        }
        #expect(received.methods == ["POST": 1], "no second try in the server's version: \(received.methods)")
    }

    @Test(arguments: [0, 1, 2, 4, 7, -6])
    func anInteropVersionHaulDoesNotSpeakIsRefusedByValidate(version: Int) {
        var request = UploadRequest(file: "a.bin", url: "http://127.0.0.1:9/files/a.bin")
        request.ietfInteropVersion = version
        #expect(throws: DownloadError.invalidRequest("the IETF draft's interop version must be 3, 5 or 6, not \(version)")) {
            try request.validate()
        }
        for spoken in [nil, 3, 5, 6] as [Int?] {
            request.ietfInteropVersion = spoken
            #expect(throws: Never.self) { try request.validate() }
        }
    }

    @Test func anAnswerSaysCompletenessInEitherForm() {
        #expect(UploadRunner.ietfComplete(HTTPHeaders([("Upload-Complete", "?1")])) == true)
        #expect(UploadRunner.ietfComplete(HTTPHeaders([("Upload-Complete", "?0")])) == false)
        #expect(UploadRunner.ietfComplete(HTTPHeaders([("Upload-Incomplete", "?0")])) == true)
        #expect(UploadRunner.ietfComplete(HTTPHeaders([("Upload-Incomplete", "?1")])) == false)
        #expect(UploadRunner.ietfComplete(HTTPHeaders([("Upload-Offset", "5")])) == nil)
    }

    // MARK: The command line

    @Test func killNineThenRerunSendsOnlyTheRest() async throws {
        let t = try await Fixture()
        let size = 40 << 20
        let content = testBytes(size, seed: 38)
        try t.dir.write("big.bin", content)
        let arguments = ["put", "-q", "--state-dir", t.state, "big.bin", t.server.url("big.bin")]

        // Slowed down so that the kill lands in the middle, and under auto: the rerun finds
        // the draft's upload the first run chose.
        let killed = try await t.putKilled(arguments + ["--limit-rate", "8M"], after: 18 << 20)

        let (status, stderr) = try await HaulProcess.run(arguments, in: t.dir.path)
        let total = t.server.received()
        let stored = t.stored("big.bin")
        await t.remove()

        #expect(status == 0, "\(stderr)")
        #expect(stderr.isEmpty, "\(stderr)")
        #expect(digest(stored) == digest(content))
        #expect(total.creations == 1, "the rerun continued the same upload")
        #expect(total.methods["HEAD"] == 1, "\(total.methods)")
        #expect(total.methods["OPTIONS"] == 1, "only the first run asked what the server speaks")
        // The server keeps every byte it read: the rerun sends exactly the rest.
        #expect(total.bytes - killed.bytes <= Int64(size) - (18 << 20), "the rerun sent \(total.bytes - killed.bytes)")
        #expect(total.bytes <= Int64(size) + (8 << 20), "sent \(total.bytes) in all")
    }

    @Test func aChangedFileIsSaidInOneLineByTheCommandLine() async throws {
        let t = try await Fixture()
        try t.dir.write("c.bin", testBytes(24 << 20, seed: 39))
        let arguments = ["put", "--protocol", "ietf", "--state-dir", t.state, "c.bin", t.server.url("c.bin")]
        _ = try await t.putKilled(arguments + ["-q", "--limit-rate", "8M"], after: 10 << 20)
        let changed = testBytes(20 << 20, seed: 40)
        try t.dir.write("c.bin", changed)

        let (status, stderr) = try await HaulProcess.run(arguments, in: t.dir.path)
        let stored = t.stored("c.bin")
        let received = t.server.received()
        await t.remove()

        #expect(status == 0, "\(stderr)")
        let lines = stderr.split(separator: "\n")
        #expect(lines.first?.hasPrefix("haul: \(t.dir.file("c.bin")) changed since its upload began (its length changed") == true, "\(stderr)")
        #expect(lines.last?.contains("uploaded 20.0 MiB by ietf") == true, "\(stderr)")
        #expect(received.creations == 2)
        #expect(digest(stored) == digest(changed))
    }

    @Test(arguments: [3, 5, 6])
    func killNineThenRerunGoesOnInTheInteropVersionGiven(version: Int) async throws {
        let t = try await Fixture()
        let size = 24 << 20
        let content = testBytes(size, seed: 47)
        try t.dir.write("kv.bin", content)
        let arguments = ["put", "-q", "--state-dir", t.state, "kv.bin", t.server.url("kv.bin")]
        let killed = try await t.putKilled(arguments + ["--ietf-version", String(version), "--limit-rate", "8M"], after: 10 << 20)

        // Rerun without --ietf-version: the upload goes on in the version it began in.
        let (status, stderr) = try await HaulProcess.run(arguments, in: t.dir.path)
        let total = t.server.received()
        let stored = t.stored("kv.bin")
        await t.remove()

        #expect(status == 0, "\(stderr)")
        #expect(stderr.isEmpty, "\(stderr)")
        #expect(digest(stored) == digest(content))
        #expect(total.creations == 1, "the rerun continued the same upload")
        #expect(total.methods["HEAD"] == 1, "\(total.methods)")
        #expect(total.bytes - killed.bytes <= Int64(size) - (10 << 20), "the rerun sent \(total.bytes - killed.bytes)")
        #expect(Self.strays(from: version, total.requests) == [])
    }

    @Test func anInteropVersionHaulDoesNotSpeakIsRefusedByTheCommandLine() async throws {
        let t = try await Fixture()
        try t.dir.write("a.bin", [1, 2, 3])
        let (status, stderr) = try await HaulProcess.run(
            ["put", "--ietf-version", "4", "--state-dir", t.state, "a.bin", t.server.url("a.bin")], in: t.dir.path)
        let received = t.server.received()
        await t.remove()

        #expect(status == 64)
        #expect(stderr.hasPrefix("Error: --ietf-version must be 3, 5 or 6, not 4"), "\(stderr)")
        #expect(received.requests == [])
    }
}
