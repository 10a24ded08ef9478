import Foundation
import HaulTestSupport
import Testing
@testable import Haul

/// The ways several sources of one file reach `haul get`: a tab-separated input-file line and
/// `--mirror`; and the resume contract across them.
@Suite(.serialized) struct SourcesCommandLineTests {
    static let size = 6 << 20

    /// The same content at each path, trickled so that every source gets work.
    func mirrors(_ paths: [String], size: Int = Self.size, bytesPerSecond: Int = 4 << 20) async throws -> (FaultServer, [UInt8]) {
        let server = try await FaultServer.start()
        let content = testBytes(size, seed: 12)
        for path in paths {
            var route = Route(content: content)
            route.bytesPerSecond = bytesPerSecond
            server.serve(path, route)
        }
        return (server, content)
    }

    @Test func aTabSeparatedInputLineIsOneFileFromEachOfItsURLs() async throws {
        let (server, content) = try await mirrors(["/m1.bin", "/m2.bin", "/m3.bin"])
        let dir = try TestDirectory()
        defer { dir.remove() }
        let line = ["/m1.bin", "/m2.bin", "/m3.bin"].map { server.url($0) }.joined(separator: "\t")
        try dir.write("list.txt", Array("\(line)\n  out=f.bin\n".utf8))
        let (status, stderr) = try await HaulProcess.run(
            ["get", "-q", "-x", "6", "--min-split-size", "256K", "-i", "list.txt", "-d", "out", "--state-dir", dir.file("state")],
            in: dir.path)
        let sent = ["/m1.bin", "/m2.bin", "/m3.bin"].map { server.stats($0).bodyBytesSent }
        try await server.shutdown()
        #expect(status == 0, "\(stderr)")
        #expect(digest(dir.contents("out/f.bin")) == digest(content))
        #expect(sent.allSatisfy { $0 > 0 }, "every URL of the line served part of the file: \(sent)")
        #expect(!dir.exists("out/m2.bin") && !dir.exists("out/m3.bin"), "one file, not three")
    }

    /// A mirror dropped is said in one line of its own, even when nothing is drawn live.
    @Test func aDroppedMirrorIsSaidInOneLine() async throws {
        let (server, content) = try await mirrors(["/m1.bin"], bytesPerSecond: 2 << 20)
        server.serve(
            "/gone.bin",
            {
                var gone = Route(content: []); gone.status = 404; return gone
            }())
        let dir = try TestDirectory()
        defer { dir.remove() }
        let (status, stderr) = try await HaulProcess.run(
            [
                "get", "-x", "4", "--min-split-size", "256K", "-o", "f.bin", "--mirror", server.url("/gone.bin"),
                "--state-dir", dir.file("state"), server.url("/m1.bin"),
            ], in: dir.path)
        try await server.shutdown()
        #expect(status == 0, "\(stderr)")
        #expect(digest(dir.contents("f.bin")) == digest(content))
        let said = stderr.split(separator: "\n").filter { $0.contains("dropped source") }
        #expect(said == ["haul: f.bin: dropped source \(server.url("/gone.bin")): 404 Not Found"], "\(stderr)")
    }

    @Test func mirrorAddsSourcesToTheOneURL() async throws {
        let (server, content) = try await mirrors(["/m1.bin", "/m2.bin"])
        let dir = try TestDirectory()
        defer { dir.remove() }
        let (status, stderr) = try await HaulProcess.run(
            [
                "get", "-q", "-x", "4", "--min-split-size", "256K", "-o", "f.bin", "--mirror", server.url("/m2.bin"),
                "--state-dir", dir.file("state"), server.url("/m1.bin"),
            ], in: dir.path)
        let sent = ["/m1.bin", "/m2.bin"].map { server.stats($0).bodyBytesSent }
        try await server.shutdown()
        #expect(status == 0, "\(stderr)")
        #expect(digest(dir.contents("f.bin")) == digest(content))
        #expect(sent.allSatisfy { $0 > 0 }, "both served part of the file: \(sent)")
    }

    @Test(arguments: [
        (["--mirror", "http://127.0.0.1:1/b", "http://127.0.0.1:1/a", "http://127.0.0.1:1/c"], "--mirror takes a single URL"),
        (["--mirror", "ftp://127.0.0.1/b", "http://127.0.0.1:1/a"], "not a URL Haul can download"),
        (["--mirror", "http://127.0.0.1:1/a", "http://127.0.0.1:1/a"], "given twice"),
    ])
    func aBadMirrorIsOneLineOfError(arguments: [String], message: String) async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let (status, stderr) = try await HaulProcess.run(["get", "-q", "--state-dir", dir.file("state")] + arguments, in: dir.path)
        #expect(status != 0)
        #expect(stderr.contains(message), "\(stderr)")
    }

    /// kill -9 in the middle of a three-source download, then the same command: the same
    /// bytes, and only the holes (plus what was in flight) fetched again.
    @Test func killNineDuringAThreeSourceDownloadThenRerun() async throws {
        let size = 24 << 20
        let paths = ["/k1.bin", "/k2.bin", "/k3.bin"]
        let (server, content) = try await mirrors(paths, size: size, bytesPerSecond: 2 << 20)
        let dir = try TestDirectory()
        defer { dir.remove() }
        let line = paths.map { server.url($0) }.joined(separator: "\t")
        try dir.write("list.txt", Array("\(line)\n  out=big.bin\n".utf8))
        let arguments = ["get", "-q", "-x", "6", "--min-split-size", "256K", "-i", "list.txt", "-d", ".", "--state-dir", dir.file("state")]
        func sent() -> Int { paths.reduce(0) { $0 + server.stats($1).bodyBytesSent } }

        let haul = try HaulProcess(arguments, in: dir.path)
        #expect(try await waitUntil { sent() >= 8 << 20 })
        let store = try Store(directory: dir.file("state"))
        var checkpointed = false
        for _ in 0..<2000 where !checkpointed {
            checkpointed = ((try? await store.row(path: dir.file("big.bin")))??.ranges.ranges.count ?? 0) > 1
            if !checkpointed { try await Task.sleep(for: .milliseconds(10)) }
        }
        haul.signal(SIGKILL)
        _ = try await haul.finish()
        #expect(!dir.exists("big.bin"))
        let durable = try #require(try await store.row(path: dir.file("big.bin"))).ranges
        let sentBefore = sent()
        let (status, stderr) = try await HaulProcess.run(arguments, in: dir.path)
        let rerun = sent() - sentBefore
        try await server.shutdown()

        #expect(status == 0, "\(stderr)")
        #expect(digest(dir.contents("big.bin")) == digest(content))
        #expect(rerun <= size - Int(durable.byteCount) + 6 * ResumeTests.inFlightAllowance, "rerun sent \(rerun)")
    }
}
