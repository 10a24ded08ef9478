import Foundation
import HaulDaemon
import HaulTestSupport
import Testing
@testable import HaulCLI

/// The built `haul add`, `ls`, `status`, `pause`, `resume`, `remove`, `wait`, `watch` and
/// `shutdown` against a real `haul daemon`, as a script would use them.
@Suite(.serialized) struct ClientCommandTests {
    @Test func addPrintsAGIDThatLsListsAndWaitEndsWithTheSameBytes() async throws {
        try await withDaemon { t in
            let content = testBytes(300_000, seed: 1)
            t.server.serve("/a.bin", Route(content: content))

            let added = try await t.haul(["add", t.server.url("/a.bin")])
            #expect(added.status == 0, "\(added.stderr)")
            let gid = added.stdout.trimmingCharacters(in: .newlines)
            #expect(gid.count == 16 && gid.allSatisfy(\.isHexDigit), "stdout: \(added.stdout)")
            #expect(added.stdout == gid + "\n")

            let table = try await t.haul(["ls"])
            #expect(table.status == 0, "\(table.stderr)")
            let lines = table.stdout.split(separator: "\n")
            #expect(
                lines.first?.split(separator: " ", omittingEmptySubsequences: true)
                    == ["GID", "STATUS", "PROGRESS", "SIZE", "SPEED", "ETA", "NAME"])
            let row = try #require(lines.first { $0.hasPrefix(gid) })
            #expect(row.hasSuffix("a.bin"))
            // Column-aligned: every row's STATUS starts where the header's does.
            #expect(lines.allSatisfy { $0.count > 18 && $0.dropFirst(16).hasPrefix("  ") && $0.dropFirst(18).first != " " })

            let listed = try await t.haul(["ls", "--json"])
            let list = try #require(try JSONValue.parse(Data(listed.stdout.utf8)).array)
            let object = try #require(list.first { $0["gid"]?.string == gid })
            #expect(["active", "waiting", "complete"].contains(object["status"]?.string ?? ""), "\(object)")

            let waited = try await t.haul(["wait", gid])
            #expect(waited.status == 0, "\(waited.stderr)")
            #expect(waited.stdout == "\(gid) complete \(t.downloads)/a.bin\n")
            #expect(digest(FileManager.default.contents(atPath: t.downloads + "/a.bin").map(Array.init)) == digest(content))

            let after = try await t.haul(["ls"])
            #expect(after.stdout.contains("complete"))
            let status = try await t.status(gid)
            #expect(status["status"]?.string == "complete")
            #expect(status["completedLength"]?.string == String(content.count))
        }
    }

    @Test func addPassesItsOptionsAndMakesTheFolderAbsoluteAgainstItsOwnFolder() async throws {
        // Without a secret the daemon writes only inside its download folder, so a folder of
        // the client's is refused, saying why.
        try await withDaemon { t in
            let client = t.dir.file("client")
            try FileManager.default.createDirectory(atPath: client, withIntermediateDirectories: true)
            let refused = try await t.haul(["add", t.server.url("/o.bin"), "-d", "saved"], in: client)
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("outside the download folder") && refused.stderr.contains("--rpc-secret"), "\(refused.stderr)")
        }
        try await withDaemon(["--rpc-secret", "s3cret"]) { t in
            let content = testBytes(1000, seed: 2)
            t.server.serve("/o.bin", Route(content: content))
            // The client runs elsewhere than the daemon, as it usually does.
            let client = t.dir.file("client")
            try FileManager.default.createDirectory(atPath: client, withIntermediateDirectories: true)
            let added = try await t.haul(
                [
                    "add", t.server.url("/o.bin"), "-d", "sub/../saved", "-o", "named.bin", "-x", "2",
                    "--checksum", "sha-256=\(sha256Hex(content))", "-H", "X-One: 1", "-H", "X-Two: 2",
                    "--pause", "--max-download-limit", "200K",
                ], in: client)
            #expect(added.status == 0, "\(added.stderr)")
            let gid = added.stdout.trimmingCharacters(in: .newlines)
            let options = try await t.daemon.call("aria2.getOption", [.string(gid)])
            #expect(options["dir"]?.string == client + "/saved")
            #expect(options["out"]?.string == "named.bin")
            #expect(options["split"]?.string == "2")
            #expect(options["checksum"]?.string?.hasSuffix(sha256Hex(content)) == true, "\(options)")
            #expect(options["header"] == ["X-One: 1", "X-Two: 2"])
            #expect(options["max-download-limit"]?.string == String(200 << 10))
            #expect(try await t.status(gid)["status"]?.string == "paused")

            #expect(try await t.haul(["resume", gid]).status == 0)
            let waited = try await t.haul(["wait", gid])
            #expect(waited.status == 0, "\(waited.stderr)")
            #expect(FileManager.default.contents(atPath: client + "/saved/named.bin").map(Array.init) == content)
            #expect(t.server.stats("/o.bin").getCount >= 1)
        }
    }

    @Test func addPassesTheNetworkAndRetryOptionsOfHaulGet() async throws {
        try await withDaemon(["--rpc-secret", "s3cret"]) { t in
            var route = Route(content: testBytes(5000, seed: 4))
            route.requiredHeaders = [("Authorization", "Basic " + Data("me:pw".utf8).base64EncodedString()), ("Cookie", "k=v")]
            // Still running when its options are read: a finished download keeps no password.
            route.bytesPerSecond = 2500
            t.server.serve("/n.bin", route)
            let client = t.dir.file("client")
            try FileManager.default.createDirectory(atPath: client, withIntermediateDirectories: true)
            try Data("127.0.0.1\tFALSE\t/\tFALSE\t0\tk\tv\n".utf8).write(to: URL(fileURLWithPath: client + "/cookies.txt"))
            let added = try await t.haul(
                [
                    "add", t.server.url("/n.bin"), "-d", "out", "--http-user", "me", "--http-passwd", "pw", "-U", "agent/2",
                    "--load-cookies", "cookies.txt", "--max-tries", "3", "--retry-wait", "2", "--min-split-size", "2M",
                    "--allow-overwrite", "--connect-timeout", "5", "--max-redirects", "4",
                ], in: client)
            #expect(added.status == 0, "\(added.stderr)")
            let gid = added.stdout.trimmingCharacters(in: .newlines)
            let options = try await t.daemon.call("aria2.getOption", [.string(gid)])
            #expect(options["http-user"] == "me" && options["http-passwd"] == "********" && options["user-agent"] == "agent/2")
            #expect(options["load-cookies"]?.string == client + "/cookies.txt")
            #expect(options["max-tries"] == "3" && options["retry-wait"] == "2" && options["min-split-size"] == .string(String(2 << 20)))
            #expect(options["allow-overwrite"] == "true" && options["connect-timeout"] == "5" && options["max-redirect"] == "4")
            let waited = try await t.haul(["wait", gid])
            #expect(waited.status == 0, "\(waited.stderr)")
            #expect(t.server.stats("/n.bin").requests.allSatisfy { $0.header("User-Agent") == "agent/2" })
        }
    }

    @Test func everyCallCarriesTheSecretOfADaemonThatHasOne() async throws {
        try await withDaemon(["--rpc-secret", "s3cret"]) { t in
            #expect(t.daemon.endpoint.secret == "s3cret")
            t.server.serve("/a.bin", Route(content: testBytes(1000)))
            let gid = try await t.add(t.server.url("/a.bin"))
            // ls, wait and remove --all make multicalls: each call inside carries the token too.
            #expect(try await t.haul(["wait", gid]).status == 0)
            let listed = try await t.haul(["ls", "--json"])
            #expect(listed.status == 0, "\(listed.stderr)")
            #expect(try JSONValue.parse(Data(listed.stdout.utf8)).array?.first?["status"] == "complete")
            #expect(try await t.haul(["remove", "--all"]).status == 0)
            #expect(try await t.haul(["ls"]).stdout == "no downloads\n")
        }
    }

    @Test func lsAndRemoveAllPageThroughEveryDownload() async throws {
        try await withDaemon { t in
            // 25 pages (1000 a page) of paused downloads, added 1000 to a multicall.
            let count = 25_000
            var gids = Set<String>()
            for batch in stride(from: 0, to: count, by: 1000) {
                let calls: [JSONValue] = (batch..<batch + 1000).map { index in
                    ["methodName": "aria2.addUri", "params": [[.string(t.server.url("/p\(index).bin"))], ["pause": "true"]]]
                }
                let results = try await t.daemon.call("system.multicall", [.array(calls)]).array ?? []
                for result in results { if let gid = result.array?.first?.string { gids.insert(gid) } }
            }
            #expect(gids.count == count)
            let listed = try await t.haul(["ls", "--json"])
            #expect(listed.status == 0, "\(listed.stderr)")
            let objects = try JSONValue.parse(Data(listed.stdout.utf8)).array ?? []
            #expect(Set(objects.compactMap { $0["gid"]?.string }) == gids)
            #expect(listed.stderr.isEmpty)
            let table = try await t.haul(["ls"])
            #expect(table.stdout.split(separator: "\n").count == count + 1)

            let removed = try await t.haul(["remove", "--all"])
            #expect(removed.status == 0, "\(removed.stderr)")
            #expect(try await t.haul(["ls"]).stdout == "no downloads\n")
        }
    }

    @Test func addReportsARefusedURLAndStillAddsTheOthers() async throws {
        try await withDaemon { t in
            t.server.serve("/good.bin", Route(content: testBytes(100)))
            let added = try await t.haul(["add", "ftp://example.com/x", t.server.url("/good.bin")])
            #expect(added.status == 1)
            #expect(added.stdout.split(separator: "\n").count == 1)
            #expect(added.stderr.hasPrefix("haul: ftp://example.com/x: "))
            #expect(added.stderr.split(separator: "\n").count == 1, "\(added.stderr)")
        }
    }

    @Test func waitOnA404Exits8AndPrintsTheError() async throws {
        try await withDaemon { t in
            var missing = Route(content: [])
            missing.status = 404
            t.server.serve("/gone.bin", missing)
            let gid = try await t.add(t.server.url("/gone.bin"))
            let waited = try await t.haul(["wait", gid])
            #expect(waited.status == 8)
            #expect(waited.stdout.hasPrefix("\(gid) error: "), "\(waited.stdout)")
            #expect(waited.stdout.contains("404"))
        }
    }

    @Test func waitExitsWithTheStatusOfHowTheDownloadsEnded() async throws {
        try await withDaemon { t in
            var missing = Route(content: [])
            missing.status = 404
            t.server.serve("/gone.bin", missing)
            t.server.serve("/good.bin", Route(content: testBytes(2000)))
            let gone = try await t.add(t.server.url("/gone.bin"))
            let corrupt = try await t.add(t.server.url("/good.bin"), ["--checksum", "sha-256=" + String(repeating: "0", count: 64)])
            let good = try await t.add(t.server.url("/good.bin"), ["-o", "good.bin"])

            let checksum = try await t.haul(["wait", corrupt, good])
            #expect(checksum.status == 5, "\(checksum.stdout)\(checksum.stderr)")
            #expect(checksum.stdout.contains("\(good) complete"))
            let mixed = try await t.haul(["wait", gone, corrupt])
            #expect(mixed.status == 1)
            #expect(mixed.stdout.split(separator: "\n").count == 2)
        }
    }

    @Test(arguments: [
        ([WaitOutcome.complete, .complete], 0),
        ([.complete, .failed(errorCode: "3")], 8),
        ([.failed(errorCode: "22"), .failed(errorCode: "24")], 8),
        ([.failed(errorCode: "6"), .failed(errorCode: "2"), .failed(errorCode: "19")], 4),
        ([.failed(errorCode: "32")], 5),
        ([.failed(errorCode: "9"), .failed(errorCode: "17")], 3),
        ([.failed(errorCode: "28")], 2),
        ([.removed], 1),
        ([.unknown, .complete], 1),
        ([.failed(errorCode: "3"), .failed(errorCode: "32")], 1),
        ([.failed(errorCode: "1")], 1),
    ])
    func waitExitStatusFromAria2ErrorCodes(outcomes: [WaitOutcome], status: Int) {
        #expect(WaitOutcome.exitStatus(outcomes) == Int32(status))
    }

    @Test func waitGivesUpAfterItsTimeoutWith124() async throws {
        try await withDaemon { t in
            let gid = try await t.add(t.slowURL("/slow.bin"), ["-x", "1"])
            let started = ContinuousClock.now
            let waited = try await t.haul(["wait", gid, "--timeout", "0.5"])
            #expect(waited.status == 124)
            #expect(waited.stderr.hasPrefix("haul: timed out after 0.5 s"), "\(waited.stderr)")
            #expect(waited.stderr.split(separator: "\n").count == 1)
            #expect(ContinuousClock.now - started < .seconds(10))
        }
    }

    @Test func waitSaysSoInOneLineWhenTheDaemonDiesMidWait() async throws {
        try await withDaemon { t in
            let gid = try await t.add(t.slowURL("/slow.bin"), ["-x", "1"])
            let waiting = try HaulProcess(["wait", gid, "--state-dir", t.daemon.stateDirectory], in: t.dir.path)
            try await Task.sleep(for: .milliseconds(600))
            #expect(waiting.process.isRunning)
            try await t.daemon.kill()
            let (status, stderr) = try await waiting.finish(timeout: .seconds(60))
            #expect(status == 69)
            #expect(stderr.hasPrefix("haul: cannot reach the haul daemon"), "\(stderr)")
            #expect(stderr.split(separator: "\n").count == 1)
        }
    }

    @Test func pauseAndResumeChangeTheStatusOfASlowDownload() async throws {
        try await withDaemon { t in
            let gid = try await t.add(t.slowURL("/slow.bin"), ["-x", "1"])
            #expect(try await t.eventually(gid) { $0 == "active" })

            let paused = try await t.haul(["pause", gid])
            #expect(paused.status == 0, "\(paused.stderr)")
            #expect(try await t.status(gid)["status"]?.string == "paused")
            let again = try await t.haul(["pause", gid])
            #expect(again.status == 1, "a paused download cannot be paused")
            #expect(again.stderr.hasPrefix("haul: ") && again.stderr.split(separator: "\n").count == 1)

            let resumed = try await t.haul(["resume", gid])
            #expect(resumed.status == 0, "\(resumed.stderr)")
            #expect(try await t.eventually(gid) { $0 == "active" })
        }
    }

    @Test func removeOfAnActiveDownloadMakesItRemovedAndDeletesThePartialFile() async throws {
        try await withDaemon { t in
            let gid = try await t.add(t.slowURL("/slow.bin"), ["-x", "1", "-o", "slow.bin"])
            let part = t.downloads + "/slow.bin.part"
            #expect(try await waitUntil { fileSize(part) > 0 })

            let removed = try await t.haul(["remove", gid])
            #expect(removed.status == 0, "\(removed.stderr)")
            #expect(try await t.status(gid)["status"]?.string == "removed")
            #expect(!FileManager.default.fileExists(atPath: part))
            #expect(!FileManager.default.fileExists(atPath: t.downloads + "/slow.bin"))

            // Removing it again forgets it.
            #expect(try await t.haul(["rm", gid]).status == 0)
            #expect(try await t.haul(["ls"]).stdout == "no downloads\n")
        }
    }

    @Test func allVariantsPauseResumeAndRemoveEveryDownload() async throws {
        try await withDaemon { t in
            t.server.serve("/done.bin", Route(content: testBytes(500)))
            let done = try await t.add(t.server.url("/done.bin"))
            #expect(try await t.haul(["wait", done]).status == 0)
            let slow = [try await t.add(t.slowURL("/one.bin"), ["-x", "1"]), try await t.add(t.slowURL("/two.bin"), ["-x", "1"])]

            #expect(try await t.haul(["pause", "--all"]).status == 0)
            for gid in slow { #expect(try await t.status(gid)["status"]?.string == "paused") }
            #expect(try await t.status(done)["status"]?.string == "complete")

            #expect(try await t.haul(["resume", "--all"]).status == 0)
            for gid in slow { #expect(try await t.eventually(gid) { $0 == "active" || $0 == "waiting" }) }

            let removed = try await t.haul(["remove", "--all"])
            #expect(removed.status == 0, "\(removed.stderr)")
            #expect(try await t.haul(["ls"]).stdout == "no downloads\n")
            let left = try FileManager.default.contentsOfDirectory(atPath: t.downloads)
            #expect(left == ["done.bin"], "a finished download's file stays; partial files go")

            let usage = try await t.haul(["pause", "--all", done])
            #expect(usage.status == 64)
        }
    }

    @Test func anUnknownGIDIsOneLineAndNonZero() async throws {
        try await withDaemon { t in
            let unknown = "0123456789abcdef"
            for command in ["status", "pause", "resume", "remove", "wait"] {
                let answer = try await t.haul([command, unknown])
                #expect(answer.status == 1, "\(command)")
                #expect(answer.stderr.hasPrefix("haul: ") && answer.stderr.contains(unknown), "\(command): \(answer.stderr)")
                #expect(answer.stderr.split(separator: "\n").count == 1, "\(command): \(answer.stderr)")
            }
            #expect(try await t.haul(["status", "not-a-gid"]).status == 64)
        }
    }

    @Test func lsWithoutADaemonSaysHowToStartOne() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let state = dir.file("state")
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        let answer = try await HaulProcess.capture(["ls", "--state-dir", state], in: dir.path)
        #expect(answer.status == 69)
        #expect(answer.stdout.isEmpty)
        #expect(answer.stderr == "haul: no haul daemon is running for the state folder \(state); start one with: haul daemon &\n")
    }

    @Test func aDaemonKilledWithNineLeavesAStaleFileThatGivesCannotReach() async throws {
        try await withDaemon { t in
            try await t.daemon.kill()
            #expect(FileManager.default.fileExists(atPath: DaemonEndpoint.path(in: t.daemon.stateDirectory)))
            let answer = try await t.haul(["ls"])
            #expect(answer.status == 69)
            #expect(answer.stderr.hasPrefix("haul: cannot reach the haul daemon at \(t.daemon.endpoint.rpcURL)"), "\(answer.stderr)")
            #expect(answer.stderr.split(separator: "\n").count == 1)
        }
    }

    @Test func watchExitWhenIdleEndsAndNamesTheFile() async throws {
        try await withDaemon { t in
            var route = Route(content: testBytes(600_000, seed: 5))
            route.bytesPerSecond = 300_000
            t.server.serve("/watched.bin", route)
            let gid = try await t.add(t.server.url("/watched.bin"), ["-x", "1"])
            let watched = try await t.haul(["watch", "--exit-when-idle", "--interval", "0.3"], timeout: .seconds(30))
            #expect(watched.status == 0, "\(watched.stderr)")
            #expect(watched.stderr.contains("watched.bin"))
            #expect(watched.stderr.contains("\(gid) complete \(t.downloads)/watched.bin"), "\(watched.stderr)")
            #expect(watched.stderr.contains("total"))
        }
    }

    @Test func watchEndsWithStatus0OnCtrlC() async throws {
        try await withDaemon { t in
            _ = try await t.add(t.slowURL("/slow.bin"), ["-x", "1"])
            let watching = try HaulProcess(["watch", "--interval", "0.2", "--state-dir", t.daemon.stateDirectory], in: t.dir.path)
            try await Task.sleep(for: .milliseconds(700))
            watching.signal(SIGINT)
            let (status, stderr) = try await watching.finish(timeout: .seconds(10))
            #expect(status == 0, "\(stderr)")
            #expect(stderr.contains("slow.bin"))
        }
    }

    @Test func shutdownReturnsOnceTheDaemonHasExited() async throws {
        try await withDaemon { t in
            let gid = try await t.add(t.slowURL("/slow.bin"), ["-x", "1"])
            #expect(try await t.eventually(gid) { $0 == "active" })
            let answer = try await t.haul(["shutdown"])
            #expect(answer.status == 0, "\(answer.stderr)")
            #expect(!t.daemon.process.process.isRunning)
            #expect(!FileManager.default.fileExists(atPath: DaemonEndpoint.path(in: t.daemon.stateDirectory)))
            #expect(try await t.haul(["ls"]).status == 69)
            // Stopped in order, not cancelled: the web server's own shutdown says nothing.
            #expect(!t.daemon.log.contains(" error "), "\(t.daemon.log)")
        }
    }
}

