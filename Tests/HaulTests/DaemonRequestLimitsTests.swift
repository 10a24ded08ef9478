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
                for (method, params) in [
                    ("aria2.addUri", [[url], ["out": .string(out)]]),
                    ("aria2.changeOption", [.string(gid), ["out": .string(out)]]),
                ] as [(String, [JSONValue])] {
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

    @Test func oneRequestListsAtMost100000Downloads() async throws {
        try await withDaemon { t async throws in
            let adds: [JSONValue] = (0..<1000).map { n in
                ["methodName": "aria2.addUri", "params": [[.string(t.server.url("/f\(n).bin"))], ["pause": "true"]]]
            }
            _ = try await t.daemon.call("system.multicall", [.array(adds)])
            #expect(try await t.daemon.call("aria2.getGlobalStat")["numWaiting"] == "1000")
            let page: JSONValue = ["methodName": "aria2.tellWaiting", "params": [0, 1000, ["gid"]]]

            // 100 pages of 1000 are the most; the web page and haul ls read 1000 at a time.
            let within = try #require(try await t.daemon.call("system.multicall", [.array(Array(repeating: page, count: 100))]).array)
            #expect(within.count == 100 && within.allSatisfy { $0.array?.first?.array?.count == 1000 })
            // 20,000 pages in a multicall made an answer of 311 MB.
            let over = try #require(try await t.daemon.call("system.multicall", [.array(Array(repeating: page, count: 20_000))]).array)
            #expect(over.prefix(100).allSatisfy { $0.array?.first?.array?.count == 1000 })
            let message = over[100]["message"]?.string ?? ""
            #expect(message.contains("at most 100000 downloads") && message.contains("ask for fewer"), "\(over[100])")
            #expect(over.dropFirst(100).allSatisfy { $0["message"]?.string == message })

            // A batch is one request too.
            let port = t.daemon.endpoint.port
            let call = #"{"jsonrpc":"2.0","id":1,"method":"aria2.tellWaiting","params":[0,1000,["gid"]]}"#
            let batch = "[" + Array(repeating: call, count: 101).joined(separator: ",") + "]"
            let answer = try RawHTTP.exchange(port: port, "POST", "/jsonrpc", headers: [("Host", "127.0.0.1:\(port)")], body: batch)
            let answers = try #require(try JSONValue.parse(Data(answer.body.utf8)).array)
            #expect(answers.count == 101 && answers[99]["result"]?.array?.count == 1000)
            #expect(answers[100]["error"]?["message"]?.string == message)
        }
    }
}
