import Foundation
import HaulDaemon
import HaulTestSupport
import Testing
@testable import Haul

/// Symbolic links planted where a download writes: a `NAME.part` that points elsewhere, a
/// folder that leads out of the download folder, and a folder swapped for a link between the
/// add and the start. Nothing outside is ever written; the planted link is left as it is.
@Suite(.serialized) struct SymlinkTests {
    static let content = testBytes(300_000, seed: 31)
    static let precious: [UInt8] = Array("someone else's file\n".utf8)

    /// A folder with `dl/` and `elsewhere/victim`, and a server with `/file.bin`.
    func withFolders(_ body: (FaultServer, TestDirectory) async throws -> Void) async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        server.serve("/file.bin", Route(content: Self.content))
        try dir.write("dl/.keep", [], creatingFolders: true)
        try dir.write("elsewhere/victim", Self.precious, creatingFolders: true)
        do { try await body(server, dir) } catch {
            try? await server.shutdown()
            throw error
        }
        try await server.shutdown()
    }

    func isLink(_ path: String) -> Bool {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: path)) != nil
    }

    @Test func getStepsAroundAPlantedPartFile() async throws {
        try await withFolders { server, dir in
            symlink(dir.file("elsewhere/victim"), dir.file("dl/file.bin.part"))
            let (status, _, stderr) = try await HaulProcess.capture(
                ["get", "-q", "-d", "dl", "--state-dir", dir.file("state"), server.url("/file.bin")], in: dir.path)
            #expect(status == 0, "\(stderr)")
            #expect(dir.contents("elsewhere/victim") == Self.precious)
            #expect(isLink(dir.file("dl/file.bin.part")), "the planted link is left alone")
            #expect(!isLink(dir.file("dl/file.bin")) && !dir.exists("dl/file.bin"))
            #expect(dir.contents("dl/file.1.bin") == Self.content)
        }
    }

    @Test func getRefusesAListFolderThatLeadsOutsideTheDownloadFolder() async throws {
        try await withFolders { server, dir in
            symlink(dir.file("elsewhere"), dir.file("dl/sub"))
            try dir.write("list.txt", Array("\(server.url("/file.bin"))\n  dir=dl/sub\n".utf8))
            let (status, _, stderr) = try await HaulProcess.capture(
                ["get", "-q", "-d", "dl", "--max-tries", "1", "--state-dir", dir.file("state"), "-i", "list.txt"], in: dir.path)
            #expect(status != 0)
            #expect(stderr.contains("leads outside"), "\(stderr)")
            #expect(stderr.split(separator: "\n").count == 1, "one line: \(stderr)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir.file("elsewhere")) == ["victim"])
            #expect(dir.contents("elsewhere/victim") == Self.precious)
        }
    }

    @Test func daemonStepsAroundAPlantedPartFile() async throws {
        try await withDaemon { t async throws in
            let (server, dir, daemon) = (t.server, t.dir, t.daemon)
            server.serve("/file.bin", Route(content: Self.content))
            try dir.write("downloads/.keep", [], creatingFolders: true)
            try dir.write("elsewhere/victim", Self.precious, creatingFolders: true)
            symlink(dir.file("elsewhere/victim"), dir.file("downloads/file.bin.part"))
            let gid = try #require(try await daemon.call("aria2.addUri", [[.string(server.url("/file.bin"))], ["out": "file.bin"]]).string)
            let done = try await daemon.waitFor(gid) { $0["status"] == "complete" || $0["status"] == "error" }
            #expect(done["status"] == "complete", "\(done)")
            #expect(dir.contents("elsewhere/victim") == Self.precious)
            #expect(isLink(dir.file("downloads/file.bin.part")))
            #expect(!dir.exists("downloads/file.bin"))
            #expect(dir.contents("downloads/file.1.bin") == Self.content)
        }
    }

    @Test func daemonChecksTheFolderWhenTheDownloadStartsNotOnlyWhenAdded() async throws {
        try await withDaemon { t async throws in
            let (server, dir, daemon) = (t.server, t.dir, t.daemon)
            server.serve("/file.bin", Route(content: Self.content))
            try dir.write("downloads/.keep", [], creatingFolders: true)
            try dir.write("elsewhere/.keep", [], creatingFolders: true)
            let gid = try #require(
                try await daemon.call(
                    "aria2.addUri",
                    [
                        [.string(server.url("/file.bin"))], ["dir": "race", "pause": "true"],
                    ]
                ).string)
            // Swapped in after the add was checked and accepted.
            try? FileManager.default.removeItem(atPath: dir.file("downloads/race"))
            symlink(dir.file("elsewhere"), dir.file("downloads/race"))
            try await daemon.call("aria2.unpause", [.string(gid)])
            let failed = try await daemon.waitFor(gid) { $0["status"] == "error" || $0["status"] == "complete" }
            #expect(failed["status"] == "error", "\(failed)")
            #expect(failed["errorMessage"]?.string?.contains("leads outside") == true, "\(failed)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir.file("elsewhere")) == [".keep"])

            // A link that stays inside the download folder is followed, as before.
            try dir.write("downloads/real/.keep", [], creatingFolders: true)
            symlink("real", dir.file("downloads/alias"))
            let inside = try #require(try await daemon.call("aria2.addUri", [[.string(server.url("/file.bin"))], ["dir": "alias"]]).string)
            let done = try await daemon.waitFor(inside) { $0["status"] == "complete" || $0["status"] == "error" }
            #expect(done["status"] == "complete", "\(done)")
            #expect(dir.contents("downloads/real/file.bin") == Self.content)
        }
    }

    @Test func aFolderSwappedAfterTheStartStillGetsTheFile() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try dir.write("root/a/.keep", [], creatingFolders: true)
        try dir.write("elsewhere/.keep", [], creatingFolders: true)
        let folder = try DownloadFolder(dir.file("root/a"), beneath: dir.file("root"))
        let part = try #require(PartFile.unnamed(path: dir.file("root/a/f.bin.part"), in: folder))
        // The folder is renamed and a link to elsewhere takes its place: names go on being made
        // in the folder that was opened.
        #expect(rename(dir.file("root/a"), dir.file("root/moved")) == 0)
        symlink(dir.file("elsewhere"), dir.file("root/a"))
        #expect(try part.name())
        #expect(dir.exists("root/moved/f.bin.part"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.file("elsewhere")) == [".keep"])
        #expect(throws: DownloadError.self) { try DownloadFolder(dir.file("root/a"), beneath: dir.file("root")) }
        // Made where missing, one folder at a time.
        let made = try DownloadFolder(dir.file("root/b/c"), beneath: dir.file("root"))
        #expect(made.path == dir.file("root/b/c"))
        #expect(dir.exists("root/b/c"))
        #expect(throws: DownloadError.self) { try DownloadFolder(dir.file("root/a/deeper"), beneath: dir.file("root")) }
        #expect(!dir.exists("elsewhere/deeper"))
    }

    @Test func aDownloaderOpensItsDownloadFolderOnceAndAgainWhenItIsReplaced() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try dir.write("root/.keep", [], creatingFolders: true)
        try dir.write("elsewhere/.keep", [], creatingFolders: true)
        let folders = DownloadFolders()
        let first = try folders.folder(dir.file("root"), beneath: dir.file("root"))
        // A list of files into one folder: the same descriptor for each.
        #expect(try folders.folder(dir.file("root"), beneath: dir.file("root")) === first)
        // A folder below it is opened beneath the held root, made where missing.
        let below = try folders.folder(dir.file("root/sub"), beneath: dir.file("root"))
        #expect(below !== first && dir.exists("root/sub"))
        // The root removed and made again (`rm -rf out; mkdir out`): the new folder is used.
        #expect(rename(dir.file("root"), dir.file("old")) == 0)
        try dir.write("root/.keep", [], creatingFolders: true)
        let again = try folders.folder(dir.file("root"), beneath: dir.file("root"))
        #expect(again !== first)
        let part = try #require(PartFile.unnamed(path: dir.file("root/f.bin.part"), in: again))
        #expect(try part.name())
        #expect(dir.exists("root/f.bin.part") && !dir.exists("old/f.bin.part"))
        // A link planted below the held root still leads nowhere.
        symlink(dir.file("elsewhere"), dir.file("root/out"))
        #expect(throws: DownloadError.self) { try folders.folder(dir.file("root/out"), beneath: dir.file("root")) }
    }

    @Test func aFolderThatCannotBeFlushedIsAFailureNotASuccess() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try dir.write("a/.keep", [], creatingFolders: true)
        let part = try PartFile(path: dir.file("a/f.bin.part"))
        try part.syncFolder()
        // The folder is gone from its path: its names cannot be made durable, and that is said.
        #expect(rename(dir.file("a"), dir.file("b")) == 0)
        #expect(throws: DownloadError.self) { try part.syncFolder() }
        // Held open (a confined download), it is flushed whatever its path has become.
        let folder = try DownloadFolder(dir.file("b"), beneath: dir.path)
        let held = try PartFile(path: dir.file("b/g.bin.part"), in: folder)
        #expect(rename(dir.file("b"), dir.file("c")) == 0)
        try held.syncFolder()
    }
}
