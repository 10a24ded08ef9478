import Foundation
import HaulTestSupport
import NIOCore
import Synchronization
import Testing
@testable import Haul

/// Small downloads start in a part file without a name: it is named `NAME.part` when a
/// checkpoint is due (or the transfer stops), and otherwise goes straight to its final name.
@Suite struct UnnamedPartFileTests {
    @Test func anUnnamedPartFileGetsItsNameWithItsBytes() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let part = try #require(PartFile.unnamed(path: dir.file("f.bin.part")), "this filesystem has no O_TMPFILE")
        let bytes = testBytes(5000, seed: 1)
        try part.write(ByteBuffer(bytes: bytes), at: 0)
        #expect(!part.isNamed)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty)

        #expect(try part.name())
        #expect(part.isNamed)
        #expect(dir.contents("f.bin.part") == bytes)
        // It is locked from the moment it has a name.
        let other = try PartFile(path: dir.file("f.bin.part"))
        #expect(try other.tryLock() != nil)
    }

    /// A checkpoint that comes after the file was put at its final name straight from no name
    /// leaves no `.part` beside it (under load one came that late: the same complete file under
    /// both names, `f11.bin.part` left behind).
    @Test func aFilePutInPlaceFromNoNameIsNeverNamedAfter() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let part = try #require(PartFile.unnamed(path: dir.file("f.bin.part")), "this filesystem has no O_TMPFILE")
        let bytes = testBytes(5000, seed: 9)
        try part.write(ByteBuffer(bytes: bytes), at: 0)
        let committed = try await FileCommitter().commit(part, to: dir.file("f.bin"), replacing: false)
        #expect(committed.path == dir.file("f.bin"))
        // The late checkpoint.
        #expect(try part.name() == false)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["f.bin"])
        #expect(dir.contents("f.bin") == bytes)
    }

    /// A file that finds the committer idle is put in place at once: the linger is for files
    /// that keep coming, and a single download waited it out (5 ms of `haul get` of a small
    /// file's 25). The committer's first linger comes after the file is in place.
    @Test func aFileThatFindsTheCommitterIdleDoesNotWaitForCompany() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let placedBeforeLinger = Mutex<Bool?>(nil)
        let committer = FileCommitter(lingered: { _ in
            placedBeforeLinger.withLock { $0 = $0 ?? FileManager.default.fileExists(atPath: dir.file("f.bin")) }
        })
        let part = try #require(PartFile.unnamed(path: dir.file("f.bin.part")), "this filesystem has no O_TMPFILE")
        try part.write(ByteBuffer(bytes: testBytes(100, seed: 4)), at: 0)
        let committed = try await committer.commit(part, to: dir.file("f.bin"), replacing: false)
        #expect(committed.path == dir.file("f.bin"))
        #expect(dir.contents("f.bin") == testBytes(100, seed: 4))
        #expect(placedBeforeLinger.withLock { $0 } != false)
    }

    /// A batch that holds as many files as its callers can have waiting is written without
    /// waiting out the linger: a fleet member puts at most `-j` files in place at once and
    /// starts no download meanwhile, so a linger waited for files that could not come (one
    /// daemon on PostgreSQL took 7.3 s for 20,000 small files instead of 4.1 s).
    @Test func aBatchAsLargeAsItsFilesBoundDoesNotWaitForCompany() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let ends = Mutex<[FileCommitter.LingerEnd]>([])
        // A linger far longer than the commits take, on a machine loaded by the other tests too
        // (2 s timed out there: the two files came later than that).
        let committer = FileCommitter(linger: .seconds(15)) { end in ends.withLock { $0.append(end) } }
        func part(_ name: String, seed: UInt64) throws -> PartFile {
            let part = try #require(PartFile.unnamed(path: dir.file(name + ".part")), "this filesystem has no O_TMPFILE")
            try part.write(ByteBuffer(bytes: testBytes(100, seed: seed)), at: 0)
            return part
        }
        // The first finds the committer idle: in place at once, then the committer lingers.
        let first = try part("a.bin", seed: 1)
        _ = try await committer.commit(first, to: dir.file("a.bin"), replacing: false)
        let (second, third) = (try part("b.bin", seed: 2), try part("c.bin", seed: 3))
        async let b = committer.commit(second, to: dir.file("b.bin"), replacing: false, waitingAtMost: 2)
        async let c = committer.commit(third, to: dir.file("c.bin"), replacing: false, waitingAtMost: 2)
        #expect(try await [b.path, c.path].sorted() == [dir.file("b.bin"), dir.file("c.bin")])
        #expect(dir.contents("c.bin") == testBytes(100, seed: 3))
        // The linger under way when they came ended because the batch was full, not by time.
        #expect(ends.withLock { $0.first } == .full)
    }

    @Test func anUnnamedPartFileNeverTakesOrRemovesAnotherWritersFile() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let theirs = testBytes(100, seed: 2)
        try dir.write("f.bin.part", theirs)
        let part = try #require(PartFile.unnamed(path: dir.file("f.bin.part")))
        try part.write(ByteBuffer(bytes: testBytes(300, seed: 3)), at: 0)

        #expect(try part.name() == false)
        #expect(!part.isNamed)
        part.remove()
        #expect(dir.contents("f.bin.part") == theirs)
    }

    /// Until a checkpoint is due nothing of a small download is in its folder; the stall's
    /// retry names the part file with what came, and the next request continues from there.
    @Test func aSmallDownloadIsNamedWhenItStopsAndContinuesFromThere() async throws {
        let server = try await FaultServer.start()
        var harness = try Harness()
        harness.stallTimeout = .seconds(2)
        defer { harness.remove() }
        var route = Route(content: testBytes(300_000, seed: 4))
        route.stallFirstAfter = 100_000
        server.serve("/f.bin", route)

        let downloader = try harness.downloader()
        let task = try await downloader.download(harness.request(server.url("/f.bin"), file: "f.bin"))
        #expect(try await waitUntil { server.stats("/f.bin").bodyBytesSent >= 100_000 })
        // Stalled for two seconds from here, before any checkpoint: nothing on disk by name.
        #expect(!harness.directory.exists("f.bin.part") && !harness.directory.exists("f.bin"))
        let result = try await task.result()
        try await downloader.shutdown()
        let stats = server.stats("/f.bin")
        try await server.shutdown()

        #expect(result.bytes == 300_000)
        #expect(digest(harness.directory.contents("f.bin")) == digest(route.content))
        #expect(!harness.directory.exists("f.bin.part"))
        // The second request asked for the rest only: the stopped transfer's bytes were kept.
        #expect(stats.getCount == 2)
        #expect(stats.bodyBytesSent == 300_000, "sent \(stats.bodyBytesSent)")
    }

    /// Two writers of one small file (two processes given the same list): both finish, the
    /// second finds the first's identical copy and takes it as its own.
    @Test func twoWritersOfOneSmallFileBothSucceed() async throws {
        let server = try await FaultServer.start()
        let first = try Harness()
        let second = try Harness()
        defer {
            first.remove()
            second.remove()
        }
        var route = Route(content: testBytes(200_000, seed: 5))
        route.bytesPerSecond = 400_000
        server.serve("/f.bin", route)
        let request = first.request(server.url("/f.bin"), file: "f.bin")

        async let one = first.download(request)
        async let two = second.download(request)
        let results = try await [one, two]
        try await server.shutdown()

        for result in results { #expect(try result.get().path == first.directory.file("f.bin")) }
        #expect(digest(first.directory.contents("f.bin")) == digest(route.content))
        #expect(!first.directory.exists("f.bin.part"))
        #expect(server.stats("/f.bin").getCount == 2)
    }

    /// A crash while the part file has no name leaves nothing behind, and the rerun fetches
    /// the file whole.
    @Test func killNineBeforeTheFirstCheckpointLeavesNothingInTheFolder() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        var route = Route(content: testBytes(400_000, seed: 6))
        route.stallFirstAfter = 100_000
        server.serve("/small.bin", route)
        let arguments = ["get", "-q", "-d", "out", "--timeout", "30", "--state-dir", dir.file("state"), server.url("/small.bin")]

        let haul = try HaulProcess(arguments, in: dir.path)
        // The server's count alone races haul: its bytes can sit in the socket before haul has
        // made the folder. Haul holding an unnamed file there is the moment this test is about.
        let unnamed = dir.file("out") + "/#"
        #expect(
            try await waitUntil {
                server.stats("/small.bin").bodyBytesSent >= 100_000 && haul.openFiles.contains { $0.hasPrefix(unnamed) }
            })
        haul.signal(SIGKILL)
        _ = try await haul.finish()
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.file("out")).isEmpty)

        let (status, stderr) = try await HaulProcess.run(arguments, in: dir.path)
        try await server.shutdown()
        #expect(status == 0, "\(stderr)")
        #expect(digest(dir.contents("out/small.bin")) == digest(route.content))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.file("out")) == ["small.bin"])
    }

    /// A small download claims its name only when it is put in place: a different file found
    /// there then is stepped around, as one found at the start would be (rule 4); theirs stays.
    @Test func aDifferentFileFoundAtTheNameIsSteppedAround() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        var route = Route(content: testBytes(200_000, seed: 7))
        route.bytesPerSecond = 512 << 10
        let theirs = testBytes(1000, seed: 8)
        let result = try await downloadWhileAFileAppears(route, theirs: theirs, in: harness).get()

        #expect(result.path == harness.directory.file("f.1.bin"))
        #expect(harness.directory.contents("f.bin") == theirs)
        #expect(digest(harness.directory.contents("f.1.bin")) == digest(route.content))
        #expect(!harness.directory.exists("f.bin.part") && !harness.directory.exists("f.1.bin.part"))
        // Asked again, the download is found where it went: nothing is fetched again.
        #expect(try await harness.record(for: harness.directory.file("f.1.bin"))?.status == .completed)
    }

    /// A crawl: two URLs of one list whose files share a name, downloaded at the same time.
    /// Both are kept, the second beside the first.
    @Test func twoDownloadsOfOneListWithOneNameAreBothKept() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        var contents: [[UInt8]] = []
        for (index, site) in ["a", "b"].enumerated() {
            var route = Route(content: testBytes(200_000, seed: UInt64(20 + index)))
            route.bytesPerSecond = 400_000
            server.serve("/\(site)/index.html", route)
            contents.append(route.content)
        }
        try dir.write("list", Array((server.url("/a/index.html") + "\n" + server.url("/b/index.html") + "\n").utf8))
        let (status, stderr) = try await HaulProcess.run(
            ["get", "-q", "-j", "2", "-i", "list", "-d", "out", "--state-dir", dir.file("state")],
            in: dir.path)
        try await server.shutdown()

        #expect(status == 0, "\(stderr)")
        let kept = Set([dir.contents("out/index.html"), dir.contents("out/index.1.html")].map { $0.map(digest) })
        #expect(kept == Set(contents.map { Optional(digest($0)) }))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.file("out")).sorted() == ["index.1.html", "index.html"])
    }

    /// What is found at the name is read only if it is a regular file: a FIFO there (which an
    /// open for reading would wait on forever) is someone else's, and is stepped around.
    @Test func aFIFOAtTheNameIsSteppedAroundNotWaitedOn() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        var route = Route(content: testBytes(200_000, seed: 9))
        route.bytesPerSecond = 512 << 10
        let server = try await FaultServer.start()
        server.serve("/f.bin", route)
        let downloader = try harness.downloader()
        let task = try await downloader.download(harness.request(server.url("/f.bin"), file: "f.bin"))
        for await progress in task.progress where progress.bytesDone > 0 { break }
        #expect(mkfifo(harness.directory.file("f.bin"), 0o600) == 0)
        let result = try await task.result()
        try await downloader.shutdown()
        try await server.shutdown()

        #expect(result.path == harness.directory.file("f.1.bin"))
        #expect(digest(harness.directory.contents("f.1.bin")) == digest(route.content))
    }
}
