import Foundation
import HaulDaemon
import HaulTestSupport
import Testing

/// What reaches `haul daemon` over its socket from places that must not drive it: DNS
/// rebinding Host names, other origins, aria2's GET form, paths outside its folder, wrong tokens.
@Suite(.serialized) struct DaemonSecurityTests {
    static func addURI(_ url: String, _ options: String = "{}", token: String? = nil) -> String {
        let tokenParam = token.map { #""token:\#($0)","# } ?? ""
        return #"{"jsonrpc":"2.0","id":1,"method":"aria2.addUri","params":[\#(tokenParam)["\#(url)"],\#(options)]}"#
    }

    func post(_ daemon: DaemonProcess, host: String, _ body: String, headers: [(String, String)] = []) throws -> RawHTTP.Answer {
        try RawHTTP.exchange(
            port: daemon.endpoint.port, "POST", "/jsonrpc",
            headers: [("Host", host), ("Content-Type", "application/json")] + headers, body: body)
    }

    /// Every download the daemon knows, whatever its state.
    func everything(_ daemon: DaemonProcess) async throws -> [JSONValue] {
        let lists = try await daemon.call(
            "system.multicall",
            [
                [
                    ["methodName": "aria2.tellActive", "params": daemon.tokenParams([["gid"]])],
                    ["methodName": "aria2.tellWaiting", "params": daemon.tokenParams([0, 1000, ["gid"]])],
                    ["methodName": "aria2.tellStopped", "params": daemon.tokenParams([0, 1000, ["gid"]])],
                ]
            ])
        return (lists.array ?? []).flatMap { $0.array?.first?.array ?? [] }
    }

    @Test func answersOnlyItsOwnNamesWithItsPort() async throws {
        try await withDaemon { t async throws in
            let port = t.daemon.endpoint.port
            let body = Self.addURI(t.server.url("/x.bin"), #"{"pause":"true"}"#)
            for host in [
                "127.evil.example:\(port)", "localhost.evil.com:\(port)", "127.0.0.1.evil.example:\(port)",
                "127.0.0.2:\(port)", "127.0.0.1:\(port + 1)", "127.0.0.1", "evil.example", "",
            ] {
                let answer = try post(t.daemon, host: host, body, headers: [("Origin", "http://\(host)")])
                #expect(answer.status == 403, "Host \(host)")
                #expect(answer.body.contains("refused"), "Host \(host): \(answer.body)")
            }
            // No Host header at all (HTTP/1.1 requires one).
            let bare = try RawHTTP.exchange(port: port, "POST", "/jsonrpc", headers: [], body: body)
            #expect(bare.status == 403 || bare.status == 400)
            #expect(try await everything(t.daemon).isEmpty)
            for host in ["127.0.0.1:\(port)", "localhost:\(port)", "LOCALHOST:\(port)", "[::1]:\(port)"] {
                let answer = try post(
                    t.daemon, host: host, #"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion"}"#,
                    headers: [("Origin", "http://\(host)")])
                #expect(answer.status == 200, "Host \(host): \(answer.body)")
            }
        }
        // A name given with --rpc-allow-host (an SSH tunnel's port, say) is one of its names.
        try await withDaemon(["--rpc-allow-host", "localhost:7000", "--rpc-allow-host", "box.lan"]) { t async throws in
            let port = t.daemon.endpoint.port
            for host in ["localhost:7000", "box.lan:\(port)"] {
                #expect(try post(t.daemon, host: host, #"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion"}"#).status == 200, "\(host)")
            }
            #expect(try post(t.daemon, host: "box.lan.evil.example:\(port)", #"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion"}"#).status == 403)
        }
    }

    @Test func refusesOtherOriginsAndCrossSiteRequests() async throws {
        try await withDaemon { t async throws in
            let port = t.daemon.endpoint.port
            let host = "127.0.0.1:\(port)"
            let body = Self.addURI(t.server.url("/x.bin"), #"{"pause":"true"}"#)
            for headers in [
                [("Origin", "http://127.0.0.1:8099")], [("Origin", "null")], [("Origin", "https://127.0.0.1:\(port)")],
                [("Sec-Fetch-Site", "cross-site")], [("Sec-Fetch-Site", "same-site")],
            ] {
                let answer = try post(t.daemon, host: host, body, headers: headers)
                #expect(answer.status == 403, "\(headers)")
            }
            // A WebSocket handshake from another origin.
            let upgrade = try RawHTTP.exchange(
                port: port, "GET", "/jsonrpc",
                headers: [
                    ("Host", host), ("Origin", "http://127.0.0.1:8099"), ("Upgrade", "websocket"), ("Connection", "Upgrade"),
                    ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="), ("Sec-WebSocket-Version", "13"),
                ])
            #expect(upgrade.status != 101)
            #expect(try await everything(t.daemon).isEmpty)
            // The daemon's own page, and a program that sends no Origin, are answered.
            #expect(try post(t.daemon, host: host, body, headers: [("Origin", "http://\(host)"), ("Sec-Fetch-Site", "same-origin")]).status == 200)
            #expect(try await everything(t.daemon).count == 1)
        }
    }

    @Test func aRefusedWebSocketHandshakeSaysWhyAndIsLogged() async throws {
        try await withDaemon(quiet: false) { t async throws in
            let port = t.daemon.endpoint.port
            let upgrade = try RawHTTP.exchange(
                port: port, "GET", "/jsonrpc",
                headers: [
                    ("Host", "127.0.0.1:\(port)"), ("Origin", "http://ariang.example:8099"), ("Upgrade", "websocket"),
                    ("Connection", "Upgrade"), ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="), ("Sec-WebSocket-Version", "13"),
                ])
            // hummingbird-websocket's own answer was a bare 400: AriaNg's user saw "Cannot connect to aria2!" and nothing more.
            #expect(upgrade.status == 403)
            let message = try JSONValue.parse(Data(upgrade.body.utf8))["error"]?["message"]?.string ?? ""
            #expect(message.contains("http://ariang.example:8099") && message.contains("--rpc-allow-origin-all"), "\(upgrade.body)")
            #expect(!message.contains("\n"))
            // Shown at the daemon's default level, once, with the origin.
            let logged = try await t.daemon.logLines(containing: "WebSocket", "http://ariang.example:8099")
            #expect(logged.count == 1, "\(t.daemon.log)")
            // A Host the daemon does not answer to is a 403 that says so too.
            let rebound = try RawHTTP.exchange(
                port: port, "GET", "/jsonrpc",
                headers: [
                    ("Host", "evil.example:\(port)"), ("Upgrade", "websocket"), ("Connection", "Upgrade"),
                    ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="), ("Sec-WebSocket-Version", "13"),
                ])
            #expect(rebound.status == 403 && rebound.body.contains("--rpc-allow-host"), "\(rebound.body)")
            // A refused POST is logged the same way.
            _ = try post(
                t.daemon, host: "127.0.0.1:\(port)", #"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion"}"#,
                headers: [("Origin", "http://other-page.example")])
            #expect(try await t.daemon.logLines(containing: "http://other-page.example", "--rpc-allow-origin-all").count == 1)
        }
    }

    @Test func theGetFormOnlyReads() async throws {
        try await withDaemon(["--rpc-allow-origin-all"]) { t async throws in
            let port = t.daemon.endpoint.port
            func get(_ method: String, _ params: String) throws -> RawHTTP.Answer {
                let encoded =
                    Data(params.utf8).base64EncodedString()
                    .addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
                return try RawHTTP.exchange(
                    port: port, "GET", "/jsonrpc?method=\(method)&id=7&params=\(encoded)",
                    headers: [("Host", "127.0.0.1:\(port)")])
            }
            let add = try get("aria2.addUri", #"[["\#(t.server.url("/x.bin"))"],{"dir":"/tmp","out":"authorized_keys"}]"#)
            #expect(add.status == 400 && add.body.contains("changes the daemon's state"))
            let multi = try get("system.multicall", #"[[{"methodName":"aria2.addUri","params":[["\#(t.server.url("/y.bin"))"]]}]]"#)
            #expect(multi.body.contains("changes the daemon's state"))
            for method in ["aria2.shutdown", "aria2.pauseAll", "aria2.purgeDownloadResult", "aria2.changeGlobalOption"] {
                #expect(try get(method, "[]").body.contains("changes the daemon's state"), "\(method)")
            }
            #expect(try await everything(t.daemon).isEmpty)
            #expect(!FileManager.default.fileExists(atPath: "/tmp/authorized_keys"))
            let stat = try get("aria2.getGlobalStat", "[]")
            #expect(stat.status == 200 && stat.body.contains("numActive"))
        }
    }

    @Test func withoutASecretDownloadsStayInTheDownloadFolder() async throws {
        try await withDaemon { t async throws in
            let (server, dir, daemon) = (t.server, t.dir, t.daemon)
            server.serve("/f.bin", Route(content: testBytes(1000, seed: 1)))
            let url = server.url("/f.bin")
            try FileManager.default.createDirectory(atPath: dir.file("downloads"), withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: dir.file("elsewhere"), withIntermediateDirectories: true)
            symlink(dir.file("elsewhere"), dir.file("downloads/link"))
            let refused: [(JSONValue, String)] = [
                (["dir": "../escape-rel"], "outside the download folder"),
                (["dir": .string(dir.file("elsewhere"))], "outside the download folder"),
                (["dir": "link"], "outside the download folder"),
                (["dir": "sub/../../x"], "outside the download folder"),
                (["out": "../x.bin"], "out must be a file name inside dir"),
                (["out": .string(dir.file("abs.bin"))], "out must be a file name inside dir"),
                (["out": "a\nb.bin"], "control characters"),
                (["dir": "sub\u{7}dir"], "control characters"),
                (["out": "a\u{85}b.bin"], "control characters"),
            ]
            for (options, message) in refused {
                await #expect(throws: (any Error).self, "\(options)") { try await daemon.call("aria2.addUri", [[.string(url)], options]) }
                do { try await daemon.call("aria2.addUri", [[.string(url)], options]) } catch {
                    #expect("\(error)".contains(message), "\(options): \(error)")
                }
            }
            await #expect(throws: (any Error).self) { try await daemon.call("aria2.changeGlobalOption", [["dir": "/tmp"]]) }
            #expect(try await everything(daemon).isEmpty)

            // A relative dir is inside the download folder, not the daemon's working folder.
            let gid = try #require(try await daemon.call("aria2.addUri", [[.string(url)], ["dir": "sub/inner", "out": "f.bin"]]).string)
            _ = try await daemon.waitFor(gid) { $0["status"] == "complete" }
            #expect(dir.contents("downloads/sub/inner/f.bin") == testBytes(1000, seed: 1))
            #expect(try await daemon.call("aria2.getOption", [.string(gid)])["dir"] == .string(dir.file("downloads/sub/inner")))
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir.file("elsewhere")).isEmpty)
        }
        // With a secret, any folder the daemon's user can write, as in aria2.
        try await withDaemon(["--rpc-secret", "s"]) { t async throws in
            t.server.serve("/f.bin", Route(content: testBytes(1000, seed: 1)))
            let gid = try #require(
                try await t.daemon.call("aria2.addUri", [[.string(t.server.url("/f.bin"))], ["dir": .string(t.dir.file("elsewhere"))]]).string)
            _ = try await t.daemon.waitFor(gid) { $0["status"] == "complete" }
            #expect(t.dir.contents("elsewhere/f.bin") == testBytes(1000, seed: 1))
            do { try await t.daemon.call("aria2.addUri", [[.string(t.server.url("/f.bin"))], ["out": "a\rb"]]) } catch {
                #expect("\(error)".contains("control characters"))
            }
        }
    }

    @Test func aWrongTokenCostsOneDelayPerRequest() async throws {
        try await withDaemon(["--rpc-secret", "right"]) { t async throws in
            let port = t.daemon.endpoint.port
            let call = #"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion","params":["token:wrong"]}"#
            let batch = "[" + Array(repeating: call, count: 10_000).joined(separator: ",") + "]"
            // aria2 waits a second per call: 10,000 s. The timeout bounds the test, not the speed.
            let answer = try RawHTTP.exchange(port: port, "POST", "/jsonrpc", headers: [("Host", "127.0.0.1:\(port)")], body: batch, timeout: 60)
            let answers = try #require(try JSONValue.parse(Data(answer.body.utf8)).array)
            #expect(answers.count == 10_000 && answers.allSatisfy { $0["error"]?["message"] == "Unauthorized" })
        }
    }

    @Test func wrongTokensFromOneAddressWaitTheirTurn() async throws {
        try await withDaemon(["--rpc-secret", "right"]) { t async throws in
            let port = t.daemon.endpoint.port
            func send(_ token: String, from source: String = "127.0.0.1") async throws -> (Duration, String) {
                let body = #"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion","params":["token:\#(token)"]}"#
                let start = ContinuousClock.now
                let answer = try await onThread {
                    try RawHTTP.exchange(port: port, "POST", "/jsonrpc", headers: [("Host", "127.0.0.1:\(port)")], body: body, from: source)
                }
                return (ContinuousClock.now - start, answer.body)
            }
            let start = ContinuousClock.now
            try await withThrowingTaskGroup(of: (String, Duration, String).self) { group in
                for _ in 0..<5 {
                    group.addTask {
                        let (took, body) = try await send("wrong"); return ("guess", took, body)
                    }
                }
                group.addTask {
                    try await Task.sleep(for: .milliseconds(200))
                    let (took, body) = try await send("wrong", from: "127.0.0.2")
                    return ("other address", took, body)
                }
                group.addTask {
                    try await Task.sleep(for: .milliseconds(200))
                    let (took, body) = try await send("right")
                    return ("right token", took, body)
                }
                var guesses: [Duration] = []
                for try await (what, took, body) in group {
                    switch what {
                    case "guess":
                        #expect(body.contains("Unauthorized"))
                        guesses.append(took)
                    case "other address":
                        #expect(body.contains("Unauthorized"))
                        #expect(took < .milliseconds(1900), "another address waits for its own guesses only: \(took)")
                    default:
                        #expect(body.contains("version"))
                        #expect(took < .milliseconds(800), "a right token waits for nothing: \(took)")
                    }
                }
                // Answered one a second: at about 1, 2, 3, 4 and 5 s (each was 1 s, all at once, before).
                guesses.sort()
                for (turn, took) in guesses.enumerated() {
                    #expect(took >= .milliseconds(900 * (turn + 1)), "guess \(turn + 1) answered after \(took)")
                }
            }
            #expect(ContinuousClock.now - start < .seconds(8))
        }
    }

    @Test func aBatchOfTokensIsOneGuess() async throws {
        try await RPCFixture.with(secret: "right") { f async throws in
            // The right token after a wrong one in the same request is not even compared.
            let answers = await f.answer(
                #"[{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion","params":["token:wrong"]},"#
                    + #"{"jsonrpc":"2.0","id":2,"method":"aria2.getVersion","params":["token:right"]}]"#)
            #expect(answers.array?.map { $0["error"]?["message"] } == ["Unauthorized", "Unauthorized"])
            #expect(try await f.call("aria2.getVersion")["version"] != nil)
        }
    }

    @Test func theDaemonPrintsItsSecretOnlyWhenAsked() async throws {
        let secret = "Sekr1tToken42"
        try await withDaemon(["--rpc-secret", secret], quiet: false) { t async throws in
            let line = try #require(try await t.daemon.logLines(containing: "daemon listening").first)
            #expect(line.contains("web page: http://127.0.0.1:\(t.daemon.endpoint.port)/ "), "\(line)")
            #expect(line.contains("--print-token"))
            #expect(!t.daemon.log.contains(secret))
        }
        try await withDaemon(["--rpc-secret", secret, "--print-token"], quiet: false) { t async throws in
            let line = try #require(try await t.daemon.logLines(containing: "daemon listening").first)
            #expect(line.contains("http://127.0.0.1:\(t.daemon.endpoint.port)/#token=\(secret)"), "\(line)")
        }
    }

    @Test func globalOptionChangesAreLoggedAndCertificateChecksNeedTheOwner() async throws {
        try await withDaemon(quiet: false) { t async throws in
            do {
                try await t.daemon.call("aria2.changeGlobalOption", [["check-certificate": "false"]])
                Issue.record("check-certificate=false was accepted without a secret")
            } catch {
                #expect("\(error)".contains("--rpc-secret") && "\(error)".contains("--check-certificate=false"), "\(error)")
            }
            #expect(try await t.daemon.call("aria2.getGlobalOption")["check-certificate"] == "true")
            // One download's own option concerns that download only: still allowed.
            _ = try await t.daemon.call("aria2.addUri", [[.string(t.server.url("/x.bin"))], ["check-certificate": "false", "pause": "true"]])

            try await t.daemon.call(
                "aria2.changeGlobalOption",
                [
                    [
                        "all-proxy": "http://bob:proxy-pw-31@127.0.0.1:3128", "http-user": "bob", "http-passwd": "http-pw-47", "max-tries": "7",
                    ]
                ])
            let lines = try await t.daemon.logLines(containing: "changeGlobalOption")
            #expect(lines.count == 4, "\(t.daemon.log)")
            #expect(lines.contains { $0.contains("all-proxy=") && $0.contains("127.0.0.1:3128") })
            #expect(lines.contains { $0.contains("http-passwd=\"********\"") })
            #expect(lines.contains { $0.contains("max-tries=\"7\"") && $0.contains("127.0.0.1") })
            #expect(!t.daemon.log.contains("proxy-pw-31") && !t.daemon.log.contains("http-pw-47"))
        }
        // Whoever starts the daemon may turn the checks off: on its command line, or with a secret.
        try await withDaemon(["--check-certificate=false"]) { t async throws in
            #expect(try await t.daemon.call("aria2.getGlobalOption")["check-certificate"] == "false")
        }
        try await withDaemon(["--rpc-secret", "s"]) { t async throws in
            try await t.daemon.call("aria2.changeGlobalOption", [["check-certificate": "false"]])
            #expect(try await t.daemon.call("aria2.getGlobalOption")["check-certificate"] == "false")
        }
    }

    @Test func anOversizedBodyGetsAJSONRPCError() async throws {
        try await withDaemon { t async throws in
            let port = t.daemon.endpoint.port
            let body = #"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion","params":[""# + String(repeating: "a", count: 5 << 20) + #""]}"#
            let answer = try RawHTTP.exchange(port: port, "POST", "/jsonrpc", headers: [("Host", "127.0.0.1:\(port)")], body: body)
            #expect(answer.status == 413)
            let json = try JSONValue.parse(Data(answer.body.utf8))
            #expect(json["error"]?["code"] == -32600)
            #expect(json["error"]?["message"]?.string?.contains("larger than 4 MiB") == true)
        }
    }
}
