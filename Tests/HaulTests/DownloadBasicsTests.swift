import Foundation
import HaulTestSupport
import Testing
@testable import Haul

/// A single download against the fault server: names, existing files, errors.
@Suite struct DownloadBasicsTests {
    @Test func downloadsTheExactBytesAndLeavesNoPartial() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        let content = testBytes(3 << 20)
        server.serve("/files/data.bin", Route(content: content))

        let result = try await harness.download(harness.request(server.url("/files/data.bin"))).get()
        try await server.shutdown()

        #expect(result.path == harness.directory.file("out/data.bin"))
        #expect(digest(harness.directory.contents("out/data.bin")) == digest(content))
        #expect(!harness.directory.exists("out/data.bin.part"))
        #expect(try await harness.record(for: result.path)?.status == .completed)
    }

    @Test(arguments: [
        ("attachment; filename=\"../../etc/passwd\"", "passwd"),
        ("attachment; filename*=UTF-8''%E2%82%AC%20rates.txt", "€ rates.txt"),
        ("inline; filename=\"report.pdf\"", "report.pdf"),
    ])
    func namesComeFromContentDispositionAndStayInTheFolder(header: String, expected: String) async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        var route = Route(content: testBytes(1000))
        route.contentDisposition = header
        server.serve("/download", route)

        let result = try await harness.download(harness.request(server.url("/download"))).get()
        try await server.shutdown()

        #expect(result.path == harness.directory.file("out/\(expected)"))
        #expect(digest(harness.directory.contents("out/\(expected)")) == digest(route.content))
    }

    @Test func namesComeFromThePercentDecodedURL() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        server.serve("/a/my%20file.tar.gz", Route(content: testBytes(10)))
        let result = try await harness.download(harness.request(server.url("/a/my%20file.tar.gz"))).get()
        try await server.shutdown()
        #expect(result.path == harness.directory.file("out/my file.tar.gz"))
    }

    @Test func aCompleteFileAlreadyThereIsReportedNotTouched() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        let content = testBytes(5000)
        server.serve("/f.bin", Route(content: content))
        let mine = testBytes(5000, seed: 7)
        try harness.directory.write("f.bin", mine)

        let result = try await harness.download(harness.request(server.url("/f.bin"), file: "f.bin")).get()
        try await server.shutdown()

        #expect(result.wasAlreadyComplete)
        #expect(digest(harness.directory.contents("f.bin")) == digest(mine))
        #expect(server.stats("/f.bin").getCount == 0)
    }

    @Test func aDifferentFileAlreadyThereIsSteppedAround() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        let content = testBytes(5000)
        server.serve("/f.tar.gz", Route(content: content))
        let mine = testBytes(10)
        try harness.directory.write("f.tar.gz", mine)

        let result = try await harness.download(harness.request(server.url("/f.tar.gz"), file: "f.tar.gz")).get()
        #expect(result.path == harness.directory.file("f.1.tar.gz"))
        #expect(digest(harness.directory.contents("f.1.tar.gz")) == digest(content))
        #expect(digest(harness.directory.contents("f.tar.gz")) == digest(mine))

        let replaced = try await harness.download(harness.request(server.url("/f.tar.gz"), file: "f.tar.gz") { $0.overwrite = true }).get()
        try await server.shutdown()
        #expect(replaced.path == harness.directory.file("f.tar.gz"))
        #expect(digest(harness.directory.contents("f.tar.gz")) == digest(content))
    }

    @Test(arguments: [404, 403])
    func clientErrorsFailAtOnceAndWriteNothing(status: Int) async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        var route = Route(content: testBytes(100))
        route.status = status
        server.serve("/missing.bin", route)

        let result = try await harness.download(harness.request(server.url("/missing.bin")))
        let requests = server.stats("/missing.bin").requests.count
        try await server.shutdown()

        guard case .failure(let error) = result else { Issue.record("expected failure"); return }
        #expect(error.kind == .http)
        #expect(error.status == status)
        #expect(requests <= 2, "HEAD and one GET, no retries")
        #expect(!harness.directory.exists("out/missing.bin"))
        #expect(!harness.directory.exists("out/missing.bin.part"))
    }

    @Test func serverErrorsAreRetriedThenReported() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        var route = Route(content: testBytes(100))
        route.status = 500
        server.serve("/broken", route)

        let result = try await harness.download(harness.request(server.url("/broken")) { $0.maxTries = 3 })
        try await server.shutdown()
        guard case .failure(let error) = result else { Issue.record("expected failure"); return }
        #expect(error.status == 500)
        #expect(error.description.contains(server.url("/broken")))
        #expect(harness.clock.retryWaits.count + 2 >= 2)
    }

    @Test func retryAfterIsHonoured() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        var route = Route(content: testBytes(2000))
        route.failFirst = 2
        route.retryAfter = "3"
        server.serve("/busy.bin", route)

        _ = try await harness.download(harness.request(server.url("/busy.bin"))).get()
        try await server.shutdown()
        #expect(digest(harness.directory.contents("out/busy.bin")) == digest(route.content))
        #expect(harness.clock.retryWaits.filter { $0 > .milliseconds(2900) }.count == 2)
    }

    @Test func headRefusedFallsBackToARangedGet() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        var route = Route(content: testBytes(4000))
        route.headAllowed = false
        server.serve("/nohead.bin", route)
        _ = try await harness.download(harness.request(server.url("/nohead.bin"))).get()
        try await server.shutdown()
        #expect(digest(harness.directory.contents("out/nohead.bin")) == digest(route.content))
    }

    @Test(arguments: [100, 50_000])
    func aHeadThatLiesAboutTheLengthDoesNotMatterBecauseTheGetIsTheTruth(claimed: Int) async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        var route = Route(content: testBytes(20_000))
        route.headContentLength = claimed
        server.serve("/liar.bin", route)
        let result = try await harness.download(harness.request(server.url("/liar.bin"))).get()
        try await server.shutdown()
        #expect(result.bytes == 20_000)
        #expect(digest(harness.directory.contents("out/liar.bin")) == digest(route.content))
    }

    @Test(arguments: [true, false])
    func anEmptyFileIsAFileToo(headAllowed: Bool) async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        var route = Route(content: [])
        route.headAllowed = headAllowed
        server.serve("/empty.txt", route)
        let result = try await harness.download(harness.request(server.url("/empty.txt"))).get()
        try await server.shutdown()
        #expect(result.bytes == 0)
        #expect(harness.directory.contents("out/empty.txt") == [])
        #expect(!harness.directory.exists("out/empty.txt.part"))
    }

    @Test func redirectsAreFollowedAndLoopsAreErrors() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        let content = testBytes(1234)
        server.serve("/real/target.bin", Route(content: content))
        var hop = Route(content: [])
        hop.redirectTo = "/real/target.bin"
        server.serve("/go", hop)
        var a = Route(content: [])
        a.redirectTo = "/loop-b"
        var b = Route(content: [])
        b.redirectTo = "/loop-a"
        server.serve("/loop-a", a)
        server.serve("/loop-b", b)

        let followed = try await harness.download(harness.request(server.url("/go"))).get()
        let looped = try await harness.download(harness.request(server.url("/loop-a")))
        try await server.shutdown()

        #expect(followed.path == harness.directory.file("out/target.bin"))
        #expect(digest(harness.directory.contents("out/target.bin")) == digest(content))
        guard case .failure(let error) = looped else { Issue.record("a loop must fail"); return }
        #expect(error.message.contains("redirect"))
    }

    @Test func chunkedBodiesWithoutALengthDownload() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        var route = Route(content: testBytes(300_000))
        route.chunked = true
        server.serve("/stream.bin", route)
        _ = try await harness.download(harness.request(server.url("/stream.bin"))).get()
        try await server.shutdown()
        #expect(digest(harness.directory.contents("out/stream.bin")) == digest(route.content))
    }

    @Test func checksumIsVerifiedAndAMismatchLeavesNothingAtTheDestination() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        let content = testBytes(100_000)
        server.serve("/sum.bin", Route(content: content))
        let good = try Checksum(parsing: "sha-256=" + sha256Hex(content))
        let bad = try Checksum(parsing: "sha-256=" + String(repeating: "0", count: 64))

        _ = try await harness.download(harness.request(server.url("/sum.bin"), file: "good.bin") { $0.checksum = good }).get()
        let mismatch = try await harness.download(harness.request(server.url("/sum.bin"), file: "bad.bin") { $0.checksum = bad })
        try await server.shutdown()

        #expect(digest(harness.directory.contents("good.bin")) == digest(content))
        guard case .failure(let error) = mismatch else { Issue.record("mismatch must fail"); return }
        #expect(error.kind == .checksum)
        #expect(error.message.contains("expected sha-256=0000"))
        #expect(!harness.directory.exists("bad.bin"))
    }

    @Test func anUnwritableDestinationIsAOneLineError() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        server.serve("/f.bin", Route(content: testBytes(10)))
        try harness.directory.write("plainfile", [1])
        let result = try await harness.download(harness.request(server.url("/f.bin"), file: "plainfile/f.bin"))
        try await server.shutdown()
        guard case .failure(let error) = result else { Issue.record("expected failure"); return }
        #expect(error.kind == .io)
        #expect(error.message.contains("Not a directory"))
        #expect(!error.message.contains("\n"))
    }

    @Test func malformedURLsAreRejected() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        for url in ["not a url", "ftp://example.com/x", "http://"] {
            let result = try await harness.download(harness.request(url))
            guard case .failure(let error) = result else { Issue.record("\(url) must fail"); continue }
            #expect(error.kind == .invalidRequest)
        }
    }
}

