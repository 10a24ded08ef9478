import Foundation
import HaulDaemon
import HaulTestSupport
import Testing

/// What of a download's credentials the daemon's store keeps, read in the store's files.
@Suite(.serialized) struct DaemonStoredCredentialsTests {
    /// Every file of the store (the database and its log), as bytes.
    static func storeBytes(_ stateDirectory: String) throws -> [UInt8] {
        let names = try FileManager.default.contentsOfDirectory(atPath: stateDirectory).filter { $0.hasPrefix("state.sqlite") }
        return try names.flatMap { name in
            try [UInt8](Data(contentsOf: URL(fileURLWithPath: (stateDirectory as NSString).appendingPathComponent(name))))
        }
    }

    static func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
        let needle = Array(needle.utf8)
        guard haystack.count >= needle.count else { return false }
        return (0...(haystack.count - needle.count)).contains { start in haystack[start..<(start + needle.count)].elementsEqual(needle) }
    }

    /// aria2's credential options, each with a password unique to `tag`.
    static func credentials(_ tag: String) -> JSONValue {
        [
            "http-user": "user", "http-passwd": .string("http-pw-\(tag)"), "all-proxy-user": "proxy-user",
            "all-proxy-passwd": .string("proxy-pw-\(tag)"), "all-proxy": .string("http://u:url-pw-\(tag)@127.0.0.1:9"),
            "no-proxy": "127.0.0.1",
        ]
    }

    @Test func aRemovedDownloadLeavesNoPasswordInTheStore() async throws {
        try await withDaemon { t async throws in
            let (server, daemon) = (t.server, t.daemon)
            server.serve("/done.bin", Route(content: testBytes(1000, seed: 1)))
            func add(_ path: String, _ tag: String, paused: Bool = false) async throws -> JSONValue {
                var options = Self.credentials(tag).object ?? [:]
                if paused { options["pause"] = "true" }
                return try await daemon.call("aria2.addUri", [[.string(server.url(path))], .object(options)])
            }
            // Completed, then its result removed.
            let done = try await add("/done.bin", "done")
            _ = try await daemon.waitFor(done.string ?? "") { $0["status"] == "complete" }
            try await daemon.call("aria2.removeDownloadResult", [done])
            // Failed, then purged.
            let failed = try await add("/missing.bin", "failed")
            _ = try await daemon.waitFor(failed.string ?? "") { $0["status"] == "error" }
            try await daemon.call("aria2.purgeDownloadResult")
            // Paused, then removed.
            let paused = try await add("/later.bin", "paused", paused: true)
            try await daemon.call("aria2.remove", [paused])
            // Still queued: kept, to resume after a restart.
            _ = try await add("/kept.bin", "kept", paused: true)
            #expect(try await daemon.stop() == 0)

            let bytes = try Self.storeBytes(daemon.stateDirectory)
            for tag in ["done", "failed", "paused"] {
                for password in ["http-pw-\(tag)", "proxy-pw-\(tag)", "url-pw-\(tag)"] {
                    #expect(!Self.contains(bytes, password), "\(password) is still in the store")
                }
            }
            #expect(Self.contains(bytes, "http-pw-kept"), "an unfinished download keeps its credentials")
        }
    }

    @Test func aCompletedDownloadKeepsNoPassword() async throws {
        try await withDaemon { t async throws in
            let (server, daemon) = (t.server, t.daemon)
            server.serve("/done.bin", Route(content: testBytes(1000, seed: 1)))
            var options = Self.credentials("finished").object ?? [:]
            options["header"] = .array(["Authorization: Bearer token-finished", "X-Kept: 1"])
            let done = try await daemon.call("aria2.addUri", [[.string(server.url("/done.bin"))], .object(options)])
            _ = try await daemon.waitFor(done.string ?? "") { $0["status"] == "complete" }
            // Still listed, with what is not secret.
            let kept = try await daemon.call("aria2.getOption", [done])
            #expect(kept["http-user"] == "user" && kept["http-passwd"] == nil, "\(kept)")
            #expect(try await daemon.stop() == 0)
            let bytes = try Self.storeBytes(daemon.stateDirectory)
            for secret in ["http-pw-finished", "proxy-pw-finished", "url-pw-finished", "token-finished"] {
                #expect(!Self.contains(bytes, secret), "\(secret) is still in the store")
            }
            #expect(Self.contains(bytes, "X-Kept"))
        }
    }

    @Test func haulGetAgainWithItsCredentialsChecksTheFinishedFile() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        var route = Route(content: testBytes(3000, seed: 4))
        route.requiredHeaders = [("Authorization", "Basic " + Data("me:pw-get".utf8).base64EncodedString())]
        server.serve("/f.bin", route)
        let arguments = ["get", "-q", "--max-tries", "1", "--http-user", "me", "-d", "out", "--state-dir", dir.file("state"), server.url("/f.bin")]
        for _ in 0..<2 {
            let (status, _, stderr) = try await HaulProcess.capture(arguments, in: dir.path, environment: ["HAUL_HTTP_PASSWD": "pw-get"])
            #expect(status == 0, "\(stderr)")
        }
        try await server.shutdown()
        #expect(dir.contents("out/f.bin") == route.content)
        // The second run asked the server with the credentials given again (the file was complete).
        #expect(server.stats("/f.bin").requests.count >= 2)
        #expect(!Self.contains(try Self.storeBytes(dir.file("state")), "pw-get"))
    }
}
