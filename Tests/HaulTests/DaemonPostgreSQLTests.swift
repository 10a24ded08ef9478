import Foundation
import HaulDaemon
import HaulTestSupport
import Testing

/// `haul daemon --store postgresql://…` against a real PostgreSQL server: the queue lives in the
/// database (a daemon killed with -9 is continued by one with another state folder), daemons
/// share a queue and take over a dead one's downloads, a daemon paused past its lease writes
/// nothing more, and the database going away and coming back costs no download.
@Suite(.serialized)
struct DaemonPostgreSQLTests {
    static func serve(_ server: FaultServer, _ path: String, seed: UInt64, size: Int, bytesPerSecond: Int? = nil) -> [UInt8] {
        var route = Route(content: testBytes(size, seed: seed))
        route.bytesPerSecond = bytesPerSecond
        server.serve(path, route)
        return route.content
    }

    static func completed(_ status: JSONValue) -> Int64 { Int64(status["completedLength"]?.string ?? "") ?? 0 }

    /// How the fleet names `daemon`: `HOST/PID`.
    static func name(_ daemon: DaemonProcess) -> String {
        "\(hostName())/\(daemon.process.process.processIdentifier)"
    }

    /// gethostname(2), as the daemons name their machine.
    static func hostName() -> String {
        var name = [CChar](repeating: 0, count: 256)
        gethostname(&name, name.count - 1)
        return String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// One door for the whole fleet: a download added through one daemon is listed, counted,
    /// paused, changed and removed through the other, which carries each call to the daemon that
    /// holds it (or claims it from the pool first); the WebSocket clients of one hear of the
    /// other's downloads.
    @Test func anyDaemonAnswersForTheWholeFleet() async throws {
        try await PostgresServer.with { postgres in
            try await FaultServer.withServer { server in
                let dir = try TestDirectory()
                defer { dir.remove() }
                let slow = Self.serve(server, "/slow.bin", seed: 31, size: 192 << 10, bytesPerSecond: 64 << 10)
                _ = Self.serve(server, "/held.bin", seed: 32, size: 4 << 20, bytesPerSecond: 64 << 10)
                for number in 0..<24 {
                    _ = Self.serve(server, "/q\(number).bin", seed: UInt64(300 + number), size: 16 << 10, bytesPerSecond: 32 << 10)
                }
                let arguments = ["--store", postgres.url(), "--rpc-secret", "s3cret", "-d", dir.file("downloads"), "-j", "1", "-q"]
                try await DaemonProcess.with(state: dir.file("state-a"), in: dir.path, arguments) { first in
                    try await DaemonProcess.with(state: dir.file("state-b"), in: dir.path, arguments) { second in
                        // A WebSocket client of the second, for the first's notifications.
                        let port = second.endpoint.port
                        let heard = Task.detached {
                            try WebSocketProbe.collect(port: port, send: [], timeout: 30) { $0.contains("aria2.onDownloadComplete") }
                        }
                        // Its client is known to the first within a look or two.
                        try await Task.sleep(for: .seconds(1))
                        let gid = try #require(try await first.call("aria2.addUri", [[.string(server.url("/slow.bin"))]]).string)
                        _ = try await first.waitFor(gid) { $0["status"] == "active" }
                        // Through the second: its status (carried to the first), the fleet's
                        // active list and counts.
                        let status = try await second.call("aria2.tellStatus", [.string(gid), ["status", "daemon"]])
                        #expect(status == ["status": "active", "daemon": .string(Self.name(first))])
                        let active = try await second.call("aria2.tellActive", [["gid", "daemon"]])
                        #expect(active.array?.contains(["gid": .string(gid), "daemon": .string(Self.name(first))]) == true, "\(active)")
                        let stat = try await second.call("aria2.getGlobalStat")
                        #expect(stat["numActive"] == "1" && stat["numWaiting"] == "0", "\(stat)")

                        // Paused, changed, listed and removed through the second; the first holds it.
                        let held = try #require(
                            try await first.call("aria2.addUri", [[.string(server.url("/held.bin"))], ["pause": "true"]]).string)
                        let waiting = try await second.call("aria2.tellWaiting", [0, 10, ["gid", "status", "daemon"]])
                        #expect(waiting == [["gid": .string(held), "status": "paused", "daemon": .string(Self.name(first))]])
                        #expect(try await second.call("aria2.changeOption", [.string(held), ["max-download-limit": "10K"]]) == "OK")
                        #expect(try await first.call("aria2.getOption", [.string(held)])["max-download-limit"] == "10240")
                        #expect(try await second.call("aria2.getFiles", [.string(held)]).array?.count == 1)
                        #expect(try await second.call("aria2.unpause", [.string(held)]) == .string(held))
                        _ = try await first.waitFor(held) { $0["status"] == "waiting" || $0["status"] == "active" }
                        #expect(try await second.call("aria2.pause", [.string(held)]) == .string(held))
                        _ = try await first.waitFor(held) { $0["status"] == "paused" }
                        #expect(try await second.call("aria2.remove", [.string(held)]) == .string(held))
                        await #expect(throws: RPCClient.Failure.self) { try await first.call("aria2.tellStatus", [.string(held)]) }
                        // An error is the holder's own.
                        let refusal = await #expect(throws: RPCClient.Failure.self) { try await second.call("aria2.unpause", [.string(gid)]) }
                        #expect(refusal?.description == "GID#\(gid) cannot be unpaused now")

                        // GIDs no daemon knows, in one multicall: the second waits about a second
                        // once for them to appear (a list just added through another daemon may
                        // still be on its way to the store), not a second for each of the six.
                        let unknown: [JSONValue] = (0..<6).map { number in
                            ["methodName": "aria2.tellStatus", "params": second.tokenParams([.string(String(format: "%016llx", 0xdead_0000 + number))])]
                        }
                        let asked = ContinuousClock.now
                        let answers = try await second.call("system.multicall", [.array(unknown)])
                        let waited = ContinuousClock.now - asked
                        #expect(answers.array?.count == 6 && answers.array?.allSatisfy { $0["code"] != nil } == true, "\(answers)")
                        #expect(waited >= .seconds(1) && waited < .seconds(4), "six unknown GIDs took \(waited)")

                        // The first's notification reached the second's client.
                        let messages = try await heard.value
                        #expect(messages.contains { $0.contains("aria2.onDownloadComplete") && $0.contains(gid) }, "\(messages)")
                        let done = try await second.call("aria2.tellStatus", [.string(gid), ["status", "completedLength"]])
                        #expect(done == ["status": "complete", "completedLength": .string(String(slow.count))])

                        // A download waiting in the pool is claimed by the daemon asked to pause it.
                        let calls: [JSONValue] = (0..<24).map { number in
                            ["methodName": "aria2.addUri", "params": first.tokenParams([[.string(server.url("/q\(number).bin"))]])]
                        }
                        let added = try await first.call("system.multicall", [.array(calls)])
                        let queued = (added.array ?? []).compactMap { $0.array?.first?.string }
                        var pooled: String?
                        let deadline = ContinuousClock.now + .seconds(10)
                        while pooled == nil, ContinuousClock.now < deadline {
                            // The last queued: the last a member would claim.
                            for gid in queued.reversed() {
                                let status = try await second.call("aria2.tellStatus", [.string(gid), ["status", "daemon"]])
                                if status == ["status": "waiting"] {
                                    pooled = gid
                                    break
                                }
                            }
                            try await Task.sleep(for: .milliseconds(50))
                        }
                        let offered = try #require(pooled, "a download in the pool")
                        #expect(try await second.call("aria2.pause", [.string(offered)]) == .string(offered))
                        let claimed = try await first.call("aria2.tellStatus", [.string(offered), ["status", "daemon"]])
                        #expect(claimed == ["status": "paused", "daemon": .string(Self.name(second))])

                        // pauseAll through one daemon pauses the whole queue, the pool's too;
                        // unpauseAll through the other resumes it, and the fleet finishes it.
                        #expect(try await second.call("aria2.pauseAll") == "OK")
                        var totals: JSONValue = [:]
                        let paused = ContinuousClock.now + .seconds(10)
                        while ContinuousClock.now < paused {
                            totals = try await first.call("aria2.getGlobalStat")
                            if totals["numActive"] == "0" { break }
                            try await Task.sleep(for: .milliseconds(50))
                        }
                        let unfinished = try await first.call("aria2.tellWaiting", [0, 100, ["status"]])
                        #expect(totals["numActive"] == "0" && unfinished.array?.count == Int(totals["numWaiting"]?.string ?? ""), "\(totals)")
                        #expect(unfinished.array?.allSatisfy { $0 == ["status": "paused"] } == true, "\(unfinished)")
                        #expect(try await first.call("aria2.unpauseAll") == "OK")
                        let finished = ContinuousClock.now + .seconds(40)
                        while ContinuousClock.now < finished {
                            totals = try await second.call("aria2.getGlobalStat")
                            if totals["numStopped"] == "25" { break }
                            try await Task.sleep(for: .milliseconds(100))
                        }
                        #expect(totals["numStopped"] == "25" && totals["numWaiting"] == "0", "\(totals)")
                        // haul ls through either lists the whole fleet's, with the daemon of each.
                        let listed = try await HaulProcess.capture(["ls", "--state-dir", second.stateDirectory], in: dir.path)
                        let lines = listed.stdout.split(separator: "\n")
                        #expect(listed.status == 0 && lines.first?.contains("DAEMON") == true, "\(listed)")
                        #expect(lines.count == 26 && lines.contains { $0.contains(gid) && $0.contains(Self.name(first)) }, "\(listed.stdout)")
                        #expect(lines.contains { $0.contains(Self.name(second)) }, "\(listed.stdout)")
                        #expect(try await second.stop() == 0, "\(second.log)")
                    }
                    #expect(try await first.stop() == 0, "\(first.log)")
                }
                #expect(dir.contents("downloads/slow.bin") == slow)
            }
        }
    }

