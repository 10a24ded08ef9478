import Foundation
import HaulTestSupport
import Testing
@testable import Haul

/// `haul get -i list -j 16` with 500 files, killed halfway and run again.
@Suite(.serialized) struct ManyDownloadsTests {
    static let count = 500
    static let size = 64 << 10

    @Test func fiveHundredFilesSurviveAKillNineHalfway() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        var list = ""
        var contents: [[UInt8]] = []
        for index in 0..<Self.count {
            var route = Route(content: testBytes(Self.size, seed: UInt64(1000 + index)))
            route.bytesPerSecond = 256 << 10
            server.serve("/f\(index).bin", route)
            contents.append(route.content)
            list += "\(server.url("/f\(index).bin"))\n"
        }
        try dir.write("list.txt", Array(list.utf8))
        let arguments = ["get", "-i", "list.txt", "-j", "16", "-d", "out", "--state-dir", dir.file("state")]
        let done = { (0..<Self.count).filter { dir.exists("out/f\($0).bin") } }

        let haul = try HaulProcess(arguments + ["-q"], in: dir.path)
        #expect(try await waitUntil(timeout: .seconds(60)) { done().count >= Self.count / 2 })
        haul.signal(SIGKILL)
        _ = try await haul.finish()
        let finishedBefore = done()
        #expect(finishedBefore.count < Self.count, "killed before the end")
        let bodiesBefore = finishedBefore.map { server.stats("/f\($0).bin").bodyBytesSent }
        let sentBefore = server.totalBodyBytesSent

        let (status, stderr) = try await HaulProcess.run(arguments, in: dir.path)
        let sent = server.totalBodyBytesSent - sentBefore
        try await server.shutdown()

        #expect(status == 0, "\(stderr.suffix(2000))")
        for index in 0..<Self.count {
            #expect(digest(dir.contents("out/f\(index).bin")) == digest(contents[index]), "f\(index).bin")
        }
        // Files finished before the kill cost a request each (conditional, or a HEAD), no body.
        #expect(finishedBefore.map { server.stats("/f\($0).bin").bodyBytesSent } == bodiesBefore)
        let missing = (Self.count - finishedBefore.count) * Self.size
        #expect(sent <= missing, "the rerun fetched \(sent) bytes for \(missing) missing")
        // A long list that went well ends with its count line alone.
        #expect(!stderr.contains("NAME") && stderr.contains("\(Self.count) of \(Self.count) downloads complete"))
        #expect(!FileManager.default.fileExists(atPath: dir.file("out/f0.bin.part")))
    }

    @Test func aLongListsSummaryShowsOnlyWhatWentWrong() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        var list = ""
        for index in 0..<120 {
            var route = Route(content: testBytes(1000, seed: UInt64(index)))
            if index % 40 == 7 { route.status = 404 }
            server.serve("/f\(index).bin", route)
            list += "\(server.url("/f\(index).bin"))\n"
        }
        try dir.write("list.txt", Array(list.utf8))

        let (status, stderr) = try await HaulProcess.run(
            ["get", "-i", "list.txt", "-j", "16", "-d", "out", "--state-dir", dir.file("state")],
            in: dir.path)
        try await server.shutdown()

        #expect(status == 8)
        // Each failure once as it happened, and once in the table.
        let lines = stderr.split(separator: "\n")
        #expect(lines.count { $0.hasPrefix("haul: ") && $0.hasSuffix(".bin: 404 Not Found") } == 3, "\(stderr)")
        #expect(lines.count { $0.hasSuffix("failed: 404 Not Found") } == 3, "\(stderr)")
        #expect(stderr.contains("NAME") && stderr.contains("117 of 120 downloads complete"))
        #expect(!stderr.contains("f0.bin"))
    }
}
