import Foundation
import HaulTestSupport
import Testing
@testable import Haul

/// `--checksum-file` and `--require-checksum` of `haul get` and `haul mirror`, the built binary
/// against the fault-injecting server.
@Suite(.serialized) struct ChecksumFileCommandLineTests {
    static let good = testBytes(3000, seed: 41)
    static let bad = testBytes(4000, seed: 42)
    static let other = testBytes(5000, seed: 43)

    /// good.bin, bad.bin (whose listed digest is of other bytes) and unlisted.bin.
    static func server() async throws -> FaultServer {
        let server = try await FaultServer.start()
        server.serve("/files/good.bin", Route(content: good))
        server.serve("/files/bad.bin", Route(content: bad))
        server.serve("/files/unlisted.bin", Route(content: other))
        return server
    }

    /// A list in both formats: good.bin under the name `out=` gives it, bad.bin with a wrong
    /// digest, and a file this run never downloads.
    static let sums = """
        # SHA256SUMS
        SHA256 (renamed.bin) = \(sha256Hex(good))
        \(sha256Hex(testBytes(4000, seed: 99)))  ./bad.bin
        \(sha256Hex(testBytes(10, seed: 1)))  never-downloaded.bin

        """

    static func list(_ server: FaultServer) -> String {
        """
        \(server.url("/files/good.bin"))
          out=renamed.bin
        \(server.url("/files/bad.bin"))
        \(server.url("/files/unlisted.bin"))

        """
    }

    @Test func aListedFileIsVerifiedACorruptOneFailsAndAnUnlistedOneIsSaid() async throws {
        let server = try await Self.server()
        let dir = try TestDirectory()
        defer { dir.remove() }
        try dir.write("list.txt", Array(Self.list(server).utf8))
        try dir.write("SHA256SUMS", Array(Self.sums.utf8))
        let (status, stderr) = try await HaulProcess.run(
            ["get", "-i", "list.txt", "-d", "out", "--checksum-file", "SHA256SUMS", "--state-dir", dir.file("state")], in: dir.path)
        try await server.shutdown()

        #expect(status == 5, "\(stderr)")
        #expect(stderr.contains("checksum mismatch: expected sha-256=\(sha256Hex(testBytes(4000, seed: 99)))"), "\(stderr)")
        #expect(stderr.contains("haul: unlisted.bin is not in the checksum file SHA256SUMS: not verified"), "\(stderr)")
        #expect(!stderr.contains("never-downloaded"), "\(stderr)")
        #expect(digest(dir.contents("out/renamed.bin")) == digest(Self.good))
        #expect(!dir.exists("out/bad.bin"), "a mismatch never has the final name")
        #expect(digest(dir.contents("out/unlisted.bin")) == digest(Self.other))
    }

