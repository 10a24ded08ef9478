import Foundation
import HaulTestSupport
import Testing
@testable import Haul
@testable import HaulDaemon

/// The daemon's uploads: `haul.addUpload` and `haul.tellUploads`, aria2's control methods on an
/// upload's GID, `haul put --daemon`, `haul ls`, and an upload that survives `kill -9`.
/// Against Apple's NIOResumableUpload (``ResumableUploadTestServer``), which keeps every byte it
/// reads: its count shows any byte sent twice.
@Suite(.serialized)
struct DaemonUploadTests {
    /// Polls `haul.tellUploads` until `condition` holds for the upload `gid`, at most `timeout`.
    static func waitForUpload(
        _ gid: String, _ call: (String) async throws -> JSONValue, timeout: Duration = .seconds(30), _ condition: (JSONValue) -> Bool
    ) async throws -> JSONValue {
        let deadline = ContinuousClock.now + timeout
        while true {
            let upload = try await call("haul.tellUploads").array?.first { $0["gid"]?.string == gid } ?? .null
            if condition(upload) { return upload }
            guard ContinuousClock.now < deadline else { throw DaemonProcess.Failure(description: "timed out; the upload is \(upload)") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    static func uploadLength(_ upload: JSONValue) -> Int64 { upload["uploadLength"]?.integer ?? 0 }

    @Test func anUploadAddedOverRPCIsSentListedAndControlledByItsGID() async throws {
        let server = try await ResumableUploadTestServer.start()
        try await RPCFixture.with(secret: "s3cret") { fixture in
            let content = testBytes(3 << 20, seed: 71)
            try fixture.dir.write("a.bin", content)
            let gid = try #require(
                try await fixture.call(
                    "haul.addUpload", [.string(fixture.dir.file("a.bin")), .string(server.url("a.bin")), ["pause": "true"]]
                ).string)
            #expect(gid.count == 16)
            let paused = try await Self.waitForUpload(gid, { try await fixture.call($0) }) { $0["status"] == "paused" }
            #expect(paused["file"]?.string == fixture.dir.file("a.bin"))
            #expect(paused["url"]?.string == server.url("a.bin"))
            // The same file to the same URL is the same upload.
            let again = try await fixture.call("haul.addUpload", [.string(fixture.dir.file("a.bin")), .string(server.url("a.bin"))])
            #expect(again.string == gid)

            #expect(try await fixture.call("aria2.unpause", [.string(gid)]).string == gid)
            let done = try await Self.waitForUpload(gid, { try await fixture.call($0) }) { $0["status"] == "complete" }
            #expect(done["protocol"] == "ietf")
            #expect(Self.uploadLength(done) == Int64(content.count) && done["totalLength"]?.integer == Int64(content.count))
            #expect(done["location"]?.string?.contains("/resumable_upload/") == true, "\(done)")
            let status = try await fixture.call("aria2.tellStatus", [.string(gid), ["gid", "status"]])
            #expect(status == ["gid": .string(gid), "status": "complete"])
            // A download's list does not hold it; its own does until its result is removed.
            #expect(try await fixture.call("aria2.tellStopped", [0, 10]) == [])
            #expect(try await fixture.call("aria2.removeDownloadResult", [.string(gid)]) == "OK")
            #expect(try await fixture.call("haul.tellUploads") == [])
            #expect(await fixture.failure("aria2.tellStatus", [.string(gid)]) == "GID \(gid) is not found")
        }
        let received = server.received()
        await server.stop()
        #expect(received.creations == 1)
        #expect(received.bytes == 3 << 20)
    }

    @Test func badUploadRequestsAreOneClearLine() async throws {
        try await RPCFixture.with { fixture in
            try fixture.dir.write("f.bin", [1, 2, 3])
            let message = await fixture.failure("haul.addUpload", [.string(fixture.dir.file("f.bin")), "http://127.0.0.1:1/x"])
            #expect(message?.contains("needs a daemon started with --rpc-secret") == true, "\(message ?? "")")
        }
        // An empty secret is none: anyone's `token:` would pass it.
        try await RPCFixture.with(secret: "") { fixture in
            try fixture.dir.write("f.bin", [1, 2, 3])
            let message = await fixture.failure("haul.addUpload", [.string(fixture.dir.file("f.bin")), "http://127.0.0.1:1/x"])
            #expect(message?.contains("needs a daemon started with --rpc-secret") == true, "\(message ?? "")")
        }
        try await RPCFixture.with(secret: "s3cret") { fixture in
            try fixture.dir.write("f.bin", [1, 2, 3])
            let file = JSONValue.string(fixture.dir.file("f.bin"))
            let url: JSONValue = "http://127.0.0.1:1/x"
            #expect(await fixture.failure("haul.addUpload", ["f.bin", url])?.contains("must be an absolute path") == true)
            #expect(await fixture.failure("haul.addUpload", [.string(fixture.dir.file("nope")), url])?.contains("no file to upload") == true)
            #expect(await fixture.failure("haul.addUpload", [.string(fixture.dir.path), url])?.contains("no file to upload") == true)
            #expect(await fixture.failure("haul.addUpload", [file, "ftp://127.0.0.1/x"])?.contains("http:// and https://") == true)
            #expect(await fixture.failure("haul.addUpload", [file, url, ["dir": "/tmp"]])?.contains("option dir is for downloads") == true)
            #expect(await fixture.failure("haul.addUpload", [file, url, ["protocol": "ftp"]])?.contains("option protocol must be") == true)
            #expect(await fixture.failure("haul.addUpload", [file, url, ["header": "Bad\r\nX: y"]]) != nil)
            #expect(try await fixture.call("haul.tellUploads") == [])
            let methods = try await fixture.call("system.listMethods").array ?? []
            #expect(methods.contains("haul.addUpload") && methods.contains("haul.tellUploads"))
        }
    }

    @Test func anUploadQueuedByPutDaemonIsPausedResumedAndSurvivesKill9() async throws {
        let server = try await ResumableUploadTestServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        let size = 24 << 20
        let content = testBytes(size, seed: 72)
        try dir.write("big.bin", content)
        let arguments = ["--rpc-secret", "s3cret", "-d", dir.file("downloads"), "-q"]
        let state = dir.file("state")
        let gid = try await DaemonProcess.with(state: state, in: dir.path, arguments) { daemon in
            let added = try await HaulProcess.capture(
                ["put", "--daemon", "--state-dir", state, "--limit-rate", "6M", "--protocol", "ietf", "big.bin", server.url("big.bin")],
                in: dir.path)
            #expect(added.status == 0, "\(added.stderr)")
            let gid = added.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(gid.count == 16, "\(added.stdout)")
            _ = try await Self.waitForUpload(gid, { try await daemon.call($0) }) { Self.uploadLength($0) >= 2 << 20 }

            // haul pause and haul resume take its GID; haul ls lists it.
            let pause = try await HaulProcess.capture(["pause", "--state-dir", state, gid], in: dir.path)
            #expect(pause.status == 0, "\(pause.stderr)")
            _ = try await Self.waitForUpload(gid, { try await daemon.call($0) }) { $0["status"] == "paused" }
            let list = try await HaulProcess.capture(["ls", "--state-dir", state], in: dir.path)
            let line = list.stdout.split(separator: "\n").first { $0.hasPrefix(gid) }.map(String.init) ?? ""
            #expect(list.stdout.contains("UPLOAD") && line.contains("paused"), "\(list.stdout)")
            #expect(line.contains(dir.file("big.bin")) && line.contains(server.url("big.bin")), "\(list.stdout)")
            let status = try await HaulProcess.capture(["status", "--state-dir", state, gid], in: dir.path)
            #expect(status.status == 0, "\(status.stderr)")
            #expect(status.stdout.contains("paused") && status.stdout.contains(dir.file("big.bin")), "\(status.stdout)")
            #expect(status.stdout.contains(server.url("big.bin")) && status.stdout.contains("/ 24.0 MiB"), "\(status.stdout)")
            let resume = try await HaulProcess.capture(["resume", "--state-dir", state, gid], in: dir.path)
            #expect(resume.status == 0, "\(resume.stderr)")

            _ = try await Self.waitForUpload(gid, { try await daemon.call($0) }) { Self.uploadLength($0) >= 8 << 20 }
            try await daemon.kill()
            return gid
        }
        let atKill = await settled({ server.received() }, bytes: \.bytes)
        #expect(atKill.bytes < Int64(size), "killed halfway")
        try await DaemonProcess.with(state: state, in: dir.path, arguments) { daemon in
            let done = try await Self.waitForUpload(gid, { try await daemon.call($0) }) { $0["status"] == "complete" }
            #expect(Self.uploadLength(done) == Int64(size))
            #expect(try await daemon.stop() == 0)
        }
        let received = server.received()
        let stored = try? [UInt8](Data(contentsOf: server.folder.appendingPathComponent("big.bin")))
        await server.stop()
        #expect(received.creations == 1, "one upload, continued after the pause and after kill -9")
        #expect(received.bytes == Int64(size), "no byte sent twice: \(received.bytes)")
        #expect(digest(stored) == digest(content))
    }

    /// `haul put --daemon FILE... URL` queues each file (a GID a line); into a WebDAV folder URL,
    /// each is stored under its own name.
    @Test(.enabled(if: NginxServer.executablePath != nil || ProcessInfo.processInfo.environment["CI"] != nil))
    func severalFilesQueuedByPutDaemonEachGetAGIDAndArrive() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let contents = ["a.bin": testBytes(4000, seed: 73), "b c.bin": testBytes(90_000, seed: 74)]
        for (name, bytes) in contents { try dir.write(name, bytes) }
        try FileManager.default.createDirectory(atPath: dir.file("www"), withIntermediateDirectories: true)
        let state = dir.file("state")
        try await NginxServer.withServer(root: dir.file("www"), options: .init(webDAV: true)) { nginx in
            try await DaemonProcess.with(state: state, in: dir.path, ["--rpc-secret", "s3cret", "-d", dir.file("downloads"), "-q"]) {
                daemon in
                let added = try await HaulProcess.capture(["put", "--daemon", "--state-dir", state, "a.bin", "b c.bin", nginx.url("/dav/")], in: dir.path)
                #expect(added.status == 0, "\(added.stderr)")
                let gids = added.stdout.split(separator: "\n").map(String.init)
                #expect(gids.count == 2 && Set(gids).count == 2 && gids.allSatisfy { $0.count == 16 }, "\(added.stdout)")
                for gid in gids { _ = try await Self.waitForUpload(gid, { try await daemon.call($0) }) { $0["status"] == "complete" } }
                #expect(try await daemon.stop() == 0)
            }
        }
        for (name, bytes) in contents { #expect(digest(dir.contents("www/\(name)")) == digest(bytes), "\(name)") }
    }

    @Test func putDaemonWithoutADaemonSaysSoInOneLine() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try dir.write("f.bin", [1])
        let put = try await HaulProcess.capture(
            ["put", "--daemon", "--state-dir", dir.file("state"), "f.bin", "http://127.0.0.1:1/f.bin"], in: dir.path)
        #expect(put.status == 69, "\(put.stderr)")
        #expect(put.stderr.split(separator: "\n").count == 1, "\(put.stderr)")
        let priority = try await HaulProcess.capture(["put", "--priority", "3", "f.bin", "http://127.0.0.1:1/f.bin"], in: dir.path)
        #expect(priority.status == 64 && priority.stderr.contains("--priority is for --daemon"), "\(priority.stderr)")
    }
}
