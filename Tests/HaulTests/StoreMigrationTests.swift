import Foundation
import GRDB
import HaulTestSupport
import Testing
@testable import Haul

/// A state folder written by Haul 0.1 (schema v2: a job row and a download row per download,
/// made by `Fixtures/make-state-v2.sh` with that version) opens, migrates, and its downloads
/// continue: the half-done one from its recorded bytes, the queued and paused ones too, the
/// completed one stays completed.
@Suite(.serialized) struct StoreMigrationTests {
    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/state-v2.sqlite").path
    static let sizes = ["a.bin": 2 << 20, "b.bin": 300_000, "c.bin": 100_000, "d.bin": 200_000, "e.bin": 2 << 20]

    /// The fixture's content: byte i is (i * 31 + 7) mod 256.
    static func content(_ size: Int) -> [UInt8] {
        (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
    }

    @Test func aVersion2StateFolderContinuesWhereItStopped() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let server = try await FaultServer.start()
        for (name, size) in Self.sizes { server.serve("/" + name, Route(content: Self.content(size))) }
        // The folder as the old version left it, moved here: paths and the server's port rewritten.
        try FileManager.default.createDirectory(atPath: dir.file("state"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Self.fixture, toPath: dir.file("state/state.sqlite"))
        let queue = try DatabaseQueue(path: dir.file("state/state.sqlite"))
        try await queue.write { db in
            for (table, columns) in [("job", ["url", "destinationPath", "resolvedPath"]), ("download", ["url", "destination"])] {
                for column in columns {
                    try db.execute(
                        sql: "UPDATE \(table) SET \(column) = replace(replace(\(column), '/tmp/haul-v2-fixture', ?), 'http://127.0.0.1:18777', ?)",
                        arguments: [dir.path, "http://127.0.0.1:\(server.port)"])
                }
            }
            // The same files as the old server's: its validators are this server's now.
            for name in Self.sizes.keys {
                let (etag, lastModified) = server.validators("/" + name)
                try db.execute(
                    sql: "UPDATE download SET etag = ?, lastModified = ? WHERE destination LIKE ?",
                    arguments: [etag, lastModified, "%/" + name])
            }
        }
        try queue.close()
        try dir.write("out/c.bin", Self.content(100_000), creatingFolders: true)
        try dir.write("out/a.bin.part", Array(Self.content(2 << 20).prefix(1_380_000)))
        try dir.write("out/e.bin.part", Array(Self.content(2 << 20).prefix(740_000)))

        let harness = Harness(directory: dir)
        let downloader = try harness.downloader()
        // haul get run again with its list: a continues, b starts, c is checked (no body).
        let get = DownloadManager(downloader: downloader, configuration: .init(maxConcurrentDownloads: 1, queue: "haul-get"))
        let requests =
            ["a.bin", "b.bin"].map { DownloadRequest(url: server.url("/" + $0), file: dir.file("out/" + $0)) }
            + [DownloadRequest(url: server.url("/c.bin"), file: dir.file("out/c.bin"))]
        let added = try await get.add(
            contentsOf: requests.map {
                var request = $0; request.connections = 1; return request
            },
            replacing: true, requeueExisting: true)
        #expect(added.allSatisfy { (try? $0.get()) != nil })
        #expect(try added[0].get() == DownloadID("0bdbe6a04d994c28"), "the half-done download keeps its id")
        await get.waitUntilIdle()
        for name in ["a.bin", "b.bin", "c.bin"] {
            #expect(dir.contents("out/" + name) == Self.content(Self.sizes[name]!), "\(name)")
        }
        #expect(
            server.stats("/a.bin").requests.first { $0.method == "GET" }?.header("Range") == "bytes=1220000-",
            "a.bin continues from its recorded bytes")
        #expect(server.stats("/c.bin").bodyBytesSent == 0, "c.bin was complete: no body again")
        await get.shutdown()

        // The daemon's queue: both paused downloads are there, e.bin with its progress.
        let daemon = DownloadManager(downloader: downloader, configuration: .init(queue: "daemon"))
        try await daemon.restore()
        let waiting = await daemon.waiting(from: 0, limit: 10)
        #expect(waiting.map(\.status) == [.paused, .paused])
        #expect(waiting.first { $0.url.hasSuffix("e.bin") }?.progress?.bytesDone == 740_000)
        await daemon.resumeAll()
        await daemon.waitUntilIdle()
        for name in ["d.bin", "e.bin"] {
            #expect(dir.contents("out/" + name) == Self.content(Self.sizes[name]!), "\(name)")
        }
        #expect(server.stats("/e.bin").bodyBytesSent == (2 << 20) - 740_000, "e.bin fetched only what was missing")
        await daemon.shutdown()
        try await downloader.shutdown()
        try await server.shutdown()
    }