    @Test func aKilledDaemonsQueueIsContinuedByADaemonWithAnotherStateFolder() async throws {
        try await PostgresServer.with { postgres in
            try await FaultServer.withServer { server in
                let dir = try TestDirectory()
                defer { dir.remove() }
                let big = Self.serve(server, "/big.bin", seed: 91, size: 8 << 20, bytesPerSecond: 2 << 20)
                let small = Self.serve(server, "/small.bin", seed: 92, size: 64 << 10)
                let arguments = ["--store", postgres.url(), "--rpc-secret", "s3cret", "-d", dir.file("downloads"), "-q", "-x", "1"]
                let (bigGID, smallGID) = try await DaemonProcess.with(state: dir.file("state-a"), in: dir.path, arguments) { daemon in
                    let smallGID = try #require(try await daemon.call("aria2.addUri", [[.string(server.url("/small.bin"))]]).string)
                    let bigGID = try #require(try await daemon.call("aria2.addUri", [[.string(server.url("/big.bin"))]]).string)
                    _ = try await daemon.waitFor(smallGID) { $0["status"] == "complete" }
                    _ = try await daemon.waitFor(bigGID) { Self.completed($0) >= 2 << 20 }
                    try await daemon.kill()
                    return (bigGID, smallGID)
                }
                let sentAtKill = await settled({ server.stats("/big.bin").bodyBytesSent }, bytes: { Int64($0) })
                #expect(sentAtKill < big.count, "killed halfway")
                #expect(dir.exists("downloads/big.bin.part") && !dir.exists("downloads/big.bin"))

                // Nothing of the queue is in the state folder: a daemon with a new one finds it all.
                try await DaemonProcess.with(state: dir.file("state-b"), in: dir.path, arguments) { daemon in
                    let done = try await daemon.waitFor(bigGID, timeout: .seconds(60)) { $0["status"] == "complete" }
                    #expect(Self.completed(done) == Int64(big.count))
                    #expect(try await daemon.call("aria2.tellStatus", [.string(smallGID), ["status"]]) == ["status": "complete"])
                    #expect(try await daemon.call("aria2.getGlobalStat")["numStopped"] == "2")
                    #expect(try await daemon.stop() == 0)
                }
                #expect(!FileManager.default.fileExists(atPath: dir.file("state-b/state.sqlite")))
                #expect(dir.contents("downloads/big.bin") == big)
                #expect(dir.contents("downloads/small.bin") == small)
                // The second daemon fetched what was missing, plus what the kill caught in flight.
                let sent = server.stats("/big.bin").bodyBytesSent
                #expect(sent <= big.count + (1 << 20), "sent \(sent) for \(big.count)")
            }
        }
    }

