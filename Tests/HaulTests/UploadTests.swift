import Foundation
import CHaulSystem
import HaulTestSupport
import NIOCore
import Testing
@testable import Haul

/// Whether aiohttp-tus (PyPI) is there to upload to: `scripts/install-deps.sh --with-test-servers`.
let tusServerAvailable =
    (try? Process.run(URL(fileURLWithPath: "/usr/bin/env"), arguments: ["python3", "-c", "import aiohttp_tus"]))
    .map { process in
        process.waitUntilExit()
        return process.terminationStatus == 0
    } ?? false

/// The library's upload task against a real tus server (aiohttp-tus) and nginx's WebDAV `PUT`.
/// Skipped where the servers are missing, except in CI (`CI` set), where that is a failure.
@Suite(.serialized, .enabled(if: tusServerAvailable || ProcessInfo.processInfo.environment["CI"] != nil))
struct UploadTests {
    /// A state folder, a file to send and a tus server, for one test.
    struct Fixture {
        let dir: TestDirectory
        let tus: TusTestServer
        var state: String { dir.file("state") }

        init() async throws {
            dir = try TestDirectory()
            tus = try await TusTestServer.start()
        }

        func remove() async {
            await tus.stop()
            dir.remove()
        }

        /// Uploads `file`, cancelling once `cancelAt` bytes are on their way (nil: to the end).
        func upload(
            _ file: String, to url: String? = nil, protocol kind: UploadProtocol = .auto, rateLimit: Int64? = nil, cancelAt: Int64? = nil
        ) async throws -> (result: Result<UploadResult, DownloadError>, restart: String?) {
            var configuration = Downloader.Configuration(stateDirectory: state)
            configuration.stallTimeout = .seconds(10)
            return try await Downloader.withDownloader(configuration) { downloader in
                var request = UploadRequest(file: dir.file(file), url: url ?? tus.url)
                request.protocol = kind
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
    }

    @Test func tusUploadArrivesByteForByteInChunks() async throws {
        let t = try await Fixture()
        let content = testBytes(20 << 20 + 12345, seed: 5)
        try t.dir.write("a.bin", content)
        let (result, restart) = try await t.upload("a.bin")
        let done = try result.get()
        let received = t.tus.received()
        let stored = try [UInt8](Data(contentsOf: t.tus.folder.appendingPathComponent("a.bin")))
        await t.remove()

        #expect(done.protocol == .tus)
        #expect(done.bytes == Int64(content.count))
        #expect(done.bytesSent == Int64(content.count))
        #expect(restart == nil)
        #expect(digest(stored) == digest(content))
        #expect(received.bytes == Int64(content.count))
        #expect(received.creations == 1)
        // 8 MiB PATCHes: the most a kill can cost a server that keeps no partial request.
        #expect(received.patches == 3)
    }

    @Test func cancelledTusUploadContinuesFromTheServersOffset() async throws {
        let t = try await Fixture()
        let size = 24 << 20
        let content = testBytes(size, seed: 6)
        try t.dir.write("b.bin", content)
        // Past 12 MiB handed over, the first 8 MiB PATCH has been confirmed.
        let (first, _) = try await t.upload("b.bin", rateLimit: 16 << 20, cancelAt: 12 << 20)
        #expect(throws: DownloadError.self) { try first.get() }
        let before = await settled({ t.tus.received() }, bytes: \.bytes)
        let row = try await Store(directory: t.state).upload(file: t.dir.file("b.bin"), url: t.tus.url)
        let (second, restart) = try await t.upload("b.bin")
        let done = try second.get()
        let after = t.tus.received()
        let stored = try [UInt8](Data(contentsOf: t.tus.folder.appendingPathComponent("b.bin")))
        let rowAfter = try await Store(directory: t.state).upload(file: t.dir.file("b.bin"), url: t.tus.url)
        await t.remove()

        #expect(row?.location != nil, "the upload's URL is recorded before its bytes go")
        #expect(restart == nil)
        #expect(after.creations == 1, "the same upload continued")
        #expect(done.bytesSent <= Int64(size) - (8 << 20))
        #expect(after.bytes - before.bytes == done.bytesSent)
        #expect(after.bytes <= Int64(size) + (8 << 20))
        #expect(digest(stored) == digest(content))
        #expect(rowAfter == nil, "a finished upload leaves no record")
    }

    @Test func aFileChangedSinceItsUploadBeganStartsANewOne() async throws {
        let t = try await Fixture()
        let size = 24 << 20
        try t.dir.write("c.bin", testBytes(size, seed: 7))
        let (first, _) = try await t.upload("c.bin", rateLimit: 16 << 20, cancelAt: 12 << 20)
        #expect(throws: DownloadError.self) { try first.get() }
        // Other bytes of the same length, and the old modification time put back: only the
        // sample's digest tells.
        let path = t.dir.file("c.bin")
        var info = stat()
        #expect(stat(path, &info) == 0)
        let changed = testBytes(size, seed: 8)
        try t.dir.write("c.bin", changed)
        var times = [info.st_atim, info.st_mtim]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        let (second, restart) = try await t.upload("c.bin")
        let done = try second.get()
        let stored = try [UInt8](Data(contentsOf: t.tus.folder.appendingPathComponent("c.bin")))
        let received = t.tus.received()
        await t.remove()

        #expect(restart?.contains("changed since its upload began (its content changed)") == true, "\(restart ?? "no reason")")
        #expect(done.restartReason == restart)
        #expect(done.bytesSent == Int64(size))
        #expect(received.creations == 2)
        #expect(digest(stored) == digest(changed))
    }

    @Test func anUploadTheServerLostStartsANewOne() async throws {
        let t = try await Fixture()
        let size = 24 << 20
        let content = testBytes(size, seed: 9)
        try t.dir.write("d.bin", content)
        let (first, _) = try await t.upload("d.bin", rateLimit: 16 << 20, cancelAt: 12 << 20)
        #expect(throws: DownloadError.self) { try first.get() }
        // aiohttp-tus keeps an unfinished upload's bytes and record in these two folders.
        for folder in [".resources", ".metadata"] {
            try? FileManager.default.removeItem(at: t.tus.folder.appendingPathComponent(folder))
        }
        let (second, restart) = try await t.upload("d.bin")
        let done = try second.get()
        let stored = try [UInt8](Data(contentsOf: t.tus.folder.appendingPathComponent("d.bin")))
        await t.remove()

        #expect(restart?.contains("the server no longer has the upload (HTTP 404)") == true, "\(restart ?? "no reason")")
        #expect(done.bytesSent == Int64(size))
        #expect(digest(stored) == digest(content))
    }

    @Test func anEmptyFileIsUploadedByCreationAlone() async throws {
        let t = try await Fixture()
        try t.dir.write("empty.bin", [])
        let done = try await t.upload("empty.bin").result.get()
        let stored = FileManager.default.fileExists(atPath: t.tus.folder.appendingPathComponent("empty.bin").path)
        await t.remove()
        #expect(done.bytes == 0)
        #expect(done.protocol == .tus)
        #expect(stored)
    }

    @Test(.enabled(if: NginxServer.executablePath != nil || ProcessInfo.processInfo.environment["CI"] != nil))
    func putToNginxWebDAVArrivesByteForByte() async throws {
        let t = try await Fixture()
        let content = testBytes(12 << 20 + 7, seed: 10)
        try t.dir.write("e.bin", content)
        try FileManager.default.createDirectory(atPath: t.dir.file("www"), withIntermediateDirectories: true)
        let outcome = try await NginxServer.withServer(root: t.dir.file("www"), options: .init(webDAV: true)) { nginx in
            // auto: nginx answers OPTIONS without tus's headers, so the file goes by PUT.
            let auto = try await t.upload("e.bin", to: nginx.url("/dav/e.bin")).result
            // A location without WebDAV refuses the PUT (nginx answers 413 before reading a
            // body over its 1 MiB default, and stops reading): one line with the status.
            let refused = try await t.upload("e.bin", to: nginx.url("/e2.bin"), protocol: .put).result
            return (auto, refused, nginx.url(""))
        }
        let nginxURL = outcome.2
        let stored = t.dir.contents("www/e.bin")
        await t.remove()

        let done = try outcome.0.get()
        #expect(done.protocol == .put)
        #expect(done.bytesSent == Int64(content.count))
        #expect(digest(stored) == digest(content))
        guard case .failure(let error) = outcome.1 else {
            Issue.record("a PUT nginx refuses must fail")
            return
        }
        #expect(error.kind == .http)
        #expect(error.status == 413)
        #expect(error.description == nginxURL + "/e2.bin: 413 Payload Too Large", "\(error)")
    }

    /// A URL whose path ends with `/` names a folder: a `PUT` stores the file in it under its
    /// own name, percent-encoded, as `curl -T` does; tus and the IETF draft keep the URL.
    @Test(.enabled(if: NginxServer.executablePath != nil || ProcessInfo.processInfo.environment["CI"] != nil))
    func aPutToAFolderURLStoresTheFileUnderItsName() async throws {
        let t = try await Fixture()
        let content = testBytes(70_000, seed: 11)
        try t.dir.write("two words é.bin", content)
        try FileManager.default.createDirectory(atPath: t.dir.file("www/in"), withIntermediateDirectories: true)
        let (outcome, folder) = try await NginxServer.withServer(root: t.dir.file("www"), options: .init(webDAV: true)) { nginx in
            (try await t.upload("two words é.bin", to: nginx.url("/dav/in/")).result, nginx.url("/dav/in/"))
        }
        let stored = t.dir.contents("www/in/two words é.bin")
        await t.remove()

        let done = try outcome.get()
        #expect(done.protocol == .put)
        #expect(done.location == folder + "two%20words%20%C3%A9.bin")
        #expect(digest(stored) == digest(content))
    }

    @Test func thePutTargetOfAFolderURLEndsWithTheFilesName() {
        func target(_ url: String, _ file: String = "/data/a b.bin") -> String { UploadRequest(file: file, url: url).putTarget }
        #expect(target("http://h.example/dav/") == "http://h.example/dav/a%20b.bin")
        #expect(target("http://h.example") == "http://h.example/a%20b.bin")
        #expect(target("https://h.example:8443/up/?sig=x%2Fy#top") == "https://h.example:8443/up/a%20b.bin?sig=x%2Fy#top")
        #expect(target("http://h.example/dav/name.bin") == "http://h.example/dav/name.bin")
        #expect(target("http://h.example/dav/name.bin?x=/") == "http://h.example/dav/name.bin?x=/")
        #expect(target("http://h.example/dav/", "/data/r%s&?#.txt") == "http://h.example/dav/r%25s%26%3F%23.txt")
    }

    @Test func anUnreadableFileFailsInOneLine() async throws {
        let t = try await Fixture()
        let outcome = try await t.upload("missing.bin").result
        await t.remove()
        guard case .failure(let error) = outcome else {
            Issue.record("a missing file must fail")
            return
        }
        #expect(error.kind == .io)
        #expect(error.description == "cannot read \(t.dir.file("missing.bin")): No such file or directory")
    }
}

/// The file identity that decides whether an upload may be continued.
struct UploadFileIdentityTests {
    @Test func changesAreNamed() {
        let base = UploadFile.Identity(length: 10, modified: 1.5, sample: "aa")
        #expect(base.change(to: base) == nil)
        #expect(base.change(to: .init(length: 11, modified: 1.5, sample: "aa"))?.contains("length") == true)
        #expect(base.change(to: .init(length: 10, modified: 2.5, sample: "aa")) == "it was modified")
        #expect(base.change(to: .init(length: 10, modified: 1.5, sample: "bb")) == "its content changed")
    }

