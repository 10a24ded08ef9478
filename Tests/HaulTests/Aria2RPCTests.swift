import Foundation
import HaulTestSupport
import Testing
@testable import Haul
@testable import HaulDaemon

/// aria2's JSON-RPC methods, answered in-process (no daemon process, no RPC socket): every
/// method, its errors with aria2's codes and messages, multicall and batches. The socket
/// tests (`DaemonTests`, `DaemonSecurityTests`) cover the transport and its safety.
@Suite(.serialized) struct Aria2RPCTests {
    // MARK: Adding and reporting

    /// Downloads added with the daemon's defaults hold one copy of their options between them.
    @Test func downloadsAddedWithTheDefaultsShareTheirOptions() throws {
        let globals = GlobalOptions(dir: "/tmp/q", folders: FolderPolicy(root: "/tmp/q", confined: false))
        let template = Aria2Options.template(globals)
        let (a, pausedA) = try Aria2Options.request(urls: ["http://h/a"], options: [:], defaults: globals, template: template)
        let (b, pausedB) = try Aria2Options.request(
            urls: ["http://h/b"], options: ["dir": "/tmp/q/sub", "pause": "true"],
            defaults: globals, template: template)
        let (c, _) = try Aria2Options.request(
            urls: ["http://h/c"], options: ["split": "2", "max-connection-per-server": "2"],
            defaults: globals, template: template)
        #expect(a.sharesOptions(with: template) && b.sharesOptions(with: template))
        #expect(!c.sharesOptions(with: template) && c.connections == 2)
        #expect(a.url == "http://h/a" && a.connections == 4 && !pausedA && pausedB)
        #expect(b.destination == .directory("/tmp/q/sub"))
    }

    @Test func addsAndReportsDownloadsAsAria2Does() async throws {
        try await RPCFixture.with(secret: "s3cret") { t async throws in
            let content = t.serve("/a.bin", size: 512 << 10)
            var options: JSONValue = [
                "out": "renamed.bin", "split": "2", "max-connection-per-server": "2",
                "header": ["X-Test: yes"], "checksum": .string("sha-256=\(sha256Hex(content))"),
            ]
            let gid = try #require(try await t.call("aria2.addUri", [[.string(t.server.url("/a.bin"))], options]).string)
            #expect(gid.count == 16 && gid.allSatisfy(\.isHexDigit))
            let done = try await t.waitFor(gid) { $0["status"] == "complete" }
            #expect(t.dir.contents("downloads/renamed.bin") == content)
            let size = JSONValue.string(String(512 << 10))
            #expect(done["totalLength"] == size && done["completedLength"] == size)
            #expect(done["errorCode"] == "0" && done["downloadSpeed"] == "0" && done["dir"] == .string(t.downloads))
            #expect(done["files"]?.array?.first?["path"] == .string(t.dir.file("downloads/renamed.bin")))
            #expect(t.server.stats("/a.bin").requests.allSatisfy { $0.header("X-Test") == "yes" })

            // The keys filter, the lists, files, options and stats.
            #expect(try await t.call("aria2.tellStatus", [.string(gid), ["gid", "status", "nope"]]) == ["gid": .string(gid), "status": "complete"])
            #expect(try await t.call("aria2.tellStopped", [0, 10, ["gid"]]) == [["gid": .string(gid)]])
            #expect(try await t.call("aria2.tellActive") == [])
            #expect(try await t.call("aria2.getFiles", [.string(gid)]).array?.first?["length"] == size)
            let option = try await t.call("aria2.getOption", [.string(gid)])
            #expect(option["out"] == "renamed.bin" && option["split"] == "2" && option["header"] == ["X-Test: yes"])
            let stat = try await t.call("aria2.getGlobalStat")
            #expect(stat["numStopped"] == "1" && stat["numActive"] == "0" && stat["uploadSpeed"] == "0")
            #expect(try await t.call("aria2.getVersion")["version"]?.string?.isEmpty == false)
            #expect(try await t.call("aria2.getSessionInfo")["sessionId"]?.string?.count == 40)
            #expect(try await t.call("aria2.saveSession") == "OK")
            #expect(await t.failure("aria2.getUris", [.string(gid)]) == "No URI data is available for GID#\(gid)")

            // A prefix of a GID is enough, as in aria2; removing the result forgets it.
            #expect(try await t.call("aria2.tellStatus", [.string(String(gid.prefix(6))), ["gid"]])["gid"] == .string(gid))
            #expect(try await t.call("aria2.removeDownloadResult", [.string(gid)]) == "OK")
            #expect(t.dir.exists("downloads/renamed.bin"))
            #expect(await t.failure("aria2.tellStatus", [.string(gid)]) == "GID \(gid) is not found")
            options = ["checksum": "sha-256=00"]
            #expect(await t.failure("aria2.addUri", [[.string(t.server.url("/a.bin"))], options])?.contains("checksum") == true)
        }
    }