extension DownloadBasicsTests {
    /// A file that appears at the destination while Haul downloads is someone else's: it is
    /// never replaced; the download stays in its part file and says so. (A small download,
    /// whose part file has no name yet, steps around it instead: `UnnamedPartFileTests`.)
    @Test func aFileThatAppearsAtTheDestinationMeanwhileIsNotReplaced() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        var route = Route(content: testBytes(1 << 20, seed: 12))
        route.bytesPerSecond = 512 << 10
        let theirs = testBytes(1000, seed: 13)
        let result = try await downloadWhileAFileAppears(route, theirs: theirs, in: harness)

        guard case .failure(let error) = result else {
            Issue.record("replaced a file that appeared meanwhile: \(result)")
            return
        }
        #expect(error.message.contains("appeared while downloading"), "\(error.message)")
        #expect(harness.directory.contents("f.bin") == theirs)
        #expect(digest(harness.directory.contents("f.bin.part")) == digest(route.content))
    }

    /// With `overwrite`, a file that appears meanwhile is replaced by the download.
    @Test(arguments: [200_000, 1 << 20])
    func withOverwriteAFileThatAppearsMeanwhileIsReplaced(size: Int) async throws {
        let harness = try Harness()
        defer { harness.remove() }
        var route = Route(content: testBytes(size, seed: 14))
        route.bytesPerSecond = 512 << 10
        let result = try await downloadWhileAFileAppears(route, theirs: testBytes(1000, seed: 15), in: harness) { $0.overwrite = true }

        #expect(try result.get().bytes == Int64(size))
        #expect(digest(harness.directory.contents("f.bin")) == digest(route.content))
        #expect(!harness.directory.exists("f.bin.part"))
    }

}