    /// A chunk is read into the spare buffer it is given, not into new memory.
    @Test func aChunkIsReadIntoTheSpareItIsGiven() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let content = testBytes(3 << 20, seed: 11)
        try dir.write("c.bin", content)
        let file = try UploadFile(path: dir.file("c.bin"))
        let first = try await file.chunk(at: 0, count: 1 << 20)
        let address = first.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
        let second = try await file.chunk(at: 1 << 20, count: 1 << 20, reusing: consume first)
        #expect(second.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) } == address)
        #expect(Array(second.readableBytesView) == Array(content[(1 << 20)..<(2 << 20)]))
    }

    /// A chunk's bytes start where, within 4 KiB, they lie in the file, in new memory and in a
    /// spare: the kernel's copy from the page cache into memory 1 to 31 bytes past that place
    /// (where `malloc`'s memory lies) runs at a quarter of its speed on AMD's cores.
    @Test(arguments: [0, 1 << 20, 12345] as [Int64])
    func aChunkStartsWhereItLiesInAPage(offset: Int64) async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let content = testBytes(3 << 20, seed: 12)
        try dir.write("c.bin", content)
        let file = try UploadFile(path: dir.file("c.bin"))
        let chunk = try await file.chunk(at: offset, count: 1 << 20)
        #expect(chunk.withUnsafeReadableBytes { Int(bitPattern: $0.baseAddress) } % 4096 == Int(offset % 4096))
        #expect(Array(chunk.readableBytesView) == Array(content[Int(offset)..<Int(offset) + (1 << 20)]))
        let next = offset + 1000
        let again = try await file.chunk(at: next, count: 1 << 20, reusing: consume chunk)
        #expect(again.withUnsafeReadableBytes { Int(bitPattern: $0.baseAddress) } % 4096 == Int(next % 4096))
        #expect(Array(again.readableBytesView) == Array(content[Int(next)..<Int(next) + (1 << 20)]))
    }