    @Test func answersErrorsWithAria2sCodesAndMessages() async throws {
        try await RPCFixture.with(secret: "s3cret") { t async throws in
            let cases: [(body: String, code: Int64, message: String)] = [
                (#"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion","params":["token:wrong"]}"#, 1, "Unauthorized"),
                (#"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion"}"#, 1, "Unauthorized"),
                (#"{"jsonrpc":"2.0","id":1,"method":"aria2.nope","params":["token:s3cret"]}"#, 1, "No such method: aria2.nope"),
                (#"{"jsonrpc":"2.0","id":1,"method":"#, -32700, "Parse error."),
                (#"42"#, -32700, "Parse error."),
                (#""text""#, -32600, "Invalid Request."),
                (#"{"jsonrpc":"2.0","method":"aria2.getVersion","params":["token:s3cret"]}"#, -32600, "Invalid Request."),
                (#"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion","params":{"a":1}}"#, -32602, "Invalid params."),
                (#"{"jsonrpc":"2.0","id":1,"method":"aria2.addUri","params":["token:s3cret","http://x/"]}"#, 1, "The parameter at 0 has wrong type."),
                (#"{"jsonrpc":"2.0","id":1,"method":"aria2.tellStatus","params":["token:s3cret"]}"#, 1, "The parameter at 0 is required but missing."),
                (#"{"jsonrpc":"2.0","id":1,"method":"aria2.tellStatus","params":["token:s3cret","xyz"]}"#, 1, "Invalid GID xyz"),
                (#"{"jsonrpc":"2.0","id":1,"method":"aria2.pause","params":["token:s3cret","0123456789abcdef"]}"#, 1, "GID 0123456789abcdef is not found"),
                (#"{"jsonrpc":"2.0","id":1,"method":"aria2.addUri","params":["token:s3cret",[]]}"#, 1, "URI is not provided."),
                (
                    #"{"jsonrpc":"2.0","id":1,"method":"aria2.tellWaiting","params":["token:s3cret",0,-1]}"#, 1,
                    "The integer parameter at 1 has invalid value: the value must be greater than or equal to 0."
                ),
                (
                    #"{"jsonrpc":"2.0","id":1,"method":"aria2.changePosition","params":["token:s3cret","0123456789abcdef",0,"POS_NOPE"]}"#, 1,
                    "GID 0123456789abcdef is not found"
                ),
            ]
            for item in cases {
                let answer = await t.answer(item.body)
                #expect(answer["error"]?["code"]?.integer == item.code, "\(item.body)")
                #expect(answer["error"]?["message"]?.string == item.message, "\(item.body)")
            }
            let torrent = await t.answer(#"{"jsonrpc":"2.0","id":"t","method":"aria2.addTorrent","params":["token:s3cret","AAAA"]}"#)
            #expect(torrent["error"]?["message"]?.string?.contains("not supported") == true && torrent["id"] == "t")
            #expect(await t.failure("aria2.getPeers")?.contains("not supported") == true)
            #expect(await t.failure("aria2.addUri", [["ftp://example.com/x"]])?.contains("http:// and https://") == true)
            #expect(await t.failure("aria2.addUri", [["http://x/"], [:], -1]) == "Position must be greater than or equal to 0.")
        }
    }

    @Test func multicallAndBatches() async throws {
        try await RPCFixture.with(secret: "s3cret") { t async throws in
            // Listing needs no token; a multicall checks each call's own; a batch answers each object.
            #expect(await t.answer(#"{"jsonrpc":"2.0","id":1,"method":"system.listMethods"}"#)["result"]?.array?.contains("aria2.addUri") == true)
            #expect(
                await t.answer(#"{"jsonrpc":"2.0","id":1,"method":"system.listNotifications"}"#)["result"]?.array?.contains("aria2.onDownloadComplete") == true)
            let multi = await t.answer(
                #"{"jsonrpc":"2.0","id":1,"method":"system.multicall","params":[[{"methodName":"aria2.getGlobalStat","params":["token:s3cret"]},{"methodName":"aria2.getGlobalStat","params":["token:no"]},{"methodName":"system.multicall","params":[]},{"params":[]}]]}"#
            )
            let results = try #require(multi["result"]?.array)
            #expect(results.count == 4 && results[0].array?.first?["numActive"] == "0" && results[1]["message"] == "Unauthorized")
            #expect(results[2]["message"] == "methodName is missing or not allowed" && results[3]["message"] == "methodName is missing or not allowed")
            let batch = await t.answer(
                #"[{"jsonrpc":"2.0","id":1,"method":"aria2.getGlobalStat","params":["token:s3cret"]},42,{"jsonrpc":"2.0","id":2,"method":"aria2.nope","params":["token:s3cret"]}]"#
            )
            #expect(batch.array?.count == 2 && batch.array?.last?["id"] == 2)
            #expect(await t.answer("[]") == [])
        }
    }

    @Test func readOnlyRequestsRunNoStateChange() async throws {
        try await RPCFixture.with { t async throws in
            let add = await t.answer(#"{"jsonrpc":"2.0","id":1,"method":"aria2.addUri","params":[["\#(t.server.url("/x"))"]]}"#, readOnly: true)
            #expect(add["error"]?["message"]?.string?.contains("changes the daemon's state") == true)
            let multi = await t.answer(
                #"{"jsonrpc":"2.0","id":1,"method":"system.multicall","params":[[{"methodName":"aria2.getGlobalStat"},{"methodName":"aria2.pauseAll"}]]}"#,
                readOnly: true)
            let results = try #require(multi["result"]?.array)
            #expect(results[0].array?.first?["numActive"] == "0" && results[1]["message"]?.string?.contains("changes the daemon's state") == true)
            #expect(await t.manager.downloads().isEmpty)
            for method in Aria2RPC.methods where !Aria2RPC.readOnlyMethods.contains(method) {
                let answer = await t.answer(#"{"jsonrpc":"2.0","id":1,"method":"\#(method)","params":[]}"#, readOnly: true)
                #expect(answer["error"]?["message"]?.string?.contains("changes the daemon's state") == true, "\(method)")
            }
            #expect(t.shutdownRequested.value == 0)
        }
    }

    @Test func everyMethodOfTheTableIsAnsweredAndNoOtherIs() async throws {
        try await RPCFixture.with { t async throws in
            #expect(Set(Aria2RPC.methods).count == Aria2RPC.methods.count, "each method once")
            for method in Aria2RPC.methods where !["aria2.shutdown", "aria2.forceShutdown"].contains(method) {
                let answer = await t.answer(#"{"jsonrpc":"2.0","id":1,"method":"\#(method)","params":[]}"#)
                #expect(answer["error"]?["message"]?.string?.hasPrefix("No such method") != true, "\(method) is dispatched: \(answer)")
            }
            let unknown = await t.answer(#"{"jsonrpc":"2.0","id":1,"method":"aria2.noSuchThing","params":[]}"#)
            #expect(unknown["error"]?["message"] == "No such method: aria2.noSuchThing")
        }
    }

    @Test func wrongTokensInABatchCostOneDelay() async throws {
        try await RPCFixture.with(secret: "right") { t async throws in
            let call = #"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion","params":["token:wrong"]}"#
            let started = ContinuousClock.now
            let answers = await t.answer("[" + Array(repeating: call, count: 2000).joined(separator: ",") + "]").array ?? []
            #expect(answers.count == 2000 && answers.allSatisfy { $0["error"]?["message"] == "Unauthorized" })
            // One second for the whole request (aria2: one per call, 2000 s). A bound, not a benchmark.
            #expect(ContinuousClock.now - started < .seconds(60))
        }
    }

    // MARK: The queue

    @Test func controlsTheQueue() async throws {
        try await RPCFixture.with(maxConcurrent: 1, connections: 1) { t async throws in
            // Slow enough that each stays active for a while.
            for index in 0..<4 { t.serve("/q\(index).bin", seed: UInt64(index), size: 512 << 10, bytesPerSecond: 256 << 10) }
            var gids: [String] = []
            for index in 0..<4 {
                gids.append(try #require(try await t.call("aria2.addUri", [[.string(t.server.url("/q\(index).bin"))]]).string))
            }
            try await t.waitFor(gids[0]) { $0["status"] == "active" }
            #expect(try await t.gids("aria2.tellWaiting", [0, 10, ["gid"]]) == Array(gids[1...]))
            #expect(try await t.gids("aria2.tellActive", [["gid"]]) == [gids[0]])
            // Negative offsets count from the end, listing backwards.
            #expect(try await t.gids("aria2.tellWaiting", [-1, 2, ["gid"]]) == [gids[3], gids[2]])
            #expect(try await t.gids("aria2.tellWaiting", [1, 1, ["gid"]]) == [gids[2]])
            #expect(try await t.gids("aria2.tellWaiting", [10, 5, ["gid"]]) == [])
            #expect(try await t.call("aria2.changePosition", [.string(gids[3]), 0, "POS_SET"]) == 0)
            #expect(try await t.call("aria2.changePosition", [.string(gids[3]), 1, "POS_CUR"]) == 1)
            #expect(try await t.call("aria2.changePosition", [.string(gids[1]), 0, "POS_END"]) == 2)
            #expect(try await t.call("aria2.changePosition", [.string(gids[1]), -10, "POS_CUR"]) == 0)
            #expect(try await t.call("aria2.changePosition", [.string(gids[1]), 0, "POS_END"]) == 2)
            #expect(try await t.gids("aria2.tellWaiting", [0, 10, ["gid"]]) == [gids[3], gids[2], gids[1]])
            #expect(await t.failure("aria2.changePosition", [.string(gids[0]), 0, "POS_SET"]) == "GID#\(gids[0]) not found in the waiting queue.")
            #expect(await t.failure("aria2.changePosition", [.string(gids[1]), 0, "POS_NOPE"]) == "Illegal argument.")

            // Pause an active one: the next starts; unpause queues it again.
            #expect(try await t.call("aria2.pause", [.string(gids[0])]) == .string(gids[0]))
            #expect(try await t.call("aria2.tellStatus", [.string(gids[0]), ["status"]])["status"] == "paused")
            try await t.waitFor(gids[3]) { $0["status"] == "active" }
            #expect(try await t.call("aria2.getServers", [.string(gids[3])]).array?.first?["servers"]?.array?.first?["uri"] == .string(t.server.url("/q3.bin")))
            #expect(await t.failure("aria2.getServers", [.string(gids[0])]) == "No active download for GID#\(gids[0])")
            #expect(try await t.call("aria2.unpause", [.string(gids[0])]) == .string(gids[0]))
            #expect(try await t.call("aria2.tellStatus", [.string(gids[0]), ["status"]])["status"] == "waiting")
            #expect(await t.failure("aria2.unpause", [.string(gids[0])]) == "GID#\(gids[0]) cannot be unpaused now")

            // Remove the active one: listed as removed, no partial left; a waiting one vanishes.
            #expect(try await t.call("aria2.remove", [.string(gids[3])]) == .string(gids[3]))
            let removed = try await t.call("aria2.tellStatus", [.string(gids[3])])
            #expect(removed["status"] == "removed" && removed["errorCode"] == "31")
            #expect(!t.dir.exists("downloads/q3.bin") && !t.dir.exists("downloads/q3.bin.part"))
            #expect(await t.failure("aria2.remove", [.string(gids[3])]) == "Active Download not found for GID#\(gids[3])")
            #expect(try await t.call("aria2.forceRemove", [.string(gids[1])]) == .string(gids[1]))
            #expect(await t.failure("aria2.tellStatus", [.string(gids[1])]) == "GID \(gids[1]) is not found")

            // pauseAll and unpauseAll.
            #expect(try await t.call("aria2.forcePauseAll") == "OK")
            #expect(try await t.gids("aria2.tellActive") == [])
            #expect(Set(try await t.call("aria2.tellWaiting", [0, 10, ["status"]]).array ?? []) == [["status": "paused"]])
            #expect(try await t.call("aria2.unpauseAll") == "OK")

            // Global options: more at once, no rate limit.
            #expect(try await t.call("aria2.changeGlobalOption", [["max-concurrent-downloads": "5", "max-overall-download-limit": "0"]]) == "OK")
            let global = try await t.call("aria2.getGlobalOption")
            #expect(global["max-concurrent-downloads"] == "5" && global["dir"] == .string(t.downloads) && global["rpc-secret"] == nil)
            for gid in [gids[0], gids[2]] { try await t.waitFor(gid) { $0["status"] == "complete" } }
            #expect(try await t.call("aria2.purgeDownloadResult") == "OK")
            #expect(try await t.call("aria2.tellStopped", [0, 10]) == [])
            #expect(t.dir.contents("downloads/q0.bin") == testBytes(512 << 10, seed: 0))
        }
    }

    @Test func changesOptionsAndTheURLOfADownload() async throws {
        try await RPCFixture.with(connections: 1) { t async throws in
            let content = t.serve("/new.bin", seed: 7)
            var gone = Route(content: content)
            gone.status = 404
            t.server.serve("/old.bin", gone)
            let gid = try #require(try await t.call("aria2.addUri", [[.string(t.server.url("/old.bin"))], ["pause": "true"]]).string)
            #expect(try await t.call("aria2.tellStatus", [.string(gid), ["status"]])["status"] == "paused")
            #expect(
                try await t.call("aria2.changeUri", [.string(gid), 1, [.string(t.server.url("/old.bin"))], [.string(t.server.url("/new.bin"))]]) == [1, 1])
            #expect(try await t.call("aria2.getUris", [.string(gid)]).array?.first?["uri"] == .string(t.server.url("/new.bin")))
            #expect(await t.failure("aria2.changeUri", [.string(gid), 2, [], []]) == "fileIndex is out of range")
            #expect(await t.failure("aria2.changeUri", [.string(gid), 1, [.string(t.server.url("/new.bin"))], []])?.contains("no URI left") == true)
            #expect(try await t.call("aria2.changeOption", [.string(gid), ["max-download-limit": "1M", "out": "x.bin"]]) == "OK")
            #expect(try await t.call("aria2.getOption", [.string(gid)])["max-download-limit"] == .string(String(1 << 20)))
            #expect(await t.failure("aria2.changeOption", [.string(gid), ["split": "17"]]) == "option split must be a number between 1 and 16, not 17")
            #expect(
                await t.failure("aria2.changeGlobalOption", [["max-concurrent-downloads": "0"]])
                    == "option max-concurrent-downloads must be a number between 1 and 1000, not 0")
            #expect(try await t.call("aria2.changeGlobalOption", [["split": "2", "max-tries": "3", "dir": "sub"]]) == "OK")
            let global = try await t.call("aria2.getGlobalOption")
            #expect(global["split"] == "2" && global["max-tries"] == "3" && global["dir"] == .string(t.dir.file("downloads/sub")))
            _ = try await t.call("aria2.unpause", [.string(gid)])
            try await t.waitFor(gid) { $0["status"] == "complete" }
            #expect(t.dir.contents("downloads/x.bin") == content)
            #expect(t.server.stats("/old.bin").getCount == 0)
            #expect(await t.failure("aria2.changeOption", [.string(gid), ["split": "2"]]) == "Cannot change option for GID#\(gid)")
        }
    }

    @Test func shutdownIsRequestedAfterItsAnswer() async throws {
        try await RPCFixture.with { t async throws in
            #expect(try await t.call("aria2.shutdown") == "OK")
            #expect(try await t.call("aria2.forceShutdown") == "OK")
            #expect(t.shutdownRequested.value == 2)
        }
    }

    @Test func networkOptionsUnderAria2sNamesWithPasswordsMasked() async throws {
        try await RPCFixture.with(connections: 1) { t async throws in
            var route = Route(content: testBytes(100_000, seed: 3))
            route.requiredHeaders = [("Authorization", "Basic " + Data("me:pw".utf8).base64EncodedString())]
            t.server.serve("/login.bin", route)
            let options: JSONValue = ["http-user": "me", "http-passwd": "pw", "user-agent": "ua/1", "referer": "*", "max-redirect": "3"]
            let gid = try #require(try await t.call("aria2.addUri", [[.string(t.server.url("/login.bin"))], options]).string)
            try await t.waitFor(gid) { $0["status"] == "complete" }
            #expect(
                t.server.stats("/login.bin").requests.allSatisfy {
                    $0.header("User-Agent") == "ua/1" && $0.header("Referer") == .some(t.server.url("/login.bin"))
                })
            let shown = try await t.call("aria2.getOption", [.string(gid)])
            // Finished, it kept no password; one still to run shows it masked.
            #expect(shown["http-user"] == "me" && shown["http-passwd"] == nil && shown["max-redirect"] == "3")
            var pausedOptions = options.object ?? [:]
            pausedOptions["pause"] = "true"
            pausedOptions["out"] = "later.bin"
            let paused = try #require(try await t.call("aria2.addUri", [[.string(t.server.url("/login.bin"))], .object(pausedOptions)]).string)
            #expect(try await t.call("aria2.getOption", [.string(paused)])["http-passwd"] == "********")
            #expect(shown["check-certificate"] == "true" && shown["user-agent"] == "ua/1" && shown["http2"] == "false")

            // Credentials in a URL never come back out.
            let secretURL = t.server.url("/login.bin").replacingOccurrences(of: "http://", with: "http://me:pw@")
            let second = try #require(try await t.call("aria2.addUri", [[.string(secretURL)], ["out": "second.bin"]]).string)
            let status = try await t.waitFor(second) { $0["status"] == "complete" }
            #expect(!"\(status)".contains("pw@"))
            #expect(status["files"]?.array?.first?["uris"]?.array?.first?["uri"] == .string(t.server.url("/login.bin")))

            // An option Haul does not know is an error that names it, not silently dropped.
            #expect(
                await t.failure("aria2.addUri", [[.string(t.server.url("/login.bin"))], ["bt-max-peers": "5"]])
                    == "option bt-max-peers is not supported by Haul")
            #expect(await t.failure("aria2.changeGlobalOption", [["ftp-passwd": "x"]]) == "option ftp-passwd is not supported by Haul")
            #expect(
                await t.failure("aria2.addUri", [[.string(t.server.url("/login.bin"))], ["ca-certificate": "ca.pem"]])
                    == "option ca-certificate must be an absolute path, not ca.pem")
            #expect(
                await t.failure("aria2.addUri", [[.string(t.server.url("/login.bin"))], ["all-proxy": "gopher://p"]])
                    == "unsupported proxy type gopher://: use http:// or socks5:// (gopher://p)")

            // A global proxy applies to new downloads; its password is not shown.
            let port = try closedPort()
            #expect(
                try await t.call(
                    "aria2.changeGlobalOption",
                    [
                        [
                            "all-proxy": .string("http://u:hidden@127.0.0.1:\(port)"),
                            "check-certificate": "true",
                        ]
                    ]) == "OK")
            let global = try await t.call("aria2.getGlobalOption")
            #expect(global["all-proxy"] == .string("http://127.0.0.1:\(port)") && global["check-certificate"] == "true")
            #expect(!"\(global)".contains("hidden"))
            let proxied = try #require(
                try await t.call("aria2.addUri", [[.string(t.server.url("/login.bin"))], ["out": "third.bin", "max-tries": "1"]]).string)
            let failed = try await t.waitFor(proxied) { $0["status"] == "error" }
            #expect(failed["errorMessage"] == .string("cannot connect to the proxy 127.0.0.1:\(port): Connection refused"))
            // And no-proxy on one download goes around it.
            let direct = try #require(
                try await t.call(
                    "aria2.addUri",
                    [
                        [.string(t.server.url("/login.bin"))],
                        ["out": "fourth.bin", "no-proxy": "127.0.0.1", "http-user": "me", "http-passwd": "pw"],
                    ]
                ).string)
            try await t.waitFor(direct) { $0["status"] == "complete" }
        }
    }
}
