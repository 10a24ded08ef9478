import Foundation
import HaulTestSupport
import Testing

/// The built `haul get`, killed and rerun the way users do it.
@Suite(.serialized) struct CommandLineTests {
    @Test func killNineAtAnyMomentThenRerunGivesTheSameBytesAndRefetchesLittle() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        let size = 48 << 20
        var route = Route(content: testBytes(size))
        route.bytesPerSecond = 16 << 20
        server.serve("/big.bin", route)
        let arguments = ["get", "-q", "-o", "big.bin", "--state-dir", dir.file("state"), server.url("/big.bin")]

        // Kill at three different points, each run continuing the last.
        let killPoints = [5 << 20, 19 << 20, 33 << 20]
        for point in killPoints {
            let haul = try HaulProcess(arguments, in: dir.path)
            let reached = try await waitUntil { fileSize(dir.file("big.bin.part")) >= point }
            #expect(reached)
            haul.signal(SIGKILL)
            _ = try await haul.finish()
            #expect(!dir.exists("big.bin"))
        }
        let (status, stderr) = try await HaulProcess.run(arguments, in: dir.path)
        let sent = server.stats("/big.bin").bodyBytesSent
        try await server.shutdown()

        #expect(status == 0, "\(stderr)")
        #expect(digest(dir.contents("big.bin")) == digest(route.content))
        #expect(!dir.exists("big.bin.part"))
        // Each kill may lose at most one checkpoint interval (8 MiB here) plus what was in
        // flight in socket buffers.
        let allowance = killPoints.count * ((8 << 20) + (2 << 20))
        #expect(sent <= size + allowance, "sent \(sent) for \(size)")
    }

    @Test func ctrlCPausesSavesEverythingAndExits130() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        let size = 24 << 20
        var route = Route(content: testBytes(size))
        route.bytesPerSecond = 8 << 20
        server.serve("/f.bin", route)
        let arguments = ["get", "-o", "f.bin", "--state-dir", dir.file("state"), server.url("/f.bin")]

        let haul = try HaulProcess(arguments, in: dir.path)
        #expect(try await waitUntil { fileSize(dir.file("f.bin.part")) >= 6 << 20 })
        haul.signal(SIGINT)
        let (interrupted, message) = try await haul.finish()
        #expect(interrupted == 130)
        #expect(message.contains("run the same command again"))
        let (status, _) = try await HaulProcess.run(arguments, in: dir.path)
        let sent = server.stats("/f.bin").bodyBytesSent
        try await server.shutdown()

        #expect(status == 0)
        #expect(digest(dir.contents("f.bin")) == digest(route.content))
        #expect(sent <= size + (2 << 20), "a pause flushes and records everything written")
    }

    @Test func errorsAreOneLineAndASuccessStaysWhenAnotherFails() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        server.serve("/good.bin", Route(content: testBytes(1000)))
        var missing = Route(content: [])
        missing.status = 404
        server.serve("/gone.bin", missing)
        try Array("\(server.url("/good.bin"))\n# a comment\n\n\(server.url("/gone.bin"))\n".utf8).withUnsafeBytes {
            try Data($0).write(to: URL(fileURLWithPath: dir.file("list.txt")))
        }

        let (status, stderr) = try await HaulProcess.run(
            ["get", "-q", "-i", "list.txt", "-d", "out", "--state-dir", dir.file("state")], in: dir.path)
        try await server.shutdown()

        #expect(status == 8)
        #expect(stderr == "haul: \(server.url("/gone.bin")): 404 Not Found\n")
        #expect(digest(dir.contents("out/good.bin")) == digest(testBytes(1000)))
        #expect(!dir.exists("out/gone.bin"))
    }

    @Test func anUnwritableFolderIsExitThreeWithTheReason() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        server.serve("/f.bin", Route(content: testBytes(10)))
        try dir.write("file", [0])
        let (status, stderr) = try await HaulProcess.run(
            ["get", "-q", "-d", "file/sub", "--state-dir", dir.file("state"), server.url("/f.bin")], in: dir.path)
        try await server.shutdown()
        #expect(status == 3)
        #expect(stderr.contains("Not a directory"))
        #expect(stderr.split(separator: "\n").count == 1)
    }

    @Test(arguments: [["get"], ["get", "-o", "x", "http://a/1", "http://a/2"], ["get", "--checksum", "sha-256=12", "http://a/"],
                      ["get", "-H", "Bad Header", "http://a/"], ["get", "--max-tries", "0", "http://a/"]])
    func badCommandLinesAreRefusedWithUsageStatus(arguments: [String]) async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let (status, stderr) = try await HaulProcess.run(arguments + ["--state-dir", dir.file("state")], in: dir.path)
        #expect(status == 64)
        #expect(stderr.contains("Error"))
    }
}
