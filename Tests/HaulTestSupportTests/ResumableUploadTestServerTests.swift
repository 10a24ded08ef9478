import Foundation
import HaulTestSupport
import Testing

/// ``ResumableUploadTestServer`` driven by curl, one request of the IETF draft at a time (interop
/// version 6): what the upload client is checked against is the draft as NIOResumableUpload
/// serves it.
@Suite(.enabled(if: isInstalled("curl")))
struct ResumableUploadTestServerTests {
    @Test func anUploadIsCreatedAppendedToAndAskedAbout() async throws {
        try await ResumableUploadTestServer.withServer { server in
            let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("resumable-\(UUID().uuidString)")
            try Data("hello, ".utf8).write(to: scratch.appendingPathExtension("1"))
            try Data("world".utf8).write(to: scratch.appendingPathExtension("2"))
            defer {
                for part in ["1", "2"] { try? FileManager.default.removeItem(at: scratch.appendingPathExtension(part)) }
            }
            let version = ["-H", "Upload-Draft-Interop-Version: 6"]

            let created = try curl(
                ["-X", "POST", "-H", "Upload-Complete: ?0", "-H", "Upload-Length: 12", "--data-binary", "", server.url("h.txt")] + version,
                writeOut: "%{http_code} %header{location} %header{upload-offset}")
            let words = created.writeOut.split(separator: " ").map(String.init)
            #expect(words.first == "201", "\(created)")
            let location = words.count > 1 ? words[1] : ""
            #expect(location.hasPrefix("http://127.0.0.1:\(server.port)/resumable_upload/"), "\(created)")

            let first = try curl(
                ["-X", "PATCH", "-H", "Upload-Offset: 0", "-H", "Upload-Complete: ?0", "-H", "Content-Type: application/partial-upload"]
                    + ["--data-binary", "@" + scratch.appendingPathExtension("1").path, location] + version,
                writeOut: "%{http_code} %header{upload-offset}")
            #expect(first.writeOut == "201 7", "\(first)")

            let asked = try curl(["-I", location] + version, writeOut: "%{http_code} %header{upload-offset} %header{upload-complete}")
            #expect(asked.writeOut == "204 7 ?0", "\(asked)")

            let last = try curl(
                ["-X", "PATCH", "-H", "Upload-Offset: 7", "-H", "Upload-Complete: ?1", "-H", "Content-Type: application/partial-upload"]
                    + ["--data-binary", "@" + scratch.appendingPathExtension("2").path, location] + version,
                writeOut: "%{http_code} %header{upload-offset}")
            #expect(last.writeOut == "201 12", "\(last)")

            let stored = try String(contentsOf: server.folder.appendingPathComponent("h.txt"), encoding: .utf8)
            #expect(stored == "hello, world")
            let received = server.received()
            #expect(received.creations == 1)
            #expect(received.completions == 1)
        }
    }

    @Test func optionsNamingTheDraftIsAnsweredWithUploadLimit() async throws {
        try await ResumableUploadTestServer.withServer { server in
            let named = try curl(
                ["-X", "OPTIONS", "-H", "Upload-Draft-Interop-Version: 6", server.url("x")], writeOut: "%{http_code} %header{upload-limit}")
            let plain = try curl(["-X", "OPTIONS", server.url("x")], writeOut: "%{http_code} %header{upload-limit}")
            #expect(named.writeOut.hasPrefix("2"), "\(named)")
            #expect(named.writeOut.contains("min-size=0"), "\(named)")
            #expect(plain.writeOut.hasSuffix(" "), "no Upload-Limit without the draft's version: \(plain)")
        }
    }

    @Test func aServerOfOneVersionRefusesTheOthersNamingItsOwn() async throws {
        try await ResumableUploadTestServer.withServer(interopVersions: [5]) { server in
            let refused = try curl(
                ["-X", "OPTIONS", "-H", "Upload-Draft-Interop-Version: 6", server.url("x")],
                writeOut: "%{http_code} %header{upload-draft-interop-version}")
            let taken = try curl(
                ["-X", "OPTIONS", "-H", "Upload-Draft-Interop-Version: 5", server.url("x")], writeOut: "%{http_code} %header{upload-limit}")
            #expect(refused.writeOut == "400 5", "\(refused)")
            #expect(taken.writeOut.hasPrefix("2") && taken.writeOut.contains("min-size=0"), "\(taken)")
            #expect(server.received().requests.map(\.interopVersion) == ["6", "5"])
        }
    }
}
