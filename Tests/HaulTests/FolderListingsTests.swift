import Foundation
import HaulTestSupport
import Testing
@testable import Haul

/// A folder's listing answers as `lstat` would, however the folder changed since it was read.
struct FolderListingsTests {
    /// Also where every name has the same digest: each one found is then looked up, and a name
    /// removed leaves the others' digest in place.
    @Test(arguments: [false, true]) func seesNamesMadeAndRemovedAfterTheFolderWasRead(colliding: Bool) throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try Data("a".utf8).write(to: URL(fileURLWithPath: dir.file("a.bin")))
        let listings = colliding ? FolderListings(digest: { _ in 7 }, questionsBeforeWatching: 0) : FolderListings(questionsBeforeWatching: 0)

        #expect(listings.contains("a.bin", or: "a.bin.part", in: dir.path) == true)
        #expect(listings.contains("b.bin", or: "b.bin.part", in: dir.path) == false)
        try Data("b".utf8).write(to: URL(fileURLWithPath: dir.file("b.bin.part")))
        #expect(listings.contains("b.bin", or: "b.bin.part", in: dir.path) == true)
        try FileManager.default.moveItem(atPath: dir.file("b.bin.part"), toPath: dir.file("b.bin"))
        #expect(listings.contains("b.bin", or: "x", in: dir.path) == true)
        #expect(listings.contains("b.bin.part", or: "x", in: dir.path) == false)
        try FileManager.default.removeItem(atPath: dir.file("a.bin"))
        #expect(listings.contains("a.bin", or: "a.bin.part", in: dir.path) == false)
        #expect(listings.contains("b.bin", or: "x", in: dir.path) == true)
        try FileManager.default.createDirectory(atPath: dir.file("c"), withIntermediateDirectories: false)
        #expect(listings.contains("c", or: "x", in: dir.path) == true)
    }

    /// More changes queued than one read of the queue holds (about 300 events of long names fill
    /// its 8 KiB): every one is applied before the answer, the first name made and the last.
    @Test func moreChangesThanOneReadHoldsAreAllSeen() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let listings = FolderListings(questionsBeforeWatching: 0)
        #expect(listings.contains("x", or: "y", in: dir.path) == false)
        let names = (0..<600).map { String(format: "%04d-", $0) + String(repeating: "n", count: 40) }
        for name in names {
            let fd = open(dir.file(name), O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)
            try #require(fd >= 0)
            close(fd)
        }
        for name in [names[0], names[299], names[300], names[599]] {
            #expect(listings.contains(name, or: "y", in: dir.path) == true)
        }
        for name in names.prefix(500) { try FileManager.default.removeItem(atPath: dir.file(name)) }
        #expect(listings.contains(names[499], or: names[0], in: dir.path) == false)
        #expect(listings.contains(names[500], or: "y", in: dir.path) == true)
    }

    /// Names are the file system's bytes: a name in another Unicode normalisation is another
    /// name (a Swift string would call the two equal).
    @Test func namesAreComparedByTheirBytes() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let decomposed = "cafe\u{301}.bin", composed = "caf\u{E9}.bin"
        let fd = open(dir.file(decomposed), O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)
        try #require(fd >= 0)
        close(fd)
        let listings = FolderListings(questionsBeforeWatching: 0)

        #expect(listings.contains(decomposed, or: "x", in: dir.path) == true)
        #expect(listings.contains(composed, or: "x", in: dir.path) == false)
    }

    /// A folder on a file system other machines write to as well is not kept: inotify would
    /// not hear another daemon of a fleet put a file in it. The caller looks each time.
    @Test func aFolderOnASharedFileSystemIsLeftToTheCaller() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try Data("a".utf8).write(to: URL(fileURLWithPath: dir.file("a.bin")))
        #expect(FolderListings(isShared: { _ in true }, questionsBeforeWatching: 0).contains("a.bin", or: "x", in: dir.path) == nil)
        #expect(FolderListings(isShared: { _ in false }, questionsBeforeWatching: 0).contains("a.bin", or: "x", in: dir.path) == true)
    }

    @Test func networkAndUserSpaceFileSystemsAreShared() throws {
        #expect(FolderListings.isShared(fileSystemType: 0x6969), "NFS")
        #expect(FolderListings.isShared(fileSystemType: 0xFF53_4D42), "CIFS")
        #expect(FolderListings.isShared(fileSystemType: 0x6573_5546), "FUSE (sshfs, rclone mount…)")
        #expect(FolderListings.isShared(fileSystemType: Int64(Int32(bitPattern: 0xFE53_4D42))), "SMB2, as a sign-extended 32-bit field")
        #expect(!FolderListings.isShared(fileSystemType: 0xEF53), "ext4")
        #expect(!FolderListings.isShared(fileSystemType: 0x0102_1994), "tmpfs")
        let dir = try TestDirectory()
        defer { dir.remove() }
        #expect(!FolderListings.isOnSharedFileSystem(dir.path), "the tests' own folder is local")
    }

    /// The first questions of a run are left to the caller and watch nothing: a run of a few
    /// files pays no watch's teardown when it ends. The next one reads and watches the folder.
    @Test func theFirstQuestionsWatchNothing() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try Data("a".utf8).write(to: URL(fileURLWithPath: dir.file("a.bin")))
        let listings = FolderListings()

        for _ in 0..<FolderListings.questionsBeforeWatching {
            #expect(listings.contains("a.bin", or: "x", in: dir.path) == nil)
        }
        #expect(listings.watchedFolders == 0)
        #expect(listings.contains("a.bin", or: "x", in: dir.path) == true)
        #expect(listings.contains("b.bin", or: "x", in: dir.path) == false)
        #expect(listings.watchedFolders == 1)
    }

    /// A folder not there yet is looked at by the caller; once made, it is read.
    @Test func aFolderMadeLaterIsReadThen() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let listings = FolderListings(questionsBeforeWatching: 0)
        let folder = dir.file("later")

        #expect(listings.contains("a", or: "b", in: folder) == nil)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        #expect(listings.contains("a", or: "b", in: folder) == false)
    }

    /// A folder moved away no longer answers for its old path.
    @Test func aFolderMovedAwayIsForgotten() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let folder = dir.file("f")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        let listings = FolderListings(questionsBeforeWatching: 0)
        #expect(listings.contains("a", or: "b", in: folder) == false)

        try FileManager.default.moveItem(atPath: folder, toPath: dir.file("g"))
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        try Data("a".utf8).write(to: URL(fileURLWithPath: folder + "/a"))
        #expect(listings.contains("a", or: "b", in: folder) == true)
    }

    /// More changes between two questions than the kernel queues: the folder is read again.
    @Test func aLostQueueReadsTheFolderAgain() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let listings = FolderListings(questionsBeforeWatching: 0)
        #expect(listings.contains("n0", or: "x", in: dir.path) == false)

        let queued =
            (try? String(contentsOfFile: "/proc/sys/fs/inotify/max_queued_events", encoding: .utf8))
            .flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? 16384
        let count = min(queued + 100, 200_000)
        for index in 0..<count {
            let fd = open(dir.file("n\(index)"), O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)
            try #require(fd >= 0)
            close(fd)
        }
        #expect(listings.contains("n0", or: "x", in: dir.path) == true)
        #expect(listings.contains("n\(count - 1)", or: "x", in: dir.path) == true)
    }

    /// A file that appears after the folder was read is met as one found before the download:
    /// the same size as the remote's is taken as complete, and no body is fetched for it. So for
    /// downloads into a folder and for downloads to a path each (a mirror's, a list's `out=`).
    @Test(arguments: [false, true]) func aDownloadSeesAFileMadeAfterTheFolderWasRead(toPaths: Bool) async throws {
        let harness = try Harness()
        defer { harness.remove() }
        let server = try await FaultServer.start()
        let first = Route(content: testBytes(1000, seed: 1))
        let second = Route(content: testBytes(1000, seed: 2))
        server.serve("/a.bin", first)
        server.serve("/b.bin", second)
        for index in 1...FolderListings.questionsBeforeWatching { server.serve("/c\(index).bin", first) }
        let downloader = try harness.downloader()

        let request = { (name: String) in harness.request(server.url("/" + name), file: toPaths ? "out/" + name : nil) }
        // The first makes the folder; by the last the folder is read and watched.
        for index in 0...FolderListings.questionsBeforeWatching {
            let name = index == 0 ? "a.bin" : "c\(index).bin"
            let result = try await downloader.download(request(name)).result()
            #expect(result.path == harness.directory.file("out/" + name))
        }
        #expect(downloader.folders.watchedFolders == 1)
        try Data(second.content).write(to: URL(fileURLWithPath: harness.directory.file("out/b.bin")))
        let b = try await downloader.download(request("b.bin")).result()
        try await downloader.shutdown()
        try await server.shutdown()

        #expect(b.wasAlreadyComplete)
        #expect(server.stats("/b.bin").getCount == 0)
    }
}
