import Crypto
import Foundation
import HaulTestSupport
import Testing
@testable import Haul

/// Piece digests: each piece is checked as soon as its bytes are in; a bad piece is fetched
/// again from another source and the source that served it is dropped and named; only
/// verified pieces are recorded.
@Suite struct PieceChecksumTests {
    /// File work (a piece's digest) asked for by a task that was stopped meanwhile is a
    /// cancellation, not a failure of the download ("cannot run file work…" failed a download
    /// whose segment was given up as its piece was checked).
    @Test func fileWorkOfAStoppedTaskIsACancellation() async {
        let task = Task { () async -> DownloadError? in
            withUnsafeCurrentTask { $0?.cancel() }
            do throws(DownloadError) {
                _ = try await offTheEventLoops { () throws(DownloadError) in 1 }
                return nil
            } catch {
                return error
            }
        }
        #expect(await task.value?.kind == .cancelled)
    }

    static let piece = 256 << 10
    static let size = 24 * piece + 1000

    static func pieces(of content: [UInt8]) -> PieceChecksums {
        let hashes = stride(from: 0, to: content.count, by: piece).map { start in
            sha256Hex(Array(content[start..<min(content.count, start + piece)]))
        }
        return PieceChecksums(algorithm: .sha256, length: Int64(piece), hashes: hashes)
    }

    /// `content` with one byte of piece `index` changed: the same length, another file.
    static func corrupt(_ content: [UInt8], piece index: Int) -> [UInt8] {
        var bad = content
        bad[index * piece + 17] ^= 0xFF
        return bad
    }

    /// Downloads `request`, collecting the notes its progress carried and, as "dropped source
    /// URI: why", the sources its snapshots show dropped (snapshots are lossy: a slow reader
    /// sees the latest, so a note may be missed, but a dropped source stays in every later one).
    static func download(_ request: DownloadRequest, _ harness: Harness) async throws -> (Result<DownloadResult, DownloadError>, [String]) {
        let downloader = try harness.downloader()
        let task = try await downloader.download(request)
        let notes = Task {
            var notes: [String] = []
            for await progress in task.progress {
                if let note = progress.note, notes.last != note { notes.append(note) }
                for source in progress.sources {
                    if let why = source.dropped, !notes.contains("dropped source \(source.uri): \(why)") {
                        notes.append("dropped source \(source.uri): \(why)")
                    }
                }
            }
            return notes
        }
        let result: Result<DownloadResult, DownloadError>
        do throws(DownloadError) { result = .success(try await task.result()) } catch { result = .failure(error) }
        try await downloader.shutdown()
        return (result, await notes.value)
    }

