import Foundation
import GRDB
import HaulTestSupport
import Testing

@testable import Haul

/// The store cannot be written (its disk is full): nothing fails quietly. The downloads stop
/// with one clear error, the command exits non-zero, every file at its final name is complete,
/// and nothing already on disk is lost.
@Suite(.serialized) struct StoreFailureTests {
    @Test(.enabled("needs root and a mountable tmpfs") { TinyDisk.canMount })
    func aFullDiskUnderTheStateFolderStopsWithOneClearError() async throws {
        try await FaultServer.withServer { server in
            let dir = try TestDirectory()
            defer { dir.remove() }
            // Room for the store's schema (its migrations, v8's upload table included, go to the
            // log at the first open), not for the rows of 3000 downloads.
            let disk = try #require(TinyDisk(at: dir.file("state"), size: "320k"))
            defer { disk.unmount() }
            var list = ""
            for index in 0..<3000 {
                server.serve("/f\(index).bin", Route(content: testBytes(1000, seed: UInt64(index))))
                list += server.url("/f\(index).bin") + "\n"
            }
            try dir.write("list.txt", Array(list.utf8))
            let (status, stdout, stderr) = try await HaulProcess.capture(
                ["get", "-q", "-j", "8", "-i", "list.txt", "-d", "out", "--state-dir", dir.file("state")], in: dir.path)
            _ = stdout
            #expect(status == 3, "a local write failed: \(stderr)")
            let lines = stderr.split(separator: "\n")
            #expect(lines.count == 1, "one line, not one a download: \(stderr.prefix(500))")
            #expect(stderr.contains("cannot save the download records in \(dir.file("state"))/state.sqlite"))
            #expect(stderr.contains("disk is full") && stderr.contains("free some space"))
            // None at all when the disk filled before the first download had its file.
            let files = (try? FileManager.default.contentsOfDirectory(atPath: dir.file("out"))) ?? []
            for file in files where !file.hasSuffix(".part") {
                let index = Int(file.dropFirst().prefix { $0.isNumber })!
                #expect(dir.contents("out/" + file) == testBytes(1000, seed: UInt64(index)), "\(file) is complete")
            }
            #expect(files.count < 3000, "it stopped")
        }
    }

    /// `haul mirror` meets a full disk as `haul get` does: the store's failure in one line, not
    /// one a file; a full disk under the tree in a few lines and a count, not one a file (a
    /// 50,000-file tree printed 34,000 lines of the one error).
    @Test(.enabled("needs root and a mountable tmpfs") { TinyDisk.canMount })
    func aMirrorOnAFullDiskSaysSoInAFewLines() async throws {
        try await FaultServer.withServer { server in
            let dir = try TestDirectory()
            defer { dir.remove() }
            let files = MirrorTests.serveTree(on: server, count: 600, size: 8000)
            let state = try #require(TinyDisk(at: dir.file("state"), size: "320k"))
            let records = try await HaulProcess.capture(
                ["mirror", "-q", "-j", "8", server.url("/tree/"), "records", "--state-dir", dir.file("state")], in: dir.path)
            state.unmount()
            #expect(records.status == 3)
            #expect(records.stderr.split(separator: "\n").count == 1, "one line, not one a file: \(records.stderr.prefix(500))")
            #expect(records.stderr.contains("cannot save the download records") && records.stderr.contains("disk is full"))

            let tree = try #require(TinyDisk(at: dir.file("tree"), size: "1m"))
            defer { tree.unmount() }
            let full = try await HaulProcess.capture(
                ["mirror", "-q", "-j", "8", server.url("/tree/"), "tree", "--state-dir", dir.file("state2")], in: dir.path)
            expectAFewFilesAndACount(full)
            // What is at a final name is whole.
            for (path, bytes) in files where FileManager.default.fileExists(atPath: dir.file("tree/" + path)) {
                #expect(dir.contents("tree/" + path) == bytes, "\(path) is complete")
            }
        }
    }

