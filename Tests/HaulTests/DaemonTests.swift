import AsyncHTTPClient
import Foundation
import HaulDaemon
import HaulTestSupport
import NIOCore
import Testing

/// `haul daemon` as a process, driven over real HTTP on loopback with aria2's JSON-RPC.
@Suite(.serialized) struct DaemonTests {
    static let size = 512 << 10

    func serve(_ server: FaultServer, _ path: String, seed: UInt64 = 1, size: Int = DaemonTests.size, bytesPerSecond: Int? = nil) -> [UInt8] {
        var route = Route(content: testBytes(size, seed: seed))
        route.bytesPerSecond = bytesPerSecond
        server.serve(path, route)
        return route.content
    }

    /// POSTs `body` and returns the HTTP status and the parsed answer.
    func post(
        _ daemon: DaemonProcess, _ body: String, headers: [(String, String)] = []
    ) async throws -> (status: Int, answer: JSONValue?, headers: [String: String]) {
        var request = HTTPClientRequest(url: daemon.endpoint.rpcURL)
        request.method = .POST
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        request.body = .bytes(ByteBuffer(string: body))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let bytes = try await response.body.collect(upTo: 16 << 20)
        let fields = Dictionary(response.headers.map { ($0.name.lowercased(), $0.value) }, uniquingKeysWith: { a, _ in a })
        return (Int(response.status.code), try? JSONValue.parse(bytes.readableBytesView), fields)
    }

    func error(_ answer: JSONValue?) -> String? { answer?["error"]?["message"]?.string }

    // MARK: Transport (the methods themselves: Aria2RPCTests)