    @Test func requireChecksumFailsAnUnlistedFileWithoutFetchingIt() async throws {
        let server = try await Self.server()
        let dir = try TestDirectory()
        defer { dir.remove() }
        try dir.write("list.txt", Array(Self.list(server).utf8))
        // bad.bin's digest right this time: only the unlisted file fails.
        let sums = Self.sums.replacingOccurrences(of: sha256Hex(testBytes(4000, seed: 99)), with: sha256Hex(Self.bad))
        try dir.write("SHA256SUMS", Array(sums.utf8))
        let (status, stderr) = try await HaulProcess.run(
            ["get", "-q", "-i", "list.txt", "-d", "out", "--checksum-file", "SHA256SUMS", "--require-checksum", "--state-dir", dir.file("state")],
            in: dir.path)
        let unlistedRequests = server.stats("/files/unlisted.bin").requests.count
        try await server.shutdown()

        #expect(status == 5, "\(stderr)")
        #expect(
            stderr == "haul: \(server.url("/files/unlisted.bin")): unlisted.bin is not in the checksum file SHA256SUMS: not downloaded (--require-checksum)\n")
        #expect(unlistedRequests == 0)
        #expect(!dir.exists("out/unlisted.bin"))
        #expect(digest(dir.contents("out/renamed.bin")) == digest(Self.good))
        #expect(digest(dir.contents("out/bad.bin")) == digest(Self.bad))
    }

    @Test func anEntrysOwnChecksumWinsAndTheListMayBeAURL() async throws {
        let server = try await Self.server()
        server.serve("/SHA256SUMS", Route(content: Array(Self.sums.utf8)))
        let dir = try TestDirectory()
        defer { dir.remove() }
        // bad.bin's own (right) checksum wins over the list's wrong one.
        let list = """
            \(server.url("/files/bad.bin"))
              checksum=sha-256=\(sha256Hex(Self.bad))
            \(server.url("/files/good.bin"))
              out=renamed.bin

            """
        try dir.write("list.txt", Array(list.utf8))
        let (status, stderr) = try await HaulProcess.run(
            ["get", "-q", "-i", "list.txt", "-d", "out", "--checksum-file", server.url("/SHA256SUMS"), "--state-dir", dir.file("state")],
            in: dir.path)
        try await server.shutdown()
        #expect(status == 0, "\(stderr)")
        #expect(digest(dir.contents("out/bad.bin")) == digest(Self.bad))
        #expect(digest(dir.contents("out/renamed.bin")) == digest(Self.good))
    }

    @Test func aURLOnTheCommandLineIsMatchedByItsName() async throws {
        let server = try await Self.server()
        let dir = try TestDirectory()
        defer { dir.remove() }
        try dir.write("SHA256SUMS", Array(Self.sums.utf8))
        let (status, stderr) = try await HaulProcess.run(
            ["get", "-q", "--checksum-file", "SHA256SUMS", "--state-dir", dir.file("state"), server.url("/files/bad.bin")], in: dir.path)
        try await server.shutdown()
        #expect(status == 5, "\(stderr)")
        #expect(stderr.contains("checksum mismatch"), "\(stderr)")
        #expect(!dir.exists("bad.bin"))
    }

    @Test func aMalformedListIsOneLineAndNothingIsFetched() async throws {
        let server = try await Self.server()
        let dir = try TestDirectory()
        defer { dir.remove() }
        try dir.write("SHA256SUMS", Array("\(sha256Hex(Self.good))  good.bin\nnonsense\n".utf8))
        let (status, stderr) = try await HaulProcess.run(
            ["get", "-q", "--checksum-file", "SHA256SUMS", "--state-dir", dir.file("state"), server.url("/files/good.bin")], in: dir.path)
        let requests = server.stats("/files/good.bin").requests.count
        try await server.shutdown()
        #expect(status == 2)
        #expect(stderr.hasPrefix("haul: SHA256SUMS:2: expected") && stderr.split(separator: "\n").count == 1, "\(stderr)")
        #expect(requests == 0)

        let missing = try await HaulProcess.run(
            ["get", "-q", "--checksum-file", "missing", "--state-dir", dir.file("state"), "http://127.0.0.1:9/x"], in: dir.path)
        #expect(missing.status == 3 && missing.stderr.contains("cannot read checksum file missing"), "\(missing.stderr)")
        let alone = try await HaulProcess.run(["get", "--require-checksum", "http://127.0.0.1:9/x"], in: dir.path)
        #expect(alone.status == 64 && alone.stderr.contains("--require-checksum needs --checksum-file"), "\(alone.stderr)")
    }

    /// A tree of hand-written listings: a.txt; sub/b.bin, sub/c.bin; sub/deep/d.bin, sub/deep/e.bin.
    static func tree(_ server: FaultServer) -> [String: [UInt8]] {
        func page(_ links: [String]) -> Route {
            var route = Route(content: Array(links.map { "<a href=\"\($0)\">\($0)</a>" }.joined(separator: "\n").utf8))
            route.contentType = "text/html"
            return route
        }
        server.serve("/t/", page(["a.txt", "sub/"]))
        server.serve("/t/sub/", page(["b.bin", "c.bin", "deep/"]))
        server.serve("/t/sub/deep/", page(["d.bin", "e.bin"]))
        var files: [String: [UInt8]] = [:]
        for (index, path) in ["a.txt", "sub/b.bin", "sub/c.bin", "sub/deep/d.bin", "sub/deep/e.bin"].enumerated() {
            files[path] = testBytes(1000 + 100 * index, seed: UInt64(50 + index))
            server.serve("/t/" + path, Route(content: files[path]!))
        }
        return files
    }

    @Test func mirrorVerifiesFilesInSubfoldersAndCountsThem() async throws {
        let server = try await FaultServer.start()
        let files = Self.tree(server)
        let dir = try TestDirectory()
        defer { dir.remove() }
        // c.bin's digest is wrong; d.bin is listed by its name alone; e.bin is not listed.
        let sums = """
            \(sha256Hex(files["a.txt"]!))  a.txt
            SHA256 (./sub/b.bin) = \(sha256Hex(files["sub/b.bin"]!))
            \(sha256Hex(Self.bad))  sub/c.bin
            \(sha256Hex(files["sub/deep/d.bin"]!))  d.bin

            """
        try dir.write("SHA256SUMS", Array(sums.utf8))
        let arguments = ["mirror", "--json", "--checksum-file", "SHA256SUMS", "--state-dir", dir.file("state"), server.url("/t/")]
        let first = try await HaulProcess.capture(arguments + [dir.file("copy")], in: dir.path)
        #expect(first.status == 5, "\(first.stderr)")
        #expect(first.stderr.contains("checksum mismatch"), "\(first.stderr)")
        let counts = try MirrorCommandTests.summary(first.stdout)
        #expect(counts["verified"] == 3 && counts["unlisted"] == 1 && counts["failed"] == 1 && counts["new"] == 4, "\(counts)")
        var expected = files
        expected["sub/c.bin"] = nil
        #expect(MirrorCommandTests.read(dir.file("copy")) == expected)

        // The table says it too.
        let table = try await HaulProcess.capture(
            ["mirror", "--checksum-file", "SHA256SUMS", "--state-dir", dir.file("state"), server.url("/t/"), dir.file("copy2")], in: dir.path)
        #expect(table.status == 5)
        #expect(table.stderr.contains("verified   3\n") && table.stderr.contains("unlisted   1\n"), "\(table.stderr)")

        // --require-checksum: the unlisted file fails too, and is not fetched.
        let before = server.stats("/t/sub/deep/e.bin").requests.count
        let strict = try await HaulProcess.capture(arguments + ["--require-checksum", dir.file("copy3")], in: dir.path)
        #expect(strict.status == 5, "\(strict.stderr)")
        #expect(strict.stderr.contains("sub/deep/e.bin is not in the checksum file SHA256SUMS"), "\(strict.stderr)")
        let strictCounts = try MirrorCommandTests.summary(strict.stdout)
        #expect(strictCounts["verified"] == 3 && strictCounts["unlisted"] == 1 && strictCounts["failed"] == 2, "\(strictCounts)")
        #expect(server.stats("/t/sub/deep/e.bin").requests.count == before)
        expected["sub/deep/e.bin"] = nil
        #expect(MirrorCommandTests.read(dir.file("copy3")) == expected)
        try await server.shutdown()
    }

    @Test func mirrorMatchesANameAloneOnlyOnce() async throws {
        let server = try await FaultServer.start()
        func page(_ links: [String]) -> Route {
            var route = Route(content: Array(links.map { "<a href=\"\($0)\">\($0)</a>" }.joined(separator: "\n").utf8))
            route.contentType = "text/html"
            return route
        }
        // top.bin is in URL's own folder: the list's top.bin is that file, not x/top.bin.
        server.serve("/t/", page(["x/", "y/", "top.bin"]))
        server.serve("/t/top.bin", Route(content: Self.good))
        server.serve("/t/x/top.bin", Route(content: Self.bad))
        server.serve("/t/x/", page(["same.bin", "top.bin"]))
        server.serve("/t/y/", page(["same.bin"]))
        server.serve("/t/x/same.bin", Route(content: Self.good))
        server.serve("/t/y/same.bin", Route(content: Self.good))
        let dir = try TestDirectory()
        defer { dir.remove() }
        try dir.write("SHA256SUMS", Array("\(sha256Hex(Self.good))  same.bin\n\(sha256Hex(Self.good))  top.bin\n".utf8))
        let result = try await HaulProcess.capture(
            [
                "mirror", "--json", "--parallel-listings", "1", "--checksum-file", "SHA256SUMS", "--state-dir", dir.file("state"), server.url("/t/"),
                dir.file("copy"),
            ],
            in: dir.path)
        try await server.shutdown()
        #expect(result.status == 0, "\(result.stderr)")
        let counts = try MirrorCommandTests.summary(result.stdout)
        #expect(counts["verified"] == 2 && counts["unlisted"] == 2, "\(counts)")
        #expect(result.stderr.contains("is not verified: the checksum file lists same.bin alone"), "\(result.stderr)")
        #expect(result.stderr.contains("x/top.bin is not verified: the checksum file lists top.bin alone, and top.bin matched it first"))
        #expect(digest(MirrorCommandTests.read(dir.file("copy"))["x/top.bin"]) == digest(Self.bad))
    }
}