    /// A chunk in the page cache is read on the calling thread, without waiting, into its place
    /// within 4 KiB; a file system that cannot tell (tmpfs) says no, and the chunk is read the
    /// waiting way.
    @Test func aCachedChunkIsReadWithoutWaiting() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let content = testBytes(1 << 20, seed: 13)
        try dir.write("c.bin", content)  // just written: in the page cache
        let file = try UploadFile(path: dir.file("c.bin"))
        var buffer = ByteBuffer()  // given the memory it wants
        let offset: Int64 = 5000
        let read = file.readNow(at: offset, count: RequestBody.directChunkSize, into: &buffer)
        let tmpfs: Int64 = 0x0102_1994
        guard read else {
            #expect(haul_file_system_type(dir.file("c.bin")) == tmpfs, "only tmpfs cannot tell what is cached")
            return
        }
        #expect(buffer.withUnsafeReadableBytes { Int(bitPattern: $0.baseAddress) } % 4096 == Int(offset % 4096))
        #expect(Array(buffer.readableBytesView) == Array(content[Int(offset)..<Int(offset) + RequestBody.directChunkSize]))
        #expect(file.readNow(at: Int64(content.count), count: 1, into: &buffer) == false, "nothing past the end")
    }

    /// Placing a buffer's start needs room for the bytes to come besides those skipped; a buffer
    /// without it is left as it is, to grow as it must.
    @Test func aBufferWithoutRoomIsNotPlaced() {
        var roomy = ByteBufferAllocator().buffer(capacity: 8192 + UploadFile.placementRoom)
        UploadFile.place(&roomy, like: 4095, count: 8192)
        #expect(roomy.readableBytes == 0)
        #expect(roomy.withUnsafeMutableWritableBytes { Int(bitPattern: $0.baseAddress) } % 4096 == 4095)
        var tight = ByteBufferAllocator().buffer(capacity: 8192)
        let start = tight.withUnsafeMutableWritableBytes { Int(bitPattern: $0.baseAddress) }
        UploadFile.place(&tight, like: 4095, count: tight.capacity)
        #expect(tight.writerIndex == 0)
        #expect(tight.withUnsafeMutableWritableBytes { Int(bitPattern: $0.baseAddress) } == start)
    }

    @Test(arguments: [0, 1, 65536, 65537, 4 << 20, 4 << 20 + 1, 10 << 30] as [Int64])
    func theSampleIsBoundedAndCoversBothEnds(length: Int64) {
        let offsets = UploadFile.sampleOffsets(length: length)
        #expect(offsets.count <= UploadFile.sampleBlocks)
        #expect(Set(offsets).count == offsets.count)
        if length > 0 {
            #expect(offsets.first == 0)
            #expect((offsets.last ?? 0) + Int64(UploadFile.sampleBlockSize) >= length)
        } else {
            #expect(offsets.isEmpty)
        }
    }
}
