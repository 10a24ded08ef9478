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

    static var chromium: String? {
        ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

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
                try Self.runPython([Self.script, "--port", String(daemon.endpoint.port), "--secret", "pa55",
                                    "--dir", dir.file("dl"), "--timeout", "30",
                                    server.url("/slow.bin"), server.url("/b.bin"), server.url("/c.bin")])
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
                let connected = try await page.poll(timeout: .seconds(20)) {
                    try await page.evaluate("document.body.dataset.connected") == "true" ? true : nil
                }
                #expect(connected)
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
                       let path = ProcessInfo.processInfo.environment["HAUL_SCREENSHOT"], !FileManager.default.fileExists(atPath: path) {
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

/// Headless Chromium with its DevTools protocol on a free port.
final class Browser: Sendable {
    let process: Process
    let profile: String

    /// - Parameter arguments: more command-line switches, e.g. `--host-resolver-rules=MAP evil.test 127.0.0.1`.
    init(_ executable: String, profile: String, arguments: [String] = []) throws {
        self.profile = profile
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
                             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "--remote-allow-origins=*",
                             "--user-data-dir=\(profile)", "--window-size=1280,900"] + arguments + ["about:blank"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    func stop() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Connects to the first page target and runs `body` with it.
    func withPage<T: Sendable>(_ body: @escaping @Sendable (Page) async throws -> T) async throws -> T {
        let portFile = (profile as NSString).appendingPathComponent("DevToolsActivePort")
        guard try await waitUntil(timeout: .seconds(30), { FileManager.default.fileExists(atPath: portFile) }),
              let port = try String(contentsOfFile: portFile, encoding: .utf8).split(separator: "\n").first
        else { throw Page.Failure(description: "chromium did not open its DevTools port") }
        let list = try await HTTPClient.shared.execute(HTTPClientRequest(url: "http://127.0.0.1:\(port)/json/list"), timeout: .seconds(10))
        let targets = try JSONValue.parse(try await list.body.collect(upTo: 1 << 20).readableBytesView)
        guard let socket = targets.array?.first(where: { $0["type"] == "page" })?["webSocketDebuggerUrl"]?.string else {
            throw Page.Failure(description: "chromium has no page target: \(targets)")
        }
        let result = Mutex<Result<T, any Error>?>(nil)
        var configuration = WebSocketClientConfiguration()
        configuration.maxFrameSize = 16 << 20
        try await WebSocketClient.connect(url: socket, configuration: configuration, logger: Logger(label: "cdp")) { inbound, outbound, _ in
            let page = Page(inbound: inbound.messages(maxSize: 32 << 20).makeAsyncIterator(), outbound: outbound)
            let outcome: Result<T, any Error>
            do { outcome = .success(try await body(page)) } catch { outcome = .failure(error) }
            result.withLock { $0 = outcome }
            try await outbound.close(.normalClosure, reason: nil)
        }
        guard let outcome = result.withLock({ $0 }) else { throw Page.Failure(description: "the DevTools connection closed") }
        return try outcome.get()
    }
}

/// One page over the DevTools protocol: a command, then its answer (events in between are skipped).
final class Page: @unchecked Sendable {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private var inbound: WebSocketInboundMessageStream.AsyncIterator
    private let outbound: WebSocketOutboundWriter
    private var nextID: Int64 = 0

    init(inbound: WebSocketInboundMessageStream.AsyncIterator, outbound: WebSocketOutboundWriter) {
        self.inbound = inbound
        self.outbound = outbound
    }

    func send(_ method: String, _ params: [String: JSONValue] = [:]) async throws -> JSONValue {
        nextID += 1
        let id = nextID
        try await outbound.write(.text(JSONValue.object(["id": .int(id), "method": .string(method), "params": .object(params)]).description))
        while let message = try await inbound.next() {
            guard case .text(let text) = message, let answer = try? JSONValue.parse(Data(text.utf8)), answer["id"] == .int(id) else { continue }
            if let error = answer["error"] { throw Failure(description: "\(method): \(error)") }
            return answer["result"] ?? .null
        }
        throw Failure(description: "the DevTools connection closed during \(method)")
    }

    /// The value of a JavaScript expression.
    func evaluate(_ expression: String) async throws -> JSONValue {
        try await send("Runtime.evaluate", ["expression": .string(expression), "returnByValue": true])["result"]?["value"] ?? .null
    }

    func screenshot(to path: String) async throws {
        let data = try await send("Page.captureScreenshot", ["format": "png"])["data"]?.string ?? ""
        try Data(base64Encoded: data)?.write(to: URL(fileURLWithPath: path))
    }

    /// Calls `probe` every 100 ms until it returns a value, at most `timeout`.
    func poll<T>(timeout: Duration, _ probe: () async throws -> T?) async throws -> T {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let value = try await probe() { return value }
            try await Task.sleep(for: .milliseconds(100))
        }
        if let value = try await probe() { return value }
        throw Failure(description: "timed out after \(timeout)")
    }
}
