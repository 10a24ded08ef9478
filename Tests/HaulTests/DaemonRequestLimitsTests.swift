import Foundation
import HaulDaemon
import HaulTestSupport
import Testing

/// What one call may ask of `haul daemon`: file names it can make, answers of a bounded size.
@Suite(.serialized) struct DaemonRequestLimitsTests {
    @Test func anOutThatNamesNoFileIsRefusedWhenAddedOrChanged() async throws {
        try await withDaemon { t async throws in
            let url = JSONValue.string(t.server.url("/f.bin"))
            let gid = try #require(try await t.daemon.call("aria2.addUri", [[url], ["out": "kept.bin", "pause": "true"]]).string)
            let refused: [(String, String)] = [
                (".", "must end in a file name"), ("./", "must end in a file name"), ("sub/.", "must end in a file name"),
                ("sub/", "must end in a file name"), ("..", "must be a file name inside dir"),
                (String(repeating: "n", count: 251), "at most 250"), (String(repeating: "é", count: 128), "at most 250"),
                (String(repeating: "d", count: 256) + "/f.bin", "at most 255"),
            ]
            for (out, message) in refused {
                for (method, params) in [("aria2.addUri", [[url], ["out": .string(out)]]),
                                         ("aria2.changeOption", [.string(gid), ["out": .string(out)]])] as [(String, [JSONValue])] {
                    do {
                        try await t.daemon.call(method, params)
                        Issue.record("\(method) accepted out \(out.prefix(20))…")
                    } catch {
                        #expect("\(error)".hasPrefix("out") && "\(error)".contains(message), "\(method) \(out.prefix(20)): \(error)")
                    }
                }
            }
            let status = try await t.daemon.call("aria2.tellStatus", [.string(gid)])
            #expect(status["dir"] == .string(t.downloads) && status["files"]?.array?.first?["path"] == .string(t.downloads + "/kept.bin"))
            // The longest name that fits with its .part, a name in a folder, and "" (no name: the server's) are taken.
            for out in [String(repeating: "n", count: 250), "sub/inner.bin", ""] {
                _ = try await t.daemon.call("aria2.changeOption", [.string(gid), ["out": .string(out)]])
            }
            _ = try await t.daemon.call("aria2.addUri", [[url], ["out": .string(String(repeating: "m", count: 250)), "pause": "true"]])
        }
    }

}