    @Test func aCorruptMirrorIsDroppedAndNamedAndItsPieceFetchedAgain() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        let content = testBytes(Self.size, seed: 61)
        var damaged = content
        for piece in 0..<(Self.size + Self.piece - 1) / Self.piece { damaged = Self.corrupt(damaged, piece: piece) }
        for (name, body) in [("a", content), ("b", content), ("c", damaged)] {
            var route = Route(content: body)
            route.bytesPerSecond = 2 << 20
            server.serve("/\(name).bin", route)
        }
        var request = harness.request(server.url("/a.bin"), file: "f.bin") {
            $0.connections = 6
            $0.minimumSplitSize = Int64(Self.piece)
            $0.pieces = Self.pieces(of: content)
        }
        request.sources += ["/b.bin", "/c.bin"].map { DownloadRequest.Source(uri: server.url($0)) }
        let (result, notes) = try await Self.download(request, harness)
        try await server.shutdown()
        _ = try result.get()
        #expect(digest(harness.directory.contents("f.bin")) == digest(content))
        // Cuts fall on pieces: the damaged mirror's first piece was its own, and named it.
        let dropped = notes.filter { $0.hasPrefix("dropped source") }
        #expect(dropped.count == 1, "\(notes)")
        #expect(dropped.first?.contains("/c.bin: piece ") == true, "\(notes)")
        #expect(dropped.first?.contains(") did not match its sha-256 digest") == true, "\(notes)")
    }

    /// One source, one connection: the stream checks each piece as it passes, and a bad one is
    /// asked for again from its first byte.
    @Test func aStreamFetchesABadPieceAgainFromItsStart() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        let content = testBytes(Self.size, seed: 62)
        var route = Route(content: Self.corrupt(content, piece: 5))
        // The first answer is corrupt, every later one right (a proxy's damaged cache, say).
        route.contentAfterFirstGet = content
        // Without validators the new content still answers the range asked (one with an ETag
        // would say it changed, and the download would start over).
        route.validators = .none
        server.serve("/f.bin", route)
        let request = harness.request(server.url("/f.bin"), file: "f.bin") {
            $0.pieces = Self.pieces(of: content)
        }
        let (result, _) = try await Self.download(request, harness)
        let stats = server.stats("/f.bin")
        try await server.shutdown()
        _ = try result.get()
        #expect(digest(harness.directory.contents("f.bin")) == digest(content))
        // The second request starts where piece 5 does, not at 0.
        #expect(stats.requests.count == 2)
        #expect(stats.requests.last?.header("Range") == "bytes=\(5 * Self.piece)-")
    }

    /// The only source serves a bad piece every time: the download fails in one line naming the
    /// piece, and no file is at the final name.
    @Test func theLastSourceServingABadPieceFailsTheDownload() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        let content = testBytes(Self.size, seed: 63)
        server.serve("/f.bin", Route(content: Self.corrupt(content, piece: 3)))
        let request = harness.request(server.url("/f.bin"), file: "f.bin") {
            $0.connections = 4
            $0.minimumSplitSize = Int64(Self.piece)
            $0.maxTries = 2
            $0.pieces = Self.pieces(of: content)
        }
        let (result, _) = try await Self.download(request, harness)
        try await server.shutdown()
        guard case .failure(let error) = result else {
            Issue.record("a file whose piece 3 never matches completed")
            return
        }
        #expect(error.message.contains("piece 3 (bytes") && error.message.contains("did not match"), "\(error)")
        #expect(!error.message.contains("\n"))
        #expect(harness.directory.contents("f.bin") == nil)
        // What is recorded is whole verified pieces: piece 3 is never among them.
        let row = try #require(try await harness.record(for: harness.directory.file("f.bin")))
        let piece3 = Int64(3 * Self.piece)..<Int64(4 * Self.piece)
        #expect(!row.ranges.ranges.contains { $0.overlaps(piece3) }, "\(row.ranges)")
        for range in row.ranges.ranges {
            #expect(range.lowerBound % Int64(Self.piece) == 0)
            #expect(range.upperBound % Int64(Self.piece) == 0 || range.upperBound == Int64(Self.size))
        }
    }

    @Test func piecesThatDescribeAnotherLengthFailInOneLine() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        let content = testBytes(Self.size, seed: 64)
        server.serve("/f.bin", Route(content: content))
        let request = harness.request(server.url("/f.bin"), file: "f.bin") {
            $0.connections = 4
            $0.pieces = Self.pieces(of: Array(content.prefix(Self.size - 2 * Self.piece)))
        }
        let (result, _) = try await Self.download(request, harness)
        try await server.shutdown()
        guard case .failure(let error) = result else {
            Issue.record("a file of another length than its pieces completed")
            return
        }
        #expect(error.kind == .checksum)
        #expect(error.message.contains("describe another length"), "\(error)")
        #expect(harness.directory.contents("f.bin") == nil)
    }

    /// A first source that cannot be reached does not fail a download that has others.
    @Test func aDeadFirstSourceIsDroppedAtTheFirstContact() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        let content = testBytes(1 << 20, seed: 65)
        server.serve("/f.bin", Route(content: content))
        let gone = server.url("/gone.bin")
        server.serve(
            "/gone.bin",
            {
                var route = Route(content: []); route.status = 404; return route
            }())
        let request = DownloadRequest(
            sources: [.init(uri: gone), .init(uri: server.url("/f.bin"))], file: harness.directory.file("f.bin"))
        let (result, _) = try await Self.download(request, harness)
        try await server.shutdown()
        _ = try result.get()
        #expect(digest(harness.directory.contents("f.bin")) == digest(content))
        // Asked once, then left for the next source (the note saying so may be missed by a
        // slow reader of the snapshots).
        #expect(server.stats("/gone.bin").requests.count == 1)
    }

    /// Real nginx as four mirrors of one file: one answers 404, one has another length, one
    /// serves the same length with every piece damaged. Each is dropped and named, and the
    /// file is byte-identical.
    @Test func nginxMirrorsThatGoWrongAreDroppedAndNamed() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let content = testBytes(Self.size, seed: 66)
        var damaged = content
        for start in stride(from: 0, to: content.count, by: Self.piece) { damaged[start + 5] ^= 0x5A }
        try dir.write("www/good.bin", content, creatingFolders: true)
        try dir.write("www/short.bin", Array(content.prefix(Self.size - Self.piece)))
        try dir.write("www/bad.bin", damaged)
        let harness = try Harness()
        defer { harness.remove() }
        try await NginxServer.withServer(root: dir.file("www"), limitRate: 4 << 20) { nginx in
            let names = ["good", "gone", "short", "bad"]
            var request = DownloadRequest(
                sources: names.map { .init(uri: nginx.url("/limited/\($0).bin")) }, file: harness.directory.file("f.bin"))
            request.connections = 8
            request.minimumSplitSize = Int64(Self.piece)
            request.retryWait = .milliseconds(10)
            request.pieces = Self.pieces(of: content)
            let (result, notes) = try await Self.download(request, harness)
            _ = try result.get()
            #expect(digest(harness.directory.contents("f.bin")) == digest(content))
            for (name, why) in [("gone", "404"), ("short", "serves \(Self.size - Self.piece) bytes"), ("bad", "did not match its sha-256 digest")] {
                #expect(notes.contains { $0.hasPrefix("dropped source \(nginx.url("/limited/\(name).bin"))") && $0.contains(why) }, "\(name): \(notes)")
            }
            // A piece good.bin shared with bad.bin names both, but drops neither: good.bin stays.
            #expect(!notes.contains { $0.hasPrefix("dropped source \(nginx.url("/limited/good.bin"))") }, "\(notes.joined(separator: " / "))")
        }
    }

    @Test func wholePiecesAndByteRanges() {
        let pieces = PieceChecksums(algorithm: .md5, length: 10, hashes: Array(repeating: String(repeating: "0", count: 32), count: 4))
        #expect(pieces.fits(total: 35))
        #expect(pieces.fits(total: 40) && !pieces.fits(total: 41) && !pieces.fits(total: 30))
        #expect(pieces.indices(overlapping: 9..<21) == 0..<3)
        #expect(pieces.wholePieces(of: ByteRanges([0..<15, 18..<35]), total: 35) == ByteRanges([0..<10, 20..<35]))
        // A hostile length neither traps nor passes.
        let huge = PieceChecksums(algorithm: .md5, length: .max, hashes: [String(repeating: "0", count: 32)])
        #expect(huge.fits(total: 10))
        #expect(huge.wholePieces(of: ByteRanges([5..<10]), total: 10) == ByteRanges())
        #expect(throws: DownloadError.self) { try huge.validate() }
        var ranges = ByteRanges([0..<100])
        ranges.remove(20..<30)
        #expect(ranges == ByteRanges([0..<20, 30..<100]))
        #expect(ranges.contains(30..<100) && !ranges.contains(10..<40))
    }
}

