import AsyncHTTPClient
import Foundation
import HaulDaemon
import HaulTestSupport
import HummingbirdWSClient
import Logging
import NIOCore
import Synchronization
import Testing

/// `haul daemon` driven by programs nobody here wrote: the aria2p client library from PyPI and
/// a headless Chromium showing the web page. Skipped where they are missing, except in CI
/// (`CI` set), where `.ci/run` installs them and a missing one is a failure.
@Suite(.serialized) struct DaemonInteropTests {
    static let isCI = ProcessInfo.processInfo.environment["CI"] != nil
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Interop/aria2p_cycle.py").path

    static var hasAria2p: Bool {
        (try? Self.runPython(["-c", "import aria2p"]).status) == 0
    }

    static var chromium: String? { Browser.executable }

    static func runPython(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3"] + arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, output)
    }

    @Test(.enabled(if: hasAria2p || isCI))
    func aria2pDrivesAFullCycle() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try await FaultServer.withServer { server in
            var slow = Route(content: testBytes(4 << 20, seed: 3))
            slow.bytesPerSecond = 1 << 20
            server.serve("/slow.bin", slow)
            server.serve("/b.bin", Route(content: testBytes(300 << 10, seed: 4)))
            server.serve("/c.bin", Route(content: testBytes(700 << 10, seed: 5)))
            try await DaemonProcess.with(state: dir.file("state"), in: dir.path, ["--rpc-secret", "pa55", "-x", "1"]) { daemon in
                let (status, output) = try await Task.detached {
                    try Self.runPython([
                        Self.script, "--port", String(daemon.endpoint.port), "--secret", "pa55",
                        "--dir", dir.file("dl"), "--timeout", "30",
                        server.url("/slow.bin"), server.url("/b.bin"), server.url("/c.bin"),
                    ])
                }.value
                #expect(status == 0, "\(output)\n\(daemon.log)")
                #expect(output.contains("[aria2p_cycle] PASS"))
                #expect(dir.contents("dl/slow.bin") == slow.content)
                #expect(dir.contents("dl/b.bin") == testBytes(300 << 10, seed: 4))
                #expect(dir.contents("dl/c.bin") == testBytes(700 << 10, seed: 5))
                #expect(try await daemon.stop() == 0)
            }
        }
    }

    @Test(.enabled(if: hasAria2p || isCI))
    func aria2pSetsTheNetworkOptionsAndReadsThemBack() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try await FaultServer.withServer { server in
            var route = Route(content: testBytes(200 << 10, seed: 8))
            route.requiredHeaders = [
                ("Authorization", "Basic " + Data("me:pw".utf8).base64EncodedString()), ("Cookie", "k=v"),
                ("X-From-Aria2p", "yes"),
            ]
            server.serve("/login.bin", route)
            try Data("127.0.0.1\tFALSE\t/\tFALSE\t0\tk\tv\n".utf8).write(to: URL(fileURLWithPath: dir.file("cookies.txt")))
            let options = URL(fileURLWithPath: Self.script).deletingLastPathComponent().appendingPathComponent("aria2p_options.py").path
            try await DaemonProcess.with(state: dir.file("state"), in: dir.path, ["--rpc-secret", "pa55", "-d", dir.file("dl")]) { daemon in
                let (status, output) = try await Task.detached {
                    try Self.runPython([
                        options, "--port", String(daemon.endpoint.port), "--secret", "pa55", "--dir", dir.file("dl"),
                        "--cookies", dir.file("cookies.txt"), server.url("/login.bin"),
                    ])
                }.value
                #expect(status == 0, "\(output)\n\(daemon.log)")
                #expect(output.contains("[aria2p_options] PASS"))
                #expect(digest(dir.contents("dl/login.bin")) == digest(route.content))
                #expect(try await daemon.stop() == 0)
            }
        }
    }

    @Test(.enabled(if: hasAria2p || isCI))
    func aria2pDrivesADownloadFromSeveralSources() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try await FaultServer.withServer { server in
            var slow = Route(content: testBytes(6 << 20, seed: 9))
            slow.bytesPerSecond = 1 << 20
            server.serve("/many.bin", slow)
            server.serve("/extra.bin", slow)
            server.serve(
                "/gone.bin",
                {
                    var gone = Route(content: []); gone.status = 404; return gone
                }())
            let script = URL(fileURLWithPath: Self.script).deletingLastPathComponent().appendingPathComponent("aria2p_sources.py").path
            try await DaemonProcess.with(state: dir.file("state"), in: dir.path, ["--rpc-secret", "s0urces"]) { daemon in
                let (status, output) = try await Task.detached {
                    try Self.runPython([
                        script, "--port", String(daemon.endpoint.port), "--secret", "s0urces", "--dir", dir.file("dl"),
                        server.url("/many.bin"), server.url("/gone.bin"), server.url("/extra.bin"),
                    ])
                }.value
                #expect(status == 0, "\(output)\n\(daemon.log)")
                #expect(output.contains("[aria2p_sources] PASS"))
                #expect(digest(dir.contents("dl/many.bin")) == digest(slow.content))
                #expect(try await daemon.stop() == 0)
            }
        }
    }

    @Test(.enabled(if: chromium != nil || isCI))
    func webPageShowsADownloadReachingOneHundredPercent() async throws {
        let chromium = try #require(Self.chromium, "install Debian's chromium (scripts/install-deps.sh --with-test-servers)")
        let dir = try TestDirectory()
        defer { dir.remove() }
        try await FaultServer.withServer { server in
            var slow = Route(content: testBytes(3 << 20, seed: 8))
            slow.bytesPerSecond = 1 << 20
            server.serve("/movie.mkv", slow)
            try await DaemonProcess.with(state: dir.file("state"), in: dir.path, ["--rpc-secret", "pagesecret", "-x", "1"]) { daemon in
                let browser = try Browser(chromium, profile: dir.file("chromium"))
                defer { browser.stop() }
                let seen = try await browser.withPage { page in
                    _ = try await page.send("Page.navigate", ["url": .string(daemon.endpoint.pageURL)])
                    try await page.waitFor("document.body.dataset.connected", toBe: "true")
                    let gid = try #require(try await daemon.call("aria2.addUri", [[.string(server.url("/movie.mkv"))]]).string)
                    var percents: [Int] = []
                    _ = try await page.poll(timeout: .seconds(30)) { () async throws -> Bool? in
                        let row = try await page.evaluate(
                            "(r => r ? r.dataset.status + ' ' + r.dataset.percent + ' ' + r.textContent : '')(document.querySelector('[data-gid=\"\(gid)\"]'))")
                        let fields = (row.string ?? "").split(separator: " ", maxSplits: 2)
                        guard fields.count == 3, let percent = Int(fields[1]) else { return nil }
                        if percents.last != percent { percents.append(percent) }
                        // HAUL_SCREENSHOT=file.png keeps a picture of the page mid-download.
                        if (30...80).contains(percent), !percents.contains(where: { $0 > 80 }),
                            let path = ProcessInfo.processInfo.environment["HAUL_SCREENSHOT"], !FileManager.default.fileExists(atPath: path)
                        {
                            try await page.screenshot(to: path)
                        }
                        #expect(fields[2].contains("movie.mkv"))
                        return fields[0] == "complete" && percent == 100 ? true : nil
                    }
                    return percents
                }
                #expect(seen.last == 100, "percents seen: \(seen)")
                #expect(seen.contains { (1...99).contains($0) }, "the page showed the download in progress: \(seen)")
                #expect(seen == seen.sorted(), "progress only goes up: \(seen)")
                #expect(dir.contents("movie.mkv") == slow.content)
                #expect(try await daemon.stop() == 0)
            }
        }
    }
}