    /// The path index holds only the rows that have a path (v12), from a fresh store and from
    /// one of v11 alike, and the engine's lookup by path still goes through it.
    @Test func thePathIndexHoldsOnlyRowsWithAPath() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let queue = try DatabaseQueue(path: dir.file("v11.sqlite"))
        try Store.migrator.migrate(queue, upTo: "v11")
        try await queue.write { db in
            for (id, path) in [(1, nil), (2, "/w/b.bin")] as [(Int64, String?)] {
                try db.execute(
                    sql: "INSERT INTO download (id, queue, url, destinationKind, destination, request, status, path, createdAt, updatedAt) "
                        + "VALUES (?, 'q', ?, 0, ?, '{}', 0, ?, 0, 0)",
                    arguments: [id, "http://h.example/\(id)", "/w/\(id)", path])
            }
        }
        try Store.migrator.migrate(queue)
        let fresh = try DatabaseQueue(path: dir.file("fresh.sqlite"))
        try Store.migrator.migrate(fresh)
        for database in [queue, fresh] {
            try await database.read { db in
                let sql = try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE name = 'download_path'")
                #expect(sql?.contains("WHERE") == true && sql?.contains("IS NOT NULL") == true, "\(sql ?? "no index")")
                let plan = try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN SELECT * FROM download WHERE path = ?", arguments: ["/w/b.bin"])
                #expect(plan.contains { ($0["detail"] as String).contains("download_path") })
            }
        }
        let found = try await queue.read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM download INDEXED BY download_path WHERE path = '/w/b.bin'")
        }
        #expect(found == 1)
        try queue.close()
        try fresh.close()
    }

    @Test func aDownloadWhoseOptionsDoNotReadFailsInsteadOfGoingOnWithoutThem() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try FileManager.default.createDirectory(atPath: dir.file("state"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Self.fixture, toPath: dir.file("state/state.sqlite"))
        let queue = try DatabaseQueue(path: dir.file("state/state.sqlite"))
        try await queue.write { db in
            // A checksum the old version wrote in a form this one cannot read.
            try db.execute(sql: "UPDATE job SET options = replace(options, '\"maxTries\"', '\"checksum\":\"sha-256=zz\",\"maxTries\"') WHERE url LIKE '%d.bin'")
        }
        try queue.close()
        let harness = Harness(directory: dir)
        let downloader = try harness.downloader()
        let daemon = DownloadManager(downloader: downloader, configuration: .init(queue: "daemon"))
        try await daemon.restore()
        let stopped = await daemon.stopped(from: 0, limit: 10)
        let d = try #require(stopped.first { $0.url.hasSuffix("d.bin") })
        #expect(d.status == .failed)
        #expect(d.error?.message == "its options could not be read when the state folder was upgraded; add the download again with them")
        // The other paused download is untouched.
        #expect(await daemon.waiting(from: 0, limit: 10).map(\.url).contains { $0.hasSuffix("e.bin") })
        await daemon.shutdown()
        try await downloader.shutdown()
    }

    /// A state folder of schema v5 (before a download had sources): its rows read as downloads
    /// from their one URL, and a download with mirrors can be written beside them.
    @Test func aVersion5RowIsADownloadFromItsOneURL() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try FileManager.default.createDirectory(atPath: dir.file("state"), withIntermediateDirectories: true)
        let queue = try DatabaseQueue(path: dir.file("state/state.sqlite"))
        try Store.migrator.migrate(queue, upTo: "v5")
        let id = DownloadID.next()
        let request = DownloadRequest(url: "http://127.0.0.1:9/old.bin", file: dir.file("old.bin"))
        try await queue.write { db in
            // The row exactly as v5 wrote it: no sources column.
            try db.execute(
                sql: """
                    INSERT INTO download (id, queue, url, destinationKind, destination, request, status, ranges, createdAt, updatedAt)
                    VALUES (?, 'daemon', ?, 0, ?, ?, ?, ?, 0, 0)
                    """,
                arguments: [
                    id.storedValue, request.url, request.destination.path, try DownloadRow.storedOptions(of: request),
                    DownloadStatus.paused.storedValue, ByteRanges([0..<100]).description,
                ])
        }
        try queue.close()

        let store = try Store(directory: dir.file("state"))
        let row = try #require(try await store.row(id))
        #expect(row.request.sources == [.init(uri: "http://127.0.0.1:9/old.bin")])
        #expect(row.ranges.byteCount == 100, "its progress is kept")
        var mirrored = DownloadRow(
            id: .next(), queue: "daemon", request: DownloadRequest(sources: [.init(uri: "http://a/f"), .init(uri: "http://b/f")], file: "/tmp/f"))
        mirrored.status = .paused
        store.writer.insert(mirrored)
        try await store.flush()
        #expect(try await store.row(mirrored.id)?.request.sources.map(\.uri) == ["http://a/f", "http://b/f"])
    }

    /// An upload a store of schema v9 recorded (before the draft's interop version was kept)
    /// reads as one of version 6, the only one spoken then; a version recorded now reads back.
    @Test func aVersion9UploadGoesOnInInteropVersion6() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try FileManager.default.createDirectory(atPath: dir.file("state"), withIntermediateDirectories: true)
        let queue = try DatabaseQueue(path: dir.file("state/state.sqlite"))
        try Store.migrator.migrate(queue, upTo: "v9")
        let url = "http://127.0.0.1:9/files/old.bin"
        try await queue.write { db in
            // The row exactly as v9 wrote it: no ietfInteropVersion column.
            try db.execute(
                sql: """
                    INSERT INTO upload (file, url, protocol, location, length, modified, sample, createdAt, updatedAt)
                    VALUES ('/tmp/old.bin', ?, 'ietf', 'http://127.0.0.1:9/resumable_upload/1', 10, 0, 'sample', 0, 0)
                    """,
                arguments: [url])
        }
        try queue.close()

        let store = try Store(directory: dir.file("state"))
        let old = try #require(try await store.upload(file: "/tmp/old.bin", url: url))
        #expect(old.ietfInteropVersion == nil)
        #expect(old.ietfVersion == 6)
        var row = old
        row.file = "/tmp/new.bin"
        row.ietfInteropVersion = 3
        try await store.saveUpload(row)
        #expect(try await store.upload(file: "/tmp/new.bin", url: url)?.ietfVersion == 3)
    }
}