/// Metalink/HTTP (RFC 6249): with `followMetalink`, the mirrors a server names in its first
/// answer's `Link` headers serve the file too, checked against its `Digest`.
@Suite struct MetalinkHTTPTests {
    func serve(digest: [UInt8]) async throws -> (FaultServer, [UInt8]) {
        let server = try await FaultServer.start()
        let content = testBytes(4 << 20, seed: 71)
        var origin = Route(content: content)
        origin.bytesPerSecond = 2 << 20
        let sha = Data(SHA256.hash(data: digest)).base64EncodedString()
        origin.responseHeaders = [
            ("Link", "<\(server.url("/m1.bin"))>; rel=duplicate; pri=1, <\(server.url("/m2.bin"))>; rel=duplicate; pri=2"),
            ("Digest", "SHA-256=\(sha)"),
        ]
        server.serve("/f.bin", origin)
        for path in ["/m1.bin", "/m2.bin"] {
            var mirror = Route(content: content)
            mirror.bytesPerSecond = 2 << 20
            server.serve(path, mirror)
        }
        return (server, content)
    }

    @Test func theMirrorsTheServerNamesServeTheFile() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        let (server, content) = try await serve(digest: testBytes(4 << 20, seed: 71))
        let request = harness.request(server.url("/f.bin"), file: "f.bin") {
            $0.connections = 6
            $0.minimumSplitSize = 256 << 10
            $0.followMetalink = true
        }
        _ = try await harness.download(request).get()
        #expect(digest(harness.directory.contents("f.bin")) == digest(content))
        #expect(server.stats("/m1.bin").bodyBytesSent > 0 && server.stats("/m2.bin").bodyBytesSent > 0)

        // Without it, the Link headers are only headers.
        let plain = harness.request(server.url("/f.bin"), file: "g.bin") {
            $0.connections = 6
            $0.minimumSplitSize = 256 << 10
        }
        let sentByMirror = server.stats("/m1.bin").bodyBytesSent
        _ = try await harness.download(plain).get()
        #expect(server.stats("/m1.bin").bodyBytesSent == sentByMirror)
        try await server.shutdown()
    }

    @Test func theServersDigestIsTheChecksum() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        let (server, _) = try await serve(digest: Array("another file".utf8))
        let request = harness.request(server.url("/f.bin"), file: "f.bin") { $0.followMetalink = true }
        let result = try await harness.download(request)
        try await server.shutdown()
        guard case .failure(let error) = result else {
            Issue.record("a file that does not match the server's Digest completed")
            return
        }
        #expect(error.kind == .checksum)
        #expect(harness.directory.contents("f.bin") == nil)
    }
}
