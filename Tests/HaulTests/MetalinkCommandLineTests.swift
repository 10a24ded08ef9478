import Foundation
import HaulTestSupport
import Testing
@testable import Haul

/// `haul get -M`: every file of a Metalink document downloaded from all of its URLs into
/// `--dir`, and checked against its digest.
@Suite(.serialized) struct MetalinkCommandLineTests {
    static let size = 4 << 20

    /// The same content at each path, trickled so that every source gets work.
    func mirrors(_ paths: [String], size: Int = Self.size) async throws -> (FaultServer, [UInt8]) {
        let server = try await FaultServer.start()
        let content = testBytes(size, seed: 21)
        for path in paths {
            var route = Route(content: content)
            route.bytesPerSecond = 4 << 20
            server.serve(path, route)
        }
        return (server, content)
    }

    static func document(name: String, size: Int = Self.size, sha256: String, urls: [String]) -> [UInt8] {
        let links = urls.enumerated().map { "<url priority=\"\($0.offset + 1)\">\($0.element)</url>" }.joined(separator: "\n")
        return Array(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <metalink xmlns="urn:ietf:params:xml:ns:metalink">
              <file name="\(name)">
                <size>\(size)</size>
                <hash type="sha-256">\(sha256)</hash>
                \(links)
              </file>
            </metalink>
            """.utf8)
    }

    @Test func downloadsEachFileFromAllItsURLsAndVerifiesIt() async throws {
        let (server, content) = try await mirrors(["/m1.bin", "/m2.bin"])
        let dir = try TestDirectory()
        defer { dir.remove() }
        let urls = ["/m1.bin", "/m2.bin"].map { server.url($0) }
        try dir.write("f.meta4", Self.document(name: "sub/f.bin", sha256: sha256Hex(content), urls: urls))
        let (status, stderr) = try await HaulProcess.run(
            ["get", "-q", "-x", "4", "--min-split-size", "256K", "-M", "f.meta4", "-d", "out", "--state-dir", dir.file("state")],
            in: dir.path)
        let sent = ["/m1.bin", "/m2.bin"].map { server.stats($0).bodyBytesSent }
        try await server.shutdown()
        #expect(status == 0, "\(stderr)")
        #expect(digest(dir.contents("out/sub/f.bin")) == digest(content))
        #expect(sent.allSatisfy { $0 > 0 }, "both URLs served part of the file: \(sent)")
        #expect(!dir.exists("out/m1.bin") && !dir.exists("out/m2.bin"), "saved under its Metalink name")
    }

    @Test func aMismatchingDigestLeavesNoFileAtItsName() async throws {
        let (server, _) = try await mirrors(["/m1.bin", "/m2.bin"], size: 256 << 10)
        let dir = try TestDirectory()
        defer { dir.remove() }
        let urls = ["/m1.bin", "/m2.bin"].map { server.url($0) }
        try dir.write("f.meta4", Self.document(name: "f.bin", size: 256 << 10, sha256: String(repeating: "0", count: 64), urls: urls))
        let (status, stderr) = try await HaulProcess.run(
            ["get", "-q", "-M", "f.meta4", "-d", "out", "--state-dir", dir.file("state")], in: dir.path)
        try await server.shutdown()
        #expect(status != 0)
        #expect(stderr.contains("checksum mismatch"), "\(stderr)")
        #expect(!dir.exists("out/f.bin"))
    }

    /// `--follow-metalink`: a URL that answers with a Metalink document (told by its namespace,
    /// not its name) is downloaded, then each file it lists; without the flag, only the
    /// document is saved.
    @Test func followMetalinkDownloadsTheFilesOfAMetalinkAnswer() async throws {
        let (server, content) = try await mirrors(["/m1.bin", "/m2.bin"], size: 300 << 10)
        let dir = try TestDirectory()
        defer { dir.remove() }
        let urls = ["/m1.bin", "/m2.bin"].map { server.url($0) }
        var listing = Route(content: Self.document(name: "f.bin", size: content.count, sha256: sha256Hex(content), urls: urls))
        listing.contentType = "application/metalink4+xml"
        server.serve("/release", listing)

        let (plain, plainError) = try await HaulProcess.run(
            ["get", "-q", "-d", "plain", "--state-dir", dir.file("state"), server.url("/release")], in: dir.path)
        #expect(plain == 0, "\(plainError)")
        #expect(dir.exists("plain/release") && !dir.exists("plain/f.bin"), "without the flag the document is just a file")

        let (status, stderr) = try await HaulProcess.run(
            ["get", "-q", "--follow-metalink", "-d", "out", "--state-dir", dir.file("state"), server.url("/release")], in: dir.path)
        try await server.shutdown()
        #expect(status == 0, "\(stderr)")
        #expect(dir.exists("out/release"))
        #expect(digest(dir.contents("out/f.bin")) == digest(content))
    }

    /// A Metalink fetched by URL, next to a plain URL on the same command line.
    @Test func aMetalinkByURLWithAPlainURL() async throws {
        let (server, content) = try await mirrors(["/m1.bin"], size: 300 << 10)
        let dir = try TestDirectory()
        defer { dir.remove() }
        let plain = testBytes(5000, seed: 7)
        server.serve("/plain.txt", Route(content: plain))
        server.serve("/f.meta4", Route(content: Self.document(name: "f.bin", size: content.count, sha256: sha256Hex(content), urls: [server.url("/m1.bin")])))
        let (status, stderr) = try await HaulProcess.run(
            ["get", "-q", "--metalink-file", server.url("/f.meta4"), "-d", "out", "--state-dir", dir.file("state"), server.url("/plain.txt")],
            in: dir.path)
        try await server.shutdown()
        #expect(status == 0, "\(stderr)")
        #expect(dir.contents("out/f.bin") == content)
        #expect(dir.contents("out/plain.txt") == plain)
        #expect(!dir.exists("out/f.meta4"), "the document itself is not saved")
    }

    @Test func aHostileMetalinkIsOneLineOfError() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try dir.write("evil.meta4", Array(MetalinkTests.meta4Text("../../escaped.bin", "<url>http://127.0.0.1:1/f</url>").utf8))
        let (status, stderr) = try await HaulProcess.run(
            ["get", "-q", "-M", "evil.meta4", "-d", "out", "--state-dir", dir.file("state")], in: dir.path)
        #expect(status != 0)
        let lines = stderr.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].hasPrefix("haul: evil.meta4: ") && lines[0].contains("leads out of the download folder"), "\(stderr)")
        #expect(!dir.exists("escaped.bin") && !FileManager.default.fileExists(atPath: dir.file("../escaped.bin")))
        let (missing, missingError) = try await HaulProcess.run(
            ["get", "-q", "-M", "nope.meta4", "-o", "x", "--state-dir", dir.file("state")], in: dir.path)
        #expect(missing != 0 && missingError.contains("--output cannot be used with --metalink-file"), "\(missingError)")
    }
}