    /// Two daemons on one queue, one `-d`: each runs what was added through it; one killed with
    /// -9 has its downloads taken over by the other, which continues them from their ranges.
    @Test func twoDaemonsShareAQueueAndTheSurvivorTakesOverTheKilledOnesDownloads() async throws {
        try await PostgresServer.with { postgres in
            try await FaultServer.withServer { server in
                let dir = try TestDirectory()
                defer { dir.remove() }
                let big = Self.serve(server, "/big.bin", seed: 95, size: 8 << 20, bytesPerSecond: 2 << 20)
                let small = Self.serve(server, "/small.bin", seed: 96, size: 64 << 10)
                let arguments = ["--store", postgres.url(), "--rpc-secret", "s3cret", "-d", dir.file("downloads"), "-x", "1"]
                try await DaemonProcess.with(state: dir.file("state-b"), in: dir.path, arguments) { second in
                    let bigGID = try await DaemonProcess.with(state: dir.file("state-a"), in: dir.path, arguments + ["-q"]) { first in
                        let bigGID = try #require(try await first.call("aria2.addUri", [[.string(server.url("/big.bin"))]]).string)
                        let smallGID = try #require(try await second.call("aria2.addUri", [[.string(server.url("/small.bin"))]]).string)
                        _ = try await second.waitFor(smallGID) { $0["status"] == "complete" }
                        _ = try await first.waitFor(bigGID) { Self.completed($0) >= 2 << 20 }
                        // Each runs its own; either counts the fleet's.
                        #expect(try await first.call("aria2.tellStatus", [.string(bigGID), ["daemon"]]) == ["daemon": .string(Self.name(first))])
                        #expect(
                            try await second.call("aria2.tellStatus", [.string(smallGID), ["daemon"]]) == ["daemon": .string(Self.name(second))])
                        #expect(try await second.call("aria2.getGlobalStat")["numActive"] == "1")
                        try await first.kill()
                        return bigGID
                    }
                    // Its pid is gone: taken over at the next look, within a second or so.
                    let said = try await second.logLines(containing: "took over 1 download(s)", timeout: .seconds(20))
                    #expect(said.count == 1, "\(second.log)")
                    let done = try await second.waitFor(bigGID, timeout: .seconds(60)) { $0["status"] == "complete" }
                    #expect(Self.completed(done) == Int64(big.count))
                    #expect(try await second.stop() == 0)
                }
                #expect(dir.contents("downloads/big.bin") == big)
                #expect(dir.contents("downloads/small.bin") == small)
                let sent = server.stats("/big.bin").bodyBytesSent
                #expect(sent <= big.count + (1 << 20), "continued, not started over: sent \(sent) for \(big.count)")
            }
        }
    }

    /// A list added through one daemon is run by both: the first offers what it will not start
    /// soon, the second claims it; every file arrives once, byte-identical, and a GID added
    /// through one answers `tellStatus` through the other.
    @Test func aListAddedThroughOneDaemonIsRunByTheFleet() async throws {
        try await PostgresServer.with { postgres in
            try await FaultServer.withServer { server in
                let dir = try TestDirectory()
                defer { dir.remove() }
                var contents: [String: [UInt8]] = [:]
                for number in 0..<120 {
                    contents["f\(number).bin"] = Self.serve(server, "/f\(number).bin", seed: UInt64(200 + number), size: 2048, bytesPerSecond: 8 << 10)
                }
                let arguments = ["--store", postgres.url(), "--rpc-secret", "s3cret", "-d", dir.file("downloads"), "-j", "2", "-q"]
                try await DaemonProcess.with(state: dir.file("state-b"), in: dir.path, arguments) { second in
                    try await DaemonProcess.with(state: dir.file("state-a"), in: dir.path, arguments) { first in
                        // The second joined first: the first sees it from its own start.
                        let calls: [JSONValue] = contents.keys.sorted().map { name in
                            ["methodName": "aria2.addUri", "params": first.tokenParams([[.string(server.url("/\(name)"))]])]
                        }
                        let added = try await first.call("system.multicall", [.array(calls)])
                        let gids = (added.array ?? []).compactMap { $0.array?.first?.string }
                        #expect(gids.count == contents.count)
                        // getGlobalStat counts the whole fleet, through either daemon.
                        var stopped = (first: 0, second: 0)
                        let deadline = ContinuousClock.now + .seconds(90)
                        while ContinuousClock.now < deadline {
                            stopped.first = Int(try await first.call("aria2.getGlobalStat")["numStopped"]?.string ?? "") ?? 0
                            stopped.second = Int(try await second.call("aria2.getGlobalStat")["numStopped"]?.string ?? "") ?? 0
                            if stopped.first >= contents.count, stopped.second >= contents.count { break }
                            try await Task.sleep(for: .milliseconds(100))
                        }
                        #expect(stopped.first == contents.count && stopped.second == contents.count, "\(stopped)")
                        // tellStopped lists the whole fleet's, each with the daemon that ran it. A
                        // member publishes its counts with each transaction, and a download that
                        // ended as one began is counted before its row is written by the next: a
                        // few moments for the last rows.
                        var list: JSONValue = []
                        for _ in 0..<50 {
                            list = try await second.call("aria2.tellStopped", [0, 1000, ["gid", "daemon"]])
                            if (list.array ?? []).count >= gids.count { break }
                            try await Task.sleep(for: .milliseconds(100))
                        }
                        #expect(Set((list.array ?? []).compactMap { $0["gid"]?.string }) == Set(gids))
                        let runners = Dictionary(grouping: list.array ?? [], by: { $0["daemon"]?.string ?? "" }).mapValues(\.count)
                        #expect(
                            Set(runners.keys) == [Self.name(first), Self.name(second)] && !runners.values.contains(0),
                            "both ran some: \(runners)")
                        // What each did, on /metrics.
                        let secret = [("Authorization", "Bearer s3cret")]
                        let offering = Exposition(try await MetricsTests().scrape(first, headers: secret).text)
                        let claiming = Exposition(try await MetricsTests().scrape(second, headers: secret).text)
                        #expect(offering.problems.isEmpty && claiming.problems.isEmpty, "\(offering.problems) \(claiming.problems)")
                        #expect((offering.samples["haul_fleet_offers_total"] ?? 0) > 0)
                        #expect((claiming.samples["haul_fleet_claims_total"] ?? 0) >= Double(runners[Self.name(second)] ?? 0))
                        #expect(claiming.samples["haul_fleet_takeovers_total"] == 0)
                        #expect((claiming.samples["haul_fleet_lease_renewals_total"] ?? 0) > 0)
                        // Any GID, through either daemon.
                        for gid in gids.prefix(40) {
                            for daemon in [first, second] {
                                let status = try await daemon.call("aria2.tellStatus", [.string(gid), ["status", "completedLength"]])
                                #expect(status == ["status": "complete", "completedLength": "2048"], "\(gid): \(status)")
                            }
                        }
                        #expect(try await first.stop() == 0, "\(first.log)")
                    }
                    #expect(try await second.stop() == 0, "\(second.log)")
                }
                for (name, content) in contents {
                    #expect(dir.contents("downloads/\(name)") == content, "\(name)")
                    #expect(server.stats("/\(name)").getCount == 1, "\(name) fetched once")
                }
            }
        }
    }

    /// `--max-connections-per-host` counts across the fleet: two daemons sharing a list from one
    /// host never open more than the limit to it together, and both run some.
    @Test func theConnectionsPerHostAreCountedAcrossTheFleet() async throws {
        try await PostgresServer.with { postgres in
            try await FaultServer.withServer { server in
                let dir = try TestDirectory()
                defer { dir.remove() }
                var contents: [String: [UInt8]] = [:]
                for number in 0..<24 {
                    contents["h\(number).bin"] = Self.serve(
                        server, "/h\(number).bin", seed: UInt64(500 + number), size: 12 << 10, bytesPerSecond: 48 << 10)
                }
                let arguments = [
                    "--store", postgres.url(), "--rpc-secret", "s3cret", "-d", dir.file("downloads"), "-j", "2", "-x", "1",
                    "--max-connections-per-host", "2", "-q",
                ]
                try await DaemonProcess.with(state: dir.file("state-b"), in: dir.path, arguments) { second in
                    try await DaemonProcess.with(state: dir.file("state-a"), in: dir.path, arguments) { first in
                        let calls: [JSONValue] = contents.keys.sorted().map { name in
                            ["methodName": "aria2.addUri", "params": first.tokenParams([[.string(server.url("/\(name)"))]])]
                        }
                        _ = try await first.call("system.multicall", [.array(calls)])
                        var stopped = 0
                        let deadline = ContinuousClock.now + .seconds(60)
                        while ContinuousClock.now < deadline {
                            stopped = Int(try await second.call("aria2.getGlobalStat")["numStopped"]?.string ?? "") ?? 0
                            if stopped >= contents.count { break }
                            try await Task.sleep(for: .milliseconds(100))
                        }
                        #expect(stopped == contents.count)
                        let list = try await second.call("aria2.tellStopped", [0, 100, ["daemon"]])
                        let runners = Set((list.array ?? []).compactMap { $0["daemon"]?.string })
                        #expect(runners == [Self.name(first), Self.name(second)], "both ran some: \(list)")
                        #expect(try await first.stop() == 0, "\(first.log)")
                    }
                    #expect(try await second.stop() == 0, "\(second.log)")
                }
                // Each daemon alone would have opened 2.
                #expect(server.peakConcurrentBodies <= 2, "\(server.peakConcurrentBodies) at once")
                for (name, content) in contents { #expect(dir.contents("downloads/\(name)") == content, "\(name)") }
            }
        }
    }

    /// Calls are carried only between daemons that share the secret: one signed with another is
    /// ignored, said once in the receiver's log, and the caller's error says what to do.
    @Test func callsAreCarriedOnlyBetweenDaemonsWithTheSameSecret() async throws {
        try await PostgresServer.with { postgres in
            try await FaultServer.withServer { server in
                let dir = try TestDirectory()
                defer { dir.remove() }
                _ = Self.serve(server, "/f.bin", seed: 41, size: 64 << 10)
                let arguments = ["--store", postgres.url(), "-d", dir.file("downloads")]
                try await DaemonProcess.with(state: dir.file("state-a"), in: dir.path, arguments + ["--rpc-secret", "one"]) { first in
                    try await DaemonProcess.with(state: dir.file("state-b"), in: dir.path, arguments + ["--rpc-secret", "two", "-q"]) { second in
                        let gid = try #require(
                            try await first.call("aria2.addUri", [[.string(server.url("/f.bin"))], ["pause": "true"]]).string)
                        let refusal = await #expect(throws: RPCClient.Failure.self) { try await second.call("aria2.unpause", [.string(gid)]) }
                        #expect(refusal?.description.contains("give every daemon of the fleet the same --rpc-secret") == true, "\(String(describing: refusal))")
                        let said = try await first.logLines(containing: "was not signed with this daemon's --rpc-secret")
                        #expect(said.count == 1, "\(first.log)")
                        #expect(try await first.call("aria2.tellStatus", [.string(gid), ["status"]]) == ["status": "paused"])
                        #expect(try await second.stop() == 0)
                    }
                    #expect(try await first.stop() == 0)
                }
            }
        }
    }

    /// The daemons' listening connections are cut (an administrator's `pg_terminate_backend`, a
    /// proxy's idle timeout): a call carried while they are being made again, whose `NOTIFY`
    /// reaches no one, is sent again and answered rather than lost.
    @Test func aCallCarriedWhileTheDaemonsListenAgainIsAnswered() async throws {
        try await PostgresServer.with { postgres in
            try await FaultServer.withServer { server in
                let dir = try TestDirectory()
                defer { dir.remove() }
                let content = Self.serve(server, "/f.bin", seed: 42, size: 64 << 10)
                let arguments = ["--store", postgres.url(), "--rpc-secret", "s3cret", "-d", dir.file("downloads"), "-q"]
                try await DaemonProcess.with(state: dir.file("state-a"), in: dir.path, arguments) { first in
                    try await DaemonProcess.with(state: dir.file("state-b"), in: dir.path, arguments) { second in
                        let gid = try #require(
                            try await first.call("aria2.addUri", [[.string(server.url("/f.bin"))], ["pause": "true"]]).string)
                        let listening = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'"
                        #expect(try await waitUntil { (try? postgres.query(listening)) == "2" })
                        let cut = try postgres.query(
                            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%') AS cut")
                        #expect(cut == "2", "\(cut)")
                        #expect(try await second.call("aria2.unpause", [.string(gid)]) == .string(gid))
                        _ = try await first.waitFor(gid) { $0["status"] == "complete" }
                        #expect(try await second.stop() == 0)
                    }
                    #expect(try await first.stop() == 0)
                }
                #expect(dir.contents("downloads/f.bin") == content)
            }
        }
    }

    /// A daemon stopped (SIGSTOP) past its lease has its downloads taken over; woken, it writes
    /// nothing more and stops them at once, saying why; the other finishes them, byte-identical.
    @Test func aDaemonPausedPastItsLeaseIsFencedAndItsDownloadIsFinishedByAnother() async throws {
        try await PostgresServer.with { postgres in
            try await FaultServer.withServer { server in
                let dir = try TestDirectory()
                defer { dir.remove() }
                let content = Self.serve(server, "/f.bin", seed: 97, size: 6 << 20, bytesPerSecond: 512 << 10)
                // A 1 s connect timeout: the shortest lease, 30 s.
                let arguments = ["--store", postgres.url(connectTimeout: 1), "-d", dir.file("downloads"), "-x", "1"]
                try await DaemonProcess.with(state: dir.file("state-b"), in: dir.path, arguments) { second in
                    let gid = try await DaemonProcess.with(state: dir.file("state-a"), in: dir.path, arguments) { first in
                        let gid = try #require(try await first.call("aria2.addUri", [[.string(server.url("/f.bin"))]]).string)
                        _ = try await first.waitFor(gid) { Self.completed($0) >= 1 << 20 }
                        first.process.signal(SIGSTOP)
                        // Its lease runs out; the other takes its download over (and waits for
                        // the part file, which the stopped one still has locked).
                        let said = try await second.logLines(containing: "took over 1 download(s)", timeout: .seconds(60))
                        #expect(said.count == 1, "\(second.log)")
                        #expect(try await second.call("aria2.tellStatus", [.string(gid), ["gid"]]) == ["gid": .string(gid)])
                        first.process.signal(SIGCONT)
                        let fenced = try await first.logLines(
                            containing: "another haul daemon took over this one's downloads of the queue daemon", timeout: .seconds(20))
                        #expect(!fenced.isEmpty, "\(first.log)")
                        // Its transfer stops at once (its speed still limited: it would not end by itself).
                        let stoppedAt = ContinuousClock.now + .seconds(5)
                        var active = "1"
                        while ContinuousClock.now < stoppedAt {
                            active = try await first.call("aria2.getGlobalStat")["numActive"]?.string ?? ""
                            if active == "0" { break }
                            try await Task.sleep(for: .milliseconds(50))
                        }
                        #expect(active == "0", "\(first.log)")
                        server.update("/f.bin") { $0.bytesPerSecond = nil }
                        #expect(try await first.stop() != 0)
                        #expect(first.log.contains("stopped without saving everything"), "\(first.log)")
                        return gid
                    }
                    let done = try await second.waitFor(gid, timeout: .seconds(60)) { $0["status"] == "complete" }
                    #expect(Self.completed(done) == Int64(content.count))
                    #expect(try await second.stop() == 0)
                }
                #expect(dir.contents("downloads/f.bin") == content)
            }
        }
    }

    @Test func aDaemonWhoseDatabaseIsNotThereSaysSoInOneLine() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let port = try await PostgresServer.with { $0.port }
        let url = "postgresql://haul@127.0.0.1:\(port)/haul?sslmode=disable&connect_timeout=1"
        let daemon = try HaulProcess(["daemon", "--rpc-listen-port", "0", "--state-dir", dir.file("state"), "--store", url], in: dir.path)
        let (status, stderr) = try await daemon.finish(timeout: .seconds(30))
        #expect(status != 0)
        #expect(stderr.split(separator: "\n").count == 1, "\(stderr)")
        #expect(stderr.contains("cannot open the store postgresql://haul@127.0.0.1:\(port)/haul: the connection was refused"), "\(stderr)")

        let bad = try await HaulProcess.capture(["daemon", "--store", "mysql://u@h/db"], in: dir.path)
        #expect(bad.status == 64, "\(bad.stderr)")
        #expect(bad.stderr.contains("only postgresql:// is known"), "\(bad.stderr)")
    }

    /// PostgreSQL shut down for a moment mid-download and started again: the daemon asks again
    /// until it answers, and the download finishes as if nothing happened.
    @Test func theDatabaseGoneForAMomentCostsNoDownload() async throws {
        try await PostgresServer.with { postgres in
            try await FaultServer.withServer { server in
                let dir = try TestDirectory()
                defer { dir.remove() }
                let content = Self.serve(server, "/f.bin", seed: 93, size: 6 << 20, bytesPerSecond: 1 << 20)
                let arguments = ["--store", postgres.url(connectTimeout: 5), "-d", dir.file("downloads"), "-q", "-x", "1"]
                try await DaemonProcess.with(state: dir.file("state"), in: dir.path, arguments) { daemon in
                    let gid = try #require(try await daemon.call("aria2.addUri", [[.string(server.url("/f.bin"))]]).string)
                    _ = try await daemon.waitFor(gid) { Self.completed($0) >= 1 << 20 }
                    await postgres.stop()
                    try await Task.sleep(for: .seconds(2))
                    try await postgres.start()
                    let done = try await daemon.waitFor(gid, timeout: .seconds(60)) { $0["status"] != "active" }
                    #expect(done["status"] == "complete", "\(done)")
                    #expect(try await daemon.stop() == 0)
                    #expect(!daemon.log.contains("cannot"), "\(daemon.log)")
                }
                #expect(dir.contents("downloads/f.bin") == content)
                #expect(server.stats("/f.bin").bodyBytesSent == content.count, "not a byte fetched twice")
            }
        }
    }

    /// PostgreSQL gone for longer than the daemon waits: the download stops with one line
    /// saying why; nothing written is lost, and a daemon started once the database is back
    /// finishes it from where it was.
    @Test func theDatabaseGoneForGoodStopsTheDownloadsSayingWhyAndLosesNothing() async throws {
        try await PostgresServer.with { postgres in
            try await FaultServer.withServer { server in
                let dir = try TestDirectory()
                defer { dir.remove() }
                let content = Self.serve(server, "/f.bin", seed: 94, size: 6 << 20, bytesPerSecond: 1 << 20)
                let arguments = ["--store", postgres.url(connectTimeout: 1), "-d", dir.file("downloads"), "-x", "1"]
                let gid = try await DaemonProcess.with(state: dir.file("state"), in: dir.path, arguments) { daemon in
                    let gid = try #require(try await daemon.call("aria2.addUri", [[.string(server.url("/f.bin"))]]).string)
                    _ = try await daemon.waitFor(gid) { Self.completed($0) >= 1 << 20 }
                    await postgres.stop()
                    let said = try await daemon.logLines(
                        containing: "cannot save the download records in postgresql://haul@127.0.0.1:\(postgres.port)/haul",
                        timeout: .seconds(20))
                    #expect(!said.isEmpty, "\(daemon.log)")
                    #expect(said.allSatisfy { $0.contains("check that the PostgreSQL server of --store is running") }, "\(said)")
                    // Its last word says what it could not save.
                    #expect(try await daemon.stop() != 0)
                    #expect(daemon.log.contains("stopped without saving everything: cannot save"), "\(daemon.log)")
                    #expect(!daemon.log.contains("every download's progress is saved"), "\(daemon.log)")
                    return gid
                }
                #expect(dir.exists("downloads/f.bin.part") && !dir.exists("downloads/f.bin"))
                let sentBefore = server.stats("/f.bin").bodyBytesSent
                try await postgres.start()
                try await DaemonProcess.with(state: dir.file("state"), in: dir.path, arguments + ["-q"]) { daemon in
                    let done = try await daemon.waitFor(gid, timeout: .seconds(60)) { $0["status"] == "complete" }
                    #expect(Self.completed(done) == Int64(content.count))
                    #expect(try await daemon.stop() == 0)
                }
                #expect(dir.contents("downloads/f.bin") == content)
                #expect(server.stats("/f.bin").bodyBytesSent - sentBefore < content.count, "continued, not started over")
            }
        }
    }
}
