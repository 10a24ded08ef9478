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
    func post(_ daemon: DaemonProcess, _ body: String, headers: [(String, String)] = []) async throws -> (status: Int, answer: JSONValue?, headers: [String: String]) {
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

    // MARK: Methods

    @Test func addsAndReportsDownloadsAsAria2Does() async throws {
        try await withDaemon(["--rpc-secret", "s3cret"]) { t in
            let (server, dir, daemon) = (t.server, t.dir, t.daemon)
            let content = serve(server, "/a.bin")
            var options: JSONValue = [
                "out": "renamed.bin", "split": "2", "max-connection-per-server": "2",
                "header": ["X-Test: yes"], "checksum": .string("sha-256=\(sha256Hex(content))"),
            ]
            let gid = try #require(try await daemon.call("aria2.addUri", [[.string(server.url("/a.bin"))], options]).string)
            #expect(gid.count == 16 && gid.allSatisfy(\.isHexDigit))
            let done = try await daemon.waitFor(gid) { $0["status"] == "complete" }
            #expect(dir.contents("downloads/renamed.bin") == content)
            #expect(done["totalLength"] == .string(String(Self.size)) && done["completedLength"] == .string(String(Self.size)))
            #expect(done["errorCode"] == "0" && done["downloadSpeed"] == "0" && done["dir"] == .string(dir.file("downloads")))
            #expect(done["files"]?.array?.first?["path"] == .string(dir.file("downloads/renamed.bin")))
            #expect(server.stats("/a.bin").requests.allSatisfy { $0.header("X-Test") == "yes" })

            // The keys filter, the lists, files, options and stats.
            #expect(try await daemon.call("aria2.tellStatus", [.string(gid), ["gid", "status", "nope"]]) == ["gid": .string(gid), "status": "complete"])
            #expect(try await daemon.call("aria2.tellStopped", [0, 10, ["gid"]]) == [["gid": .string(gid)]])
            #expect(try await daemon.call("aria2.tellActive") == [])
            #expect(try await daemon.call("aria2.getFiles", [.string(gid)]).array?.first?["length"] == .string(String(Self.size)))
            let option = try await daemon.call("aria2.getOption", [.string(gid)])
            #expect(option["out"] == "renamed.bin" && option["split"] == "2" && option["header"] == ["X-Test: yes"])
            let stat = try await daemon.call("aria2.getGlobalStat")
            #expect(stat["numStopped"] == "1" && stat["numActive"] == "0" && stat["uploadSpeed"] == "0")
            #expect(try await daemon.call("aria2.getVersion")["version"]?.string?.isEmpty == false)
            #expect(try await daemon.call("aria2.getSessionInfo")["sessionId"]?.string?.count == 40)
            #expect(try await daemon.call("aria2.saveSession") == "OK")

            // A prefix of a GID is enough, as in aria2; removing the result forgets it.
            #expect(try await daemon.call("aria2.tellStatus", [.string(String(gid.prefix(6))), ["gid"]])["gid"] == .string(gid))
            #expect(try await daemon.call("aria2.removeDownloadResult", [.string(gid)]) == "OK")
            #expect(dir.exists("downloads/renamed.bin"))
            let gone = try await post(daemon, #"{"jsonrpc":"2.0","id":1,"method":"aria2.tellStatus","params":["token:s3cret","\#(gid)"]}"#)
            #expect(gone.status == 400 && error(gone.answer) == "GID \(gid) is not found")
            options = ["checksum": "sha-256=00"]
            let bad = try await post(daemon, #"{"jsonrpc":"2.0","id":2,"method":"aria2.addUri","params":["token:s3cret",["\#(server.url("/a.bin"))"],\#(options)]}"#)
            #expect(bad.status == 400 && error(bad.answer)?.contains("checksum") == true)
        }
    }

    @Test func answersErrorsWithAria2sCodesAndStatuses() async throws {
        try await withDaemon(["--rpc-secret", "s3cret"]) { t in
            let daemon = t.daemon
            let cases: [(body: String, status: Int, code: Int64, message: String)] = [
                (#"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion","params":["token:wrong"]}"#, 400, 1, "Unauthorized"),
                (#"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion"}"#, 400, 1, "Unauthorized"),
                (#"{"jsonrpc":"2.0","id":1,"method":"aria2.nope","params":["token:s3cret"]}"#, 400, 1, "No such method: aria2.nope"),
                (#"{"jsonrpc":"2.0","id":1,"method":"#, 500, -32700, "Parse error."),
                (#"{"jsonrpc":"2.0","method":"aria2.getVersion","params":["token:s3cret"]}"#, 400, -32600, "Invalid Request."),
                (#"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion","params":{"a":1}}"#, 500, -32602, "Invalid params."),
                (#"{"jsonrpc":"2.0","id":1,"method":"aria2.addUri","params":["token:s3cret","http://x/"]}"#, 400, 1, "The parameter at 0 has wrong type."),
                (#"{"jsonrpc":"2.0","id":1,"method":"aria2.tellStatus","params":["token:s3cret"]}"#, 400, 1, "The parameter at 0 is required but missing."),
                (#"{"jsonrpc":"2.0","id":1,"method":"aria2.tellStatus","params":["token:s3cret","xyz"]}"#, 400, 1, "Invalid GID xyz"),
                (#"{"jsonrpc":"2.0","id":1,"method":"aria2.pause","params":["token:s3cret","0123456789abcdef"]}"#, 400, 1, "GID 0123456789abcdef is not found"),
                (#"{"jsonrpc":"2.0","id":1,"method":"aria2.addUri","params":["token:s3cret",[]]}"#, 400, 1, "URI is not provided."),
            ]
            for item in cases {
                let (status, answer, headers) = try await post(daemon, item.body)
                #expect(status == item.status, "\(item.body)")
                #expect(answer?["error"]?["code"]?.integer == item.code, "\(item.body)")
                #expect(error(answer) == item.message, "\(item.body)")
                #expect(headers["content-type"] == "application/json-rpc")
            }
            let torrent = try await post(daemon, #"{"jsonrpc":"2.0","id":"t","method":"aria2.addTorrent","params":["token:s3cret","AAAA"]}"#)
            #expect(torrent.status == 400 && error(torrent.answer)?.contains("not supported") == true && torrent.answer?["id"] == "t")
            let notURL = try await post(daemon, #"{"jsonrpc":"2.0","id":1,"method":"aria2.addUri","params":["token:s3cret",["ftp://example.com/x"]]}"#)
            #expect(error(notURL.answer)?.contains("http:// and https://") == true)

            // Listing needs no token; a multicall checks each call's own; a batch answers each object.
            #expect(try await post(daemon, #"{"jsonrpc":"2.0","id":1,"method":"system.listMethods"}"#).answer?["result"]?.array?.contains("aria2.addUri") == true)
            let multi = try await post(daemon, #"{"jsonrpc":"2.0","id":1,"method":"system.multicall","params":[[{"methodName":"aria2.getGlobalStat","params":["token:s3cret"]},{"methodName":"aria2.getGlobalStat","params":["token:no"]}]]}"#)
            #expect(multi.status == 200)
            let results = try #require(multi.answer?["result"]?.array)
            #expect(results.count == 2 && results[0].array?.first?["numActive"] == "0" && results[1]["message"] == "Unauthorized")
            let batch = try await post(daemon, #"[{"jsonrpc":"2.0","id":1,"method":"aria2.getGlobalStat","params":["token:s3cret"]},42,{"jsonrpc":"2.0","id":2,"method":"aria2.nope","params":["token:s3cret"]}]"#)
            #expect(batch.status == 200 && batch.answer?.array?.count == 2 && batch.answer?.array?.last?["id"] == 2)

            // aria2's GET form.
            let params = Data(#"["token:s3cret"]"#.utf8).base64EncodedString()
            let response = try await HTTPClient.shared.execute(
                HTTPClientRequest(url: daemon.endpoint.rpcURL + "?method=aria2.getGlobalStat&id=9&params=\(params)"), timeout: .seconds(10))
            let answer = try JSONValue.parse(try await response.body.collect(upTo: 1 << 20).readableBytesView)
            #expect(answer["id"] == "9" && answer["result"]?["numActive"] == "0")
        }
    }

    @Test func controlsTheQueue() async throws {
        try await withDaemon(["-j", "1", "-x", "1"]) { t in
            let (server, dir, daemon) = (t.server, t.dir, t.daemon)
            // Slow enough that each stays active for a while.
            for index in 0..<4 { _ = serve(server, "/q\(index).bin", seed: UInt64(index), bytesPerSecond: 256 << 10) }
            var gids: [String] = []
            for index in 0..<4 {
                gids.append(try #require(try await daemon.call("aria2.addUri", [[.string(server.url("/q\(index).bin"))]]).string))
            }
            _ = try await daemon.waitFor(gids[0]) { $0["status"] == "active" }
            let waiting = try await daemon.call("aria2.tellWaiting", [0, 10, ["gid"]]).array?.compactMap { $0["gid"]?.string }
            #expect(waiting == Array(gids[1...]))
            // Negative offsets count from the end, listing backwards.
            #expect(try await daemon.call("aria2.tellWaiting", [-1, 2, ["gid"]]) == [["gid": .string(gids[3])], ["gid": .string(gids[2])]])
            #expect(try await daemon.call("aria2.changePosition", [.string(gids[3]), 0, "POS_SET"]) == 0)
            #expect(try await daemon.call("aria2.changePosition", [.string(gids[3]), 1, "POS_CUR"]) == 1)
            #expect(try await daemon.call("aria2.changePosition", [.string(gids[1]), 0, "POS_END"]) == 2)
            let order = try await daemon.call("aria2.tellWaiting", [0, 10, ["gid"]]).array?.compactMap { $0["gid"]?.string }
            #expect(order == [gids[3], gids[2], gids[1]])

            // Pause an active one: the next starts; unpause queues it again.
            #expect(try await daemon.call("aria2.pause", [.string(gids[0])]) == .string(gids[0]))
            #expect(try await daemon.call("aria2.tellStatus", [.string(gids[0]), ["status"]])["status"] == "paused")
            _ = try await daemon.waitFor(gids[3]) { $0["status"] == "active" }
            #expect(try await daemon.call("aria2.unpause", [.string(gids[0])]) == .string(gids[0]))
            #expect(try await daemon.call("aria2.tellStatus", [.string(gids[0]), ["status"]])["status"] == "waiting")
            let notPaused = try await post(daemon, #"{"jsonrpc":"2.0","id":1,"method":"aria2.unpause","params":["\#(gids[0])"]}"#)
            #expect(error(notPaused.answer) == "GID#\(gids[0]) cannot be unpaused now")

            // Remove the active one: listed as removed, no partial left; a waiting one vanishes.
            #expect(try await daemon.call("aria2.remove", [.string(gids[3])]) == .string(gids[3]))
            let removed = try await daemon.call("aria2.tellStatus", [.string(gids[3])])
            #expect(removed["status"] == "removed" && removed["errorCode"] == "31")
            #expect(!dir.exists("downloads/q3.bin") && !dir.exists("downloads/q3.bin.part"))
            #expect(try await daemon.call("aria2.forceRemove", [.string(gids[1])]) == .string(gids[1]))
            let vanished = try await post(daemon, #"{"jsonrpc":"2.0","id":1,"method":"aria2.tellStatus","params":["\#(gids[1])"]}"#)
            #expect(error(vanished.answer) == "GID \(gids[1]) is not found")

            // Global options: more at once, no rate limit.
            #expect(try await daemon.call("aria2.changeGlobalOption", [["max-concurrent-downloads": "5", "max-overall-download-limit": "0"]]) == "OK")
            let global = try await daemon.call("aria2.getGlobalOption")
            #expect(global["max-concurrent-downloads"] == "5" && global["dir"] == .string(dir.file("downloads")) && global["rpc-secret"] == nil)
            for gid in [gids[0], gids[2]] { _ = try await daemon.waitFor(gid) { $0["status"] == "complete" } }
            #expect(try await daemon.call("aria2.purgeDownloadResult") == "OK")
            #expect(try await daemon.call("aria2.tellStopped", [0, 10]) == [])
            #expect(dir.contents("downloads/q0.bin") == testBytes(Self.size, seed: 0))
        }
    }

    @Test func changesOptionsAndTheURLOfADownload() async throws {
        try await withDaemon(["-x", "1"]) { t in
            let (server, dir, daemon) = (t.server, t.dir, t.daemon)
            let content = serve(server, "/new.bin", seed: 7)
            var gone = Route(content: content)
            gone.status = 404
            server.serve("/old.bin", gone)
            let gid = try #require(try await daemon.call("aria2.addUri", [[.string(server.url("/old.bin"))], ["pause": "true"]]).string)
            #expect(try await daemon.call("aria2.tellStatus", [.string(gid), ["status"]])["status"] == "paused")
            #expect(try await daemon.call("aria2.changeUri", [.string(gid), 1, [.string(server.url("/old.bin"))], [.string(server.url("/new.bin"))]]) == [1, 1])
            #expect(try await daemon.call("aria2.getUris", [.string(gid)]).array?.first?["uri"] == .string(server.url("/new.bin")))
            #expect(try await daemon.call("aria2.changeOption", [.string(gid), ["max-download-limit": "1M", "out": "x.bin"]]) == "OK")
            #expect(try await daemon.call("aria2.getOption", [.string(gid)])["max-download-limit"] == .string(String(1 << 20)))
            _ = try await daemon.call("aria2.unpause", [.string(gid)])
            _ = try await daemon.waitFor(gid) { $0["status"] == "complete" }
            #expect(dir.contents("downloads/x.bin") == content)
            #expect(server.stats("/old.bin").getCount == 0)
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
        var address = sockaddr_in(sin_family: sa_family_t(AF_INET), sin_port: 0, sin_addr: in_addr(s_addr: inet_addr("127.0.0.1")), sin_zero: (0, 0, 0, 0, 0, 0, 0, 0))
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(taken, $0, length) } }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(taken, $0, &length) } }
        listen(taken, 1)
        let port = String(UInt16(bigEndian: address.sin_port))
        let busy = try await HaulProcess.run(["daemon", "--rpc-listen-port", port, "--state-dir", dir.file("state")], in: dir.path)
        #expect(busy.status == 2)
        #expect(busy.stderr == "haul: cannot listen on 127.0.0.1:\(port): Address already in use; is another daemon running? Choose another --rpc-listen-port\n")
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
}
