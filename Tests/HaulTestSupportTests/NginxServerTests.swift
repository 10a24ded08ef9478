import Foundation
import HaulTestSupport
import Testing

/// Skipped on a developer machine without nginx; in CI (env CI set) it runs and fails loudly,
/// because the integration tests that lean on nginx would otherwise silently not run.
@Suite(
    .enabled(
        if: NginxServer.executablePath != nil || ProcessInfo.processInfo.environment["CI"] != nil,
        "nginx is not installed"))
struct NginxServerTests {
    /// 1000 bytes whose values follow their offsets, so a shifted range shows up as a mismatch.
    let content = Data((0..<1000).map { UInt8($0 % 251) })

    @Test func servesWholeFileAndRanges() async throws {
        let folder = try makeFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }

        try await NginxServer.withServer(root: folder) { nginx in
            let whole = try curl(["-s", nginx.url("/data.bin")])
            #expect(whole.body == content)

            let range = try curl(["-s", "-H", "Range: bytes=10-", "-w", "%{http_code}", nginx.url("/data.bin")])
            #expect(range.code == "206")
            #expect(range.body == content.dropFirst(10))

            let missing = try curl(["-s", "-w", "%{http_code}", nginx.url("/nope.bin")])
            #expect(missing.code == "404")
        }
    }

    @Test func limitedLocationIsSlow() async throws {
        let folder = try makeFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }

        // nginx sends one second's worth at once and the rest a second later; headers count, so
        // the ~1250-byte response at 1000 B/s takes about 1 s. The full-speed path is unaffected.
        try await NginxServer.withServer(root: folder, limitRate: 1000) { nginx in
            let start = ContinuousClock.now
            let slow = try curl(["-s", nginx.url("/limited/data.bin")])
            let elapsed = ContinuousClock.now - start
            #expect(slow.body == content)
            #expect(elapsed > .milliseconds(800))

            let fast = try curl(["-s", nginx.url("/data.bin")])
            #expect(fast.body == content)
        }
    }

    @Test func stopFreesThePort() async throws {
        let folder = try makeFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }

        let nginx = try await NginxServer.start(root: folder)
        await nginx.stop()
        await nginx.stop()
        let after = try curl(["-s", "-w", "%{http_code}", nginx.url("/data.bin")])
        #expect(after.code == "000")
    }

    private func makeFolder() throws -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("nginx-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try content.write(to: folder.appendingPathComponent("data.bin"))
        return folder.path
    }

    /// Runs curl; with `-w %{http_code}` the status is the last 3 bytes of stdout.
    private func curl(_ arguments: [String]) throws -> (body: Data, code: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["curl", "--max-time", "10"] + arguments
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard arguments.contains("-w") else { return (data, "") }
        return (data.dropLast(3), String(decoding: data.suffix(3), as: UTF8.self))
    }
}