    @Test func answersOverHTTPWithAria2sStatuses() async throws {
        try await withDaemon(["--rpc-secret", "s3cret"]) { t in
            let daemon = t.daemon
            let cases: [(body: String, status: Int, code: Int64?)] = [
                (#"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion","params":["token:s3cret"]}"#, 200, nil),
                (#"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion","params":["token:wrong"]}"#, 400, 1),
                (#"{"jsonrpc":"2.0","id":1,"method":"#, 500, -32700),
                (#"{"jsonrpc":"2.0","method":"aria2.getVersion","params":["token:s3cret"]}"#, 400, -32600),
                (#"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion","params":{"a":1}}"#, 500, -32602),
                (#"[{"jsonrpc":"2.0","id":1,"method":"aria2.nope","params":["token:s3cret"]}]"#, 200, nil),
            ]
            for item in cases {
                let (status, answer, headers) = try await post(daemon, item.body)
                #expect(status == item.status, "\(item.body)")
                #expect(answer?["error"]?["code"]?.integer == item.code, "\(item.body)")
                #expect(headers["content-type"] == "application/json-rpc")
            }
            // aria2's GET form, for reading.
            let params = Data(#"["token:s3cret"]"#.utf8).base64EncodedString()
            let response = try await HTTPClient.shared.execute(
                HTTPClientRequest(url: daemon.endpoint.rpcURL + "?method=aria2.getGlobalStat&id=9&params=\(params)"), timeout: .seconds(10))
            let answer = try JSONValue.parse(try await response.body.collect(upTo: 1 << 20).readableBytesView)
            #expect(answer["id"] == "9" && answer["result"]?["numActive"] == "0")
        }
    }

    @Test func notifiesWebSocketClients() async throws {
        try await withDaemon(["--rpc-secret", "s3cret"]) { t in
            _ = serve(t.server, "/n.bin")
            let add = #"{"jsonrpc":"2.0","id":"a","method":"aria2.addUri","params":["token:s3cret",["\#(t.server.url("/n.bin"))"]]}"#
            let messages = try WebSocketProbe.collect(port: t.daemon.endpoint.port, send: [add]) { $0.contains("aria2.onDownloadComplete") }
            // A browser page of the daemon's own origin may connect too; another origin may not.
            let own = try WebSocketProbe.collect(
                port: t.daemon.endpoint.port, send: [#"{"jsonrpc":"2.0","id":"v","method":"aria2.getVersion","params":["token:s3cret"]}"#],
                origin: "http://127.0.0.1:\(t.daemon.endpoint.port)"
            ) { $0.contains(#""id":"v""#) }
            #expect(own.count == 1)
            #expect(throws: WebSocketProbe.Failure.self) {
                try WebSocketProbe.collect(port: t.daemon.endpoint.port, send: [], origin: "http://127.0.0.1:1") { _ in true }
            }
            #expect(messages.contains { $0.contains(#""id":"a""#) && $0.contains("result") })
            #expect(messages.contains { $0.contains("aria2.onDownloadStart") })
            #expect(messages.contains { $0.contains("aria2.onDownloadComplete") })
        }
    }

    /// The daemon, like every `haul` command, runs one NIO event loop for every two cores
    /// instead of NIO's one a core: the other half of a download's work runs on Swift's pool.
    @Test func runsOneEventLoopForEveryTwoCores() async throws {
        try await withDaemon { t in
            let tasks = "/proc/\(t.daemon.process.process.processIdentifier)/task"
            let names = try FileManager.default.contentsOfDirectory(atPath: tasks).compactMap {
                try? String(contentsOfFile: "\(tasks)/\($0)/comm", encoding: .utf8)
            }
            #expect(names.filter { $0.hasPrefix("NIO-SGLTN-") }.count == max(1, System.coreCount / 2), "\(names)")
        }
    }

    // MARK: Safety

    @Test func refusesANonLoopbackAddressWithoutASecret() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let (status, stderr) = try await HaulProcess.run(
            ["daemon", "--rpc-listen-address", "0.0.0.0", "--rpc-listen-port", "0", "--state-dir", dir.file("state")], in: dir.path)
        #expect(status == 2)
        #expect(stderr.hasPrefix("haul: refusing to listen on 0.0.0.0 without --rpc-secret"))
        #expect(stderr.split(separator: "\n").count == 1)
        #expect(!FileManager.default.fileExists(atPath: DaemonEndpoint.path(in: dir.file("state"))))

        // A port someone else listens on: one line, no endpoint file left behind.
        let taken = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(taken) }
        var address = sockaddr_in(
            sin_family: sa_family_t(AF_INET), sin_port: 0, sin_addr: in_addr(s_addr: inet_addr("127.0.0.1")), sin_zero: (0, 0, 0, 0, 0, 0, 0, 0))
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(taken, $0, length) } }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(taken, $0, &length) } }
        listen(taken, 1)
        let port = String(UInt16(bigEndian: address.sin_port))
        let busy = try await HaulProcess.run(["daemon", "--rpc-listen-port", port, "--state-dir", dir.file("state")], in: dir.path)
        #expect(busy.status == 2)
        #expect(
            busy.stderr == "haul: cannot listen on 127.0.0.1:\(port): Address already in use; is another daemon running? Choose another --rpc-listen-port\n")
        #expect(!FileManager.default.fileExists(atPath: DaemonEndpoint.path(in: dir.file("state"))))
    }

    @Test func refusesOtherOriginsAndHostsAndASecondDaemon() async throws {
        try await withDaemon { t in
            let (dir, daemon) = (t.dir, t.daemon)
            let body = #"{"jsonrpc":"2.0","id":1,"method":"aria2.getGlobalStat"}"#
            #expect(try await post(daemon, body).status == 200)
            #expect(try await post(daemon, body, headers: [("Origin", "http://127.0.0.1:\(daemon.endpoint.port)")]).status == 200)
            #expect(try await post(daemon, body, headers: [("Origin", "http://evil.example")]).status == 403)
            #expect(try await post(daemon, body, headers: [("Host", "evil.example:\(daemon.endpoint.port)")]).status == 403)
            let second = try await HaulProcess.run(["daemon", "--rpc-listen-port", "0", "--state-dir", daemon.stateDirectory], in: dir.path)
            #expect(second.status == 2)
            #expect(second.stderr.contains("another haul daemon (pid \(daemon.endpoint.pid)"))
            // The secret file is the owner's only.
            let mode = try FileManager.default.attributesOfItem(atPath: DaemonEndpoint.path(in: daemon.stateDirectory))[.posixPermissions] as? Int
            #expect(mode == 0o600)
        }
        try await withDaemon(["--rpc-allow-origin-all"]) { t in
            let daemon = t.daemon
            let answer = try await post(daemon, #"{"jsonrpc":"2.0","id":1,"method":"aria2.getGlobalStat"}"#, headers: [("Origin", "http://elsewhere.example")])
            #expect(answer.status == 200 && answer.headers["access-control-allow-origin"] == "*")
        }
    }

    // MARK: Stopping and restarting

    @Test func sigtermSavesEveryDownloadAndTheNextStartFinishesThem() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try await FaultServer.withServer { server in
            let contents = (0..<3).map { serve(server, "/s\($0).bin", seed: UInt64(10 + $0), size: 2 << 20, bytesPerSecond: 512 << 10) }
            let gids = try await DaemonProcess.with(state: dir.file("state"), in: dir.path, ["-d", dir.file("downloads"), "-x", "2"]) { first in
                var gids: [String] = []
                for index in contents.indices {
                    gids.append(try #require(try await first.call("aria2.addUri", [[.string(server.url("/s\(index).bin"))]]).string))
                }
                for gid in gids { _ = try await first.waitFor(gid) { Int($0["completedLength"]?.string ?? "") ?? 0 > 256 << 10 } }
                let started = ContinuousClock.now
                #expect(try await first.stop() == 0)
                #expect(ContinuousClock.now - started < .seconds(10))
                return gids
            }
            #expect(!FileManager.default.fileExists(atPath: DaemonEndpoint.path(in: dir.file("state"))))
            for index in contents.indices { #expect(dir.exists("downloads/s\(index).bin.part") && !dir.exists("downloads/s\(index).bin")) }
            let sentBefore = server.totalBodyBytesSent

            try await DaemonProcess.with(state: dir.file("state"), in: dir.path, ["-d", dir.file("downloads")]) { second in
                for gid in gids { _ = try await second.waitFor(gid) { $0["status"] == "complete" } }
                for (index, content) in contents.enumerated() { #expect(dir.contents("downloads/s\(index).bin") == content) }
                // The second run fetched only what was missing (plus at most one read per connection).
                #expect(server.totalBodyBytesSent - sentBefore <= 3 * (2 << 20) - sentBefore + 6 * (1 << 20))
                #expect(try await second.stop() == 0)
            }
        }
    }

    @Test func killNineInTheMiddleOfTwentyDownloadsThenRestartCompletesAll() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try await FaultServer.withServer { server in
            let contents = (0..<20).map { serve(server, "/k\($0).bin", seed: UInt64(40 + $0), size: 1 << 20, bytesPerSecond: 1 << 20) }
            let (gids, pid) = try await DaemonProcess.with(state: dir.file("state"), in: dir.path, ["-d", dir.file("downloads"), "-j", "8"]) { first in
                var gids: [String] = []
                for index in contents.indices {
                    gids.append(try #require(try await first.call("aria2.addUri", [[.string(server.url("/k\(index).bin"))]]).string))
                }
                // Some finished, some half done, some not started.
                _ = try await first.waitFor(gids[0]) { $0["status"] == "complete" }
                try await first.kill()
                return (gids, first.endpoint.pid)
            }
            let left = try #require(try? DaemonEndpoint.read(stateDirectory: dir.file("state")))
            #expect(left.pid == pid, "a killed daemon leaves its endpoint file; the next start replaces it")
            let finishedBefore = contents.indices.filter { dir.exists("downloads/k\($0).bin") }.count
            #expect(finishedBefore < 20)

            try await DaemonProcess.with(state: dir.file("state"), in: dir.path, ["-d", dir.file("downloads"), "-j", "8"]) { second in
                for gid in gids { _ = try await second.waitFor(gid, timeout: .seconds(60)) { $0["status"] == "complete" } }
                for (index, content) in contents.enumerated() { #expect(dir.contents("downloads/k\(index).bin") == content, "k\(index).bin") }
                #expect(try await second.call("aria2.getGlobalStat")["numStopped"] == "20")
                #expect(try await second.stop() == 0)
            }
        }
    }

    @Test func shutdownMethodStopsTheDaemon() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try await DaemonProcess.with(state: dir.file("state"), in: dir.path) { daemon async throws in
            #expect(try await daemon.call("aria2.shutdown") == "OK")
            #expect(try await daemon.process.finish(timeout: .seconds(20)).status == 0)
        }
    }

    // MARK: Hooks

    @Test func runsTheHooksWithAria2sArguments() async throws {
        let scripts = try TestDirectory()
        defer { scripts.remove() }
        let hook = scripts.file("hook.sh")
        try Data("#!/bin/sh\necho \"$0 $1 $2 $3\" >> \"\(scripts.file("calls.txt"))\"\n".utf8).write(to: URL(fileURLWithPath: hook))
        chmod(hook, 0o755)
        try await withDaemon(["--on-download-complete", hook, "--on-download-error", hook]) { t in
            let (server, dir, daemon) = (t.server, t.dir, t.daemon)
            _ = serve(server, "/ok.bin")
            var missingRoute = Route(content: [])
            missingRoute.status = 404
            server.serve("/missing.bin", missingRoute)
            let ok = try #require(try await daemon.call("aria2.addUri", [[.string(server.url("/ok.bin"))]]).string)
            let missing = try #require(try await daemon.call("aria2.addUri", [[.string(server.url("/missing.bin"))], ["out": "m.bin"]]).string)
            _ = try await daemon.waitFor(ok) { $0["status"] == "complete" }
            let failed = try await daemon.waitFor(missing) { $0["status"] == "error" }
            #expect(failed["errorCode"] == "3" && failed["errorMessage"]?.string?.contains("404") == true)
            #expect(try await waitUntil { (try? String(contentsOfFile: scripts.file("calls.txt"), encoding: .utf8))?.split(separator: "\n").count == 2 })
            let calls = Set(try String(contentsOfFile: scripts.file("calls.txt"), encoding: .utf8).split(separator: "\n").map(String.init))
            #expect(calls == ["\(hook) \(ok) 1 \(dir.file("downloads/ok.bin"))", "\(hook) \(missing) 1 \(dir.file("downloads/m.bin"))"])
        }
    }

    @Test func cookiesAreSavedAtShutdownAndTheEnvironmentsProxyIsTheDefault() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try await FaultServer.withServer { server in
            var login = Route(content: testBytes(1000))
            login.responseHeaders = [("Set-Cookie", "session=s1; Path=/")]
            server.serve("/login.bin", login)
            let port = try closedPort()
            let saved = dir.file("cookies.txt")
            // A proxy in the environment is every download's default; no_proxy goes around it.
            try await DaemonProcess.with(
                state: dir.file("state"), in: dir.path, ["-d", dir.file("downloads"), "--save-cookies", saved],
                environment: ["http_proxy": "http://127.0.0.1:\(port)"]
            ) { daemon in
                let global = try await daemon.call("aria2.getGlobalOption")
                #expect(global["all-proxy"] == nil && global["http-proxy"] == .string("http://127.0.0.1:\(port)"))
                let proxied = try #require(
                    try await daemon.call("aria2.addUri", [[.string(server.url("/login.bin"))], ["out": "a.bin", "max-tries": "1"]]).string)
                let failed = try await daemon.waitFor(proxied) { $0["status"] == "error" }
                #expect(failed["errorMessage"] == .string("cannot connect to the proxy 127.0.0.1:\(port): Connection refused"))
                let direct = try #require(
                    try await daemon.call("aria2.addUri", [[.string(server.url("/login.bin"))], ["out": "b.bin", "no-proxy": "127.0.0.1"]]).string)
                _ = try await daemon.waitFor(direct) { $0["status"] == "complete" }
                #expect(try await daemon.stop() == 0)
            }
            let cookies = try String(contentsOfFile: saved, encoding: .utf8)
            #expect(cookies.contains("127.0.0.1\tFALSE\t/\tFALSE\t0\tsession\ts1"), "\(cookies)")
        }
    }
}