    /// `haul get` of a list onto a full disk says so as a mirror does: a few files, then a count
    /// (it printed a line a file, up to 50 each time the display looked).
    @Test(.enabled("needs root and a mountable tmpfs") { TinyDisk.canMount })
    func aListOnAFullDiskSaysSoInAFewLines() async throws {
        try await FaultServer.withServer { server in
            let dir = try TestDirectory()
            defer { dir.remove() }
            let files = MirrorTests.serveTree(on: server, count: 600, size: 8000)
            let list = files.keys.sorted().map { server.url("/tree/" + $0) }.joined(separator: "\n")
            try dir.write("list.txt", Array(list.utf8))
            let out = try #require(TinyDisk(at: dir.file("out"), size: "1m"))
            defer { out.unmount() }
            let full = try await HaulProcess.capture(
                ["get", "-q", "-j", "8", "-i", "list.txt", "-d", "out", "--state-dir", dir.file("state")], in: dir.path)
            expectAFewFilesAndACount(full)
            for (path, bytes) in files {
                let saved = "out/" + URL(fileURLWithPath: path).lastPathComponent
                if dir.exists(saved) { #expect(dir.contents(saved) == bytes, "\(path) is complete") }
            }
        }
    }

    /// A run that met a full disk ended with status 3, a few files told and one line counting
    /// the rest.
    func expectAFewFilesAndACount(_ run: (status: Int32, stdout: String, stderr: String)) {
        #expect(run.status == 3)
        let lines = run.stderr.split(separator: "\n")
        #expect(lines.count <= DownloadError.Reason.filesToldAlike + 1, "a few lines and a count: \(run.stderr.prefix(800))")
        #expect(lines.last?.contains("more files failed the same way: the disk is full") == true, "\(run.stderr.prefix(800))")
    }

    /// The store fails while downloads wait and none runs, so no attempt ends to notice it:
    /// resuming them fails them with the store's error and leaves the manager idle, instead of
    /// keeping them queued, never to start, and the run waiting forever. (`haul get` hung so
    /// about one run in two when the disk filled between one attempt's end and the next start.)
    @Test(.enabled("needs root and a mountable tmpfs") { TinyDisk.canMount })
    func downloadsWaitingWhenTheStoreFailsFailWithItsError() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let disk = try #require(TinyDisk(at: dir.file("state"), size: "1m"))
        defer { disk.unmount() }
        let downloader = try Downloader(.init(stateDirectory: dir.file("state")))
        do {
            let manager = DownloadManager(downloader: downloader, configuration: .init(maxConcurrentDownloads: 2))
            // A paused upload, then paused downloads (nothing runs) until their rows fill the disk.
            try dir.write("up.bin", testBytes(1000, seed: 5))
            let upload = try await manager.addUpload(UploadRequest(file: dir.file("up.bin"), url: "http://127.0.0.1:9/up.bin"), paused: true)
            var ids: [DownloadManager.ID] = []
            for batch in 0..<50 {
                let requests = (0..<200).map { DownloadRequest(url: "http://127.0.0.1:9/\(batch)/\($0).bin", file: dir.file("out/\(batch)-\($0).bin")) }
                do throws(DownloadError) {
                    ids += try await manager.add(contentsOf: requests, paused: true).compactMap { try? $0.get() }
                    try await manager.store.flush()
                } catch {
                    break
                }
            }
            let failure = await manager.failure
            #expect(failure?.message.contains("disk is full") == true, "the disk filled: \(String(describing: failure))")
            for id in ids.prefix(10) { await manager.resume(id) }
            // Resumed after the downloads' halt: it fails too, rather than waiting to start.
            await manager.resume(upload)
            let idle = await withTaskGroup(of: Bool.self) { group in
                group.addTask {
                    await manager.waitUntilIdle()
                    return true
                }
                group.addTask {
                    try? await Task.sleep(for: .seconds(10))
                    return false
                }
                let first = await group.next() ?? false
                // A shut-down manager is idle: the waiter returns, and so does the test.
                if !first { await manager.shutdown() }
                group.cancelAll()
                return first
            }
            #expect(idle, "the resumed downloads stayed queued with the store failed")
            let resumed = await manager.download(ids[0])
            #expect(resumed?.status == .failed && resumed?.error == failure, "\(String(describing: resumed))")
            #expect(await manager.upload(upload)?.status == .failed)
            await manager.shutdown()
        }
        // Its last words are the store's failure too.
        try? await downloader.shutdown()
    }

    @Test(.enabled("needs root and a mountable tmpfs") { TinyDisk.canMount })
    func aReadOnlyStateFolderSaysSoAndDoesNotAskForSpace() async throws {
        try await FaultServer.withServer { server in
            let dir = try TestDirectory()
            defer { dir.remove() }
            server.serve("/a.bin", Route(content: testBytes(1000, seed: 1)))
            server.serve("/b.bin", Route(content: testBytes(1000, seed: 2)))
            let disk = try #require(TinyDisk(at: dir.file("state"), size: "4m"))
            defer { disk.unmount() }
            let first = try await HaulProcess.capture(["get", "-q", "-d", "out", "--state-dir", dir.file("state"), server.url("/a.bin")], in: dir.path)
            #expect(first.status == 0, "\(first.stderr)")
            #expect(disk.makeReadOnly())
            let (status, _, stderr) = try await HaulProcess.capture(
                ["get", "-q", "-d", "out", "--state-dir", dir.file("state"), server.url("/b.bin")], in: dir.path)
            #expect(status == 3, "\(stderr)")
            #expect(stderr.split(separator: "\n").count == 1, "\(stderr)")
            #expect(stderr.contains("read-only"), "\(stderr)")
            #expect(!stderr.contains("free some space"), "\(stderr)")
            #expect(stderr.contains("--state-dir"), "\(stderr)")
        }
    }

    /// A record missing a value every download has (written by hand, or by another program) is
    /// a store error, said as such, not a crash of the process reading it.
    @Test func aRecordWithoutARequiredValueIsAnErrorNotACrash() throws {
        let row = DownloadRow(id: DownloadID(rawValue: 3), queue: "q", request: DownloadRequest(url: "http://a.example/f", file: "/w/f"))
        var values = Dictionary(uniqueKeysWithValues: zip(DownloadRow.storedColumns, try row.storedValues()))
        #expect(try DownloadRow(row: Row(values)).request.url == "http://a.example/f")
        for column in ["id", "url", "request", "priority", "createdAt"] {
            values = Dictionary(uniqueKeysWithValues: zip(DownloadRow.storedColumns, try row.storedValues()))
            values[column] = .some(nil)
            #expect(throws: DatabaseError.self, "\(column)") { try DownloadRow(row: Row(values)) }
        }
    }
}