// MARK: Fixture

/// A FaultServer, a `haul daemon` saving into `downloads`, and the test folder.
extension DaemonFixture {
    /// A 16 MB file at 256 KB/s a connection: busy for the whole test.
    func slowURL(_ path: String) -> String {
        var route = Route(content: testBytes(16 << 20, seed: 9))
        route.bytesPerSecond = 256 << 10
        server.serve(path, route)
        return server.url(path)
    }

    /// Runs `haul ARGUMENTS --state-dir STATE` in `directory` (default: the test folder).
    func haul(
        _ arguments: [String], in directory: String? = nil,
        timeout: Duration = .seconds(60)
    ) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await HaulProcess.capture(arguments + ["--state-dir", daemon.stateDirectory], in: directory ?? dir.path, timeout: timeout)
    }

    /// `haul add URL OPTIONS`, returning the GID.
    func add(_ url: String, _ options: [String] = []) async throws -> String {
        let added = try await haul(["add", url] + options)
        guard added.status == 0 else { throw DaemonProcess.Failure(description: "haul add failed: \(added.stderr)") }
        return added.stdout.trimmingCharacters(in: .newlines)
    }

    /// `haul status GID --json`.
    func status(_ gid: String) async throws -> JSONValue {
        let answer = try await haul(["status", gid, "--json"])
        guard answer.status == 0 else { throw DaemonProcess.Failure(description: "haul status failed: \(answer.stderr)") }
        return try JSONValue.parse(Data(answer.stdout.utf8))
    }

    /// Polls `haul status --json` until the status word satisfies `condition`, at most 20 s.
    func eventually(_ gid: String, _ condition: (String) -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            if condition(try await status(gid)["status"]?.string ?? "") { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }
}
