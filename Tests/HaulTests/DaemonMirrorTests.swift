import Foundation
import HaulTestSupport
import Testing
@testable import Haul
@testable import HaulDaemon

/// The daemon's mirrors: `haul.addMirror` and its siblings, `haul mirror --every`, the
/// schedule, a restart, and `haul ls`.
@Suite(.serialized)
struct DaemonMirrorTests {
    /// Polls `haul.tellMirrors` until `condition` holds for the only mirror, at most `timeout`.
    static func waitForMirror(
        _ call: (String) async throws -> JSONValue, timeout: Duration = .seconds(30), _ condition: (JSONValue) -> Bool
    ) async throws -> JSONValue {
        let deadline = ContinuousClock.now + timeout
        while true {
            let mirror = try await call("haul.tellMirrors").array?.first ?? .null
            if condition(mirror) { return mirror }
            guard ContinuousClock.now < deadline else { throw DaemonProcess.Failure(description: "timed out; the mirror is \(mirror)") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    @Test func aMirrorCopiesTheTreeAndRunsAgainOnItsScheduleFetchingOnlyWhatChanged() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        var files = MirrorTests.serveTree(on: server, count: 6, size: 2000)
        try await DaemonProcess.with(state: dir.file("state"), in: dir.path, ["-d", dir.file("downloads"), "--rpc-secret", "s3cret"]) { daemon in
            // The command line hands it to the daemon and prints its id.
            // With a checksum file of a file that does not change, which the daemon reads at each run
            // (a path of its machine: it has a secret).
            try dir.write("SUMS", Array("\(sha256Hex(files["f1.bin"]!))  f1.bin\n".utf8))
            let added = try await HaulProcess.capture(
                [
                    "mirror", "--every", "1s", "--checksum-file", "SUMS", "--state-dir", dir.file("state"), server.url("/tree/"),
                    dir.file("downloads/tree"),
                ], in: dir.path)
            #expect(added.status == 0, "\(added.stderr)")
            let id = added.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(id.count == 16, "\(added.stdout)")
            // Waits on what only grows (the tree on disk, the bytes the server sent), not on one
            // run's report: with a run every second, a later run's report (all unchanged) soon
            // replaces the one that copied, and a poll held up on a busy machine misses it.
            let tree = dir.file("downloads/tree")
            let first = try await Self.waitForMirror({ try await daemon.call($0) }) {
                $0["last"]?["failed"]?.string == "0" && MirrorCommandTests.read(tree) == files
            }
            #expect(first["id"]?.string == id && first["every"]?.string == "1")
            #expect(first["checksumFile"]?.string == dir.file("SUMS"), "the path made absolute: \(first)")

            // The server changes one file; the next scheduled run fetches it, and only it.
            let unchanged = files.keys.filter { $0 != "f0.bin" }.sorted()
            let sent = unchanged.map { server.stats("/tree/" + $0).bodyBytesSent }
            let sentOfChanged = server.stats("/tree/f0.bin").bodyBytesSent
            files["f0.bin"] = testBytes(2000, seed: 99)
            server.serve("/tree/f0.bin", Route(content: files["f0.bin"]!))
            _ = try await Self.waitForMirror({ try await daemon.call($0) }) { _ in
                server.stats("/tree/f0.bin").bodyBytesSent > sentOfChanged && MirrorCommandTests.read(tree) == files
            }
            #expect(unchanged.map { server.stats("/tree/" + $0).bodyBytesSent } == sent, "no other file's body was sent again")

            // haul ls groups the mirror's files in one line.
            let list = try await HaulProcess.capture(["ls", "--state-dir", dir.file("state")], in: dir.path)
            #expect(list.status == 0, "\(list.stderr)")
            let line = list.stdout.split(separator: "\n").first { $0.hasPrefix(id) }.map(String.init) ?? ""
            #expect(line.contains(server.url("/tree/")) && line.contains(dir.file("downloads/tree")), "\(list.stdout)")
            #expect(list.stdout.contains("MIRROR"))

            #expect(try await daemon.call("haul.removeMirror", [.string(id)]) == "OK")
            #expect(try await daemon.call("haul.tellMirrors") == [])
            #expect(try await daemon.stop() == 0)
        }
        try await server.shutdown()
    }

    @Test func aMirrorInterruptedByAStopContinuesAtTheNextStart() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        let files = MirrorTests.serveTree(on: server, count: 10, size: 256 << 10, bytesPerSecond: 512 << 10)
        // The first file (among the first started) stalls in the first run: the run is surely still
        // going when it is looked at and stopped, however slowly a loaded machine polls.
        server.update("/tree/f0.bin") { $0.stallFirstAfter = 64 << 10 }
        let arguments = ["-d", dir.file("downloads"), "-j", "3"]
        let copied = try await DaemonProcess.with(state: dir.file("state"), in: dir.path, arguments) { daemon in
            let id = try await daemon.call("haul.addMirror", [.string(server.url("/tree/")), ["dir": "tree"]])
            #expect(id.string?.count == 16)
            _ = try await Self.waitForMirror({ try await daemon.call($0) }) { $0["status"]?.string == "active" }
            #expect(try await waitUntil { files.keys.contains { dir.exists("downloads/tree/" + $0) } })
            #expect(try await daemon.stop() == 0)
            return files.keys.filter { dir.exists("downloads/tree/" + $0) }
        }
        #expect(copied.count < files.count)
        let sent = Dictionary(uniqueKeysWithValues: copied.map { ($0, server.stats("/tree/" + $0).bodyBytesSent) })
        try await DaemonProcess.with(state: dir.file("state"), in: dir.path, arguments) { daemon in
            let done = try await Self.waitForMirror({ try await daemon.call($0) }) { $0["status"]?.string == "complete" }
            #expect(done["last"]?["failed"]?.string == "0", "\(done)")
            #expect(MirrorCommandTests.read(dir.file("downloads/tree")) == files)
            for name in copied { #expect(server.stats("/tree/" + name).bodyBytesSent == sent[name], "\(name)") }
            #expect(try await daemon.stop() == 0)
        }
        try await server.shutdown()
    }

    @Test func badMirrorRequestsAreOneClearLine() async throws {
        try await RPCFixture.with { fixture in
            let url = JSONValue.string(fixture.server.url("/tree/"))
            #expect(await fixture.failure("haul.addMirror", ["ftp://example.com/pub/"])?.contains("http:// and https://") == true)
            #expect(await fixture.failure("haul.addMirror", [url, ["every": "soon"]])?.contains("option every must be a time") == true)
            #expect(await fixture.failure("haul.addMirror", [url, ["every": "0s"]])?.contains("option every must be a time") == true)
            #expect(await fixture.failure("haul.addMirror", [url, ["dir": "/etc"]])?.contains("outside the download folder") == true)
            #expect(await fixture.failure("haul.addMirror", [url, ["out": "x"]])?.contains("cannot be given with a mirror") == true)
            #expect(await fixture.failure("haul.addMirror", [url, ["level": "-1"]])?.contains("option level must be a number") == true)
            #expect(await fixture.failure("haul.addMirror", [url, ["include": 3]])?.contains("option include must be a glob") == true)
            #expect(await fixture.failure("haul.addMirror", [url, ["checksum-file": "/etc/passwd"]])?.contains("must be an http(s) URL") == true)
            #expect(await fixture.failure("haul.addMirror", [url, ["require-checksum": "true"]]) == "option require-checksum needs checksum-file")
            #expect(await fixture.failure("haul.removeMirror", ["0123456789abcdef"]) == "no mirror 0123456789abcdef")
            #expect(await fixture.failure("haul.runMirror", ["nope"]) == "Invalid mirror id nope")
            #expect(try await fixture.call("haul.tellMirrors") == [])
            let methods = try await fixture.call("system.listMethods").array ?? []
            #expect(["haul.addMirror", "haul.tellMirrors", "haul.removeMirror", "haul.runMirror"].allSatisfy { methods.contains(.string($0)) })
            // Adding changes the daemon's state: the GET form refuses it.
            let get = await fixture.answer(#"{"jsonrpc":"2.0","id":1,"method":"haul.addMirror","params":["http://127.0.0.1/x/"]}"#, readOnly: true)
            #expect(get["error"]?["message"]?.string?.contains("never does") == true)
        }
    }

    @Test func aMirrorsChecksumFileIsReadAtEachRunAndFailsTheFilesThatDoNotMatch() async throws {
        try await RPCFixture.with { fixture in
            let files = MirrorTests.serveTree(on: fixture.server, count: 3, size: 1000)
            // f1.bin's digest is wrong; sub/deep.txt is not listed.
            let sums = ["f0.bin", "f1.bin", "f2.bin"].map { name in
                "\(name == "f1.bin" ? String(repeating: "0", count: 64) : sha256Hex(files[name]!))  \(name)\n"
            }
            fixture.server.serve("/sums/SHA256SUMS", Route(content: Array(sums.joined().utf8)))
            let options: JSONValue = ["dir": "t", "checksum-file": .string(fixture.server.url("/sums/SHA256SUMS"))]
            let id = try await fixture.call("haul.addMirror", [.string(fixture.server.url("/tree/")), options])
            let done = try await Self.waitForMirror({ try await fixture.call($0) }) { $0["status"]?.string == "error" }
            #expect(done["id"] == id)
            #expect(done["checksumFile"]?.string == fixture.server.url("/sums/SHA256SUMS"))
            #expect(done["last"]?["failed"]?.string == "1", "\(done)")
            #expect(done["problems"]?.array?.contains { $0.string?.contains("f1.bin") == true } == true, "\(done)")
            let copied = MirrorCommandTests.read(fixture.downloads + "/t")
            #expect(copied["f0.bin"] == files["f0.bin"] && copied["f2.bin"] == files["f2.bin"])
            #expect(copied["sub/deep.txt"] == files["sub/deep.txt"], "not listed, not required")
            #expect(copied["f1.bin"] == nil, "a file that does not match is never at its final name")

            // A list that cannot be read fails the run, before any file is fetched.
            try await fixture.call("haul.removeMirror", [id])
            let gone: JSONValue = ["dir": "u", "checksum-file": .string(fixture.server.url("/sums/missing"))]
            _ = try await fixture.call("haul.addMirror", [.string(fixture.server.url("/tree/")), gone])
            let failed = try await Self.waitForMirror({ try await fixture.call($0) }) { $0["status"]?.string == "error" }
            #expect(failed["problems"]?.array?.first?.string?.contains("404") == true, "\(failed)")
            #expect(failed["last"] == nil)
            #expect(!FileManager.default.fileExists(atPath: fixture.downloads + "/u/f0.bin"))
        }
    }

    @Test func theSameURLAndFolderAddedAgainIsOneMirrorWithTheNewOptions() async throws {
        try await RPCFixture.with { fixture in
            _ = MirrorTests.serveTree(on: fixture.server, count: 2, size: 100)
            let url = JSONValue.string(fixture.server.url("/tree/"))
            let first = try await fixture.call("haul.addMirror", [url, ["dir": "t"]])
            let second = try await fixture.call("haul.addMirror", [url, ["dir": "t", "every": "2h", "exclude": ["*.tmp"]]])
            #expect(first == second)
            let mirrors = try await fixture.call("haul.tellMirrors").array ?? []
            #expect(mirrors.count == 1)
            #expect(mirrors.first?["every"]?.string == "7200" && mirrors.first?["exclude"] == ["*.tmp"])
            #expect(mirrors.first?["dir"]?.string == fixture.downloads + "/t")
        }
    }
}
