import Foundation
import HaulDaemon
import HaulTestSupport
import Testing
@testable import Haul

/// What a user of the built `haul get` met: `-n` reading the wrong `.netrc`, an earlier run's
/// failure printed again, a proxy password only on the command line, misleading messages.
@Suite struct HardeningCommandLineTests {
    @Test func netrcIsReadFromHOME() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        var route = Route(content: testBytes(2000, seed: 3))
        route.requiredHeaders = [("Authorization", "Basic " + Data("home:user".utf8).base64EncodedString())]
        server.serve("/f.bin", route)
        try dir.write("home/.netrc", Array("machine 127.0.0.1 login home password user\n".utf8), creatingFolders: true)
        let (status, _, stderr) = try await HaulProcess.capture(
            ["get", "-q", "-n", "--max-tries", "1", "-o", "f.bin", "--state-dir", dir.file("state"), server.url("/f.bin")],
            in: dir.path, environment: ["HOME": dir.file("home")])
        try await server.shutdown()
        #expect(status == 0, "\(stderr)")
        #expect(dir.contents("f.bin") == route.content)
    }

    /// A stderr or stdout that takes nothing (`/dev/full`, as a file on a disk that filled up
    /// does) is no crash: what haul says is lost with stderr, and a stdout it cannot write is
    /// said on stderr, status 3. (`FileHandle.write` stopped the process with SIGILL: a
    /// mirror's errors written to a log on the disk the mirror had filled.)
    @Test func aFullStderrOrStdoutEndsHaulWithAStatusNotASignal() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        var missing = Route(content: [])
        missing.status = 404
        server.serve("/nope.bin", missing)
        server.serve("/tree/", missing)
        func run(_ arguments: [String], stdout: FileHandle, stderr: FileHandle) async throws -> Process {
            let haul = try HaulProcess(
                arguments + ["--state-dir", dir.file("state")], in: dir.path, standardOutput: stdout, standardError: stderr)
            _ = try await haul.finish()
            return haul.process
        }
        let full = try #require(FileHandle(forWritingAtPath: "/dev/full"))
        let get = try await run(["get", "--max-tries", "1", "-d", "out", server.url("/nope.bin")], stdout: .nullDevice, stderr: full)
        #expect(get.terminationReason == .exit)
        #expect(get.terminationStatus == 8)
        try dir.write("stderr.txt", [])
        let stderr = try #require(FileHandle(forWritingAtPath: dir.file("stderr.txt")))
        let mirror = try await run(["mirror", "--json", server.url("/tree/"), "tree"], stdout: full, stderr: stderr)
        try await server.shutdown()
        #expect(mirror.terminationReason == .exit)
        #expect(mirror.terminationStatus == 3)
        #expect(String(decoding: dir.contents("stderr.txt") ?? [], as: UTF8.self).contains("cannot write to standard output: No space left on device"))
    }

    /// URLs of one list whose files share a name (an image crawl's `image.jpg`s) all end up kept,
    /// each under a name of its own, however many run at once: a download does not choose
    /// `name.N.ext` while another download of the run holds it. (Two chose the same step-around
    /// name, and the second found the first's file in its way at the end: 60 such URLs at -j 16
    /// kept 34 to 49 of their files in seven runs of eight.)
    @Test func aListsFilesThatShareANameAreAllKept() async throws {
        let server = try await FaultServer.start()
        var list = ""
        var contents: [[UInt8]] = []
        for index in 0..<60 {
            contents.append(testBytes(600 + index * 37, seed: UInt64(100 + index)))
            server.serve("/d\(index)/same.bin", Route(content: contents[index]))
            list += server.url("/d\(index)/same.bin") + "\n"
        }
        for round in 0..<3 {
            let dir = try TestDirectory()
            defer { dir.remove() }
            try dir.write("list.txt", Array(list.utf8))
            let (status, _, stderr) = try await HaulProcess.capture(
                ["get", "-q", "-j", "16", "-i", "list.txt", "-d", "out", "--state-dir", dir.file("state")], in: dir.path)
            #expect(status == 0, "round \(round): \(stderr.prefix(600))")
            let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.file("out"))) ?? []
            #expect(names.count == 60, "round \(round): \(names.sorted())")
            let kept = Set(names.compactMap { dir.contents("out/" + $0) })
            #expect(kept == Set(contents), "round \(round): each file once")
        }
        try await server.shutdown()
    }

    /// A download whose first answer comes late, after another URL's file took the name it
    /// found free, steps around that file like any other: it is slow enough to have a named part
    /// file by its end, whose rename would otherwise find the name taken ("appeared while
    /// downloading", status 3; a load-dependent failure of the test above).
    @Test func aFileThatTookTheNameWhileTheFirstAnswerWasComingIsSteppedAround() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        var slow = Route(content: testBytes(3000, seed: 41))
        slow.answerDelay = .milliseconds(400)
        slow.bytesPerSecond = 2000
        let fast = Route(content: testBytes(900, seed: 42))
        server.serve("/a/same.bin", slow)
        server.serve("/b/same.bin", fast)
        try dir.write("list.txt", Array((server.url("/a/same.bin") + "\n" + server.url("/b/same.bin") + "\n").utf8))
        let (status, _, stderr) = try await HaulProcess.capture(
            ["get", "-q", "-j", "2", "-i", "list.txt", "-d", "out", "--state-dir", dir.file("state")], in: dir.path)
        try await server.shutdown()
        #expect(status == 0, "\(stderr)")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.file("out"))) ?? []
        #expect(Set(names.compactMap { dir.contents("out/" + $0) }) == [slow.content, fast.content], "\(names.sorted())")
        #expect(names.count == 2)
    }

    /// URLs whose files share a name and a size (a list of signatures, of checksum files) are
    /// all kept too: a file of the remote's size at the name is reported as the download's
    /// own only when the store does not know it as another URL's. (The second of two such
    /// URLs was reported complete with the first's bytes, one at a time or -j 4, and so was a
    /// URL added in a later run.) A file Haul did not write is still reported complete.
    @Test func aListsFilesOfOneNameAndOneSizeAreAllKept() async throws {
        let server = try await FaultServer.start()
        var contents: [[UInt8]] = []
        for index in 0..<13 {
            contents.append(testBytes(700, seed: UInt64(300 + index)))
            server.serve("/s\(index)/SUMS.sig", Route(content: contents[index]))
        }
        let urls = (0..<13).map { server.url("/s\($0)/SUMS.sig") }
        for jobs in ["1", "4"] {
            let dir = try TestDirectory()
            defer { dir.remove() }
            try dir.write("list.txt", Array(urls[0..<12].joined(separator: "\n").utf8))
            func get(_ arguments: [String]) async throws {
                let (status, _, stderr) = try await HaulProcess.capture(
                    ["get", "-q", "-j", jobs, "-d", "out", "--state-dir", dir.file("state")] + arguments, in: dir.path)
                #expect(status == 0, "-j \(jobs): \(stderr.prefix(600))")
            }
            func kept() -> [[UInt8]] {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.file("out"))) ?? []
                return names.compactMap { dir.contents("out/" + $0) }
            }
            try await get(["-i", "list.txt"])
            #expect(Set(kept()) == Set(contents[0..<12]), "-j \(jobs): each file once")
            #expect(kept().count == 12)
            // A later run with one more such URL keeps its file beside the others.
            try await get([urls[12]])
            #expect(Set(kept()) == Set(contents), "-j \(jobs): the later URL's file too")
            #expect(kept().count == 13)
        }
        // A file of the remote's size that no download wrote is reported complete (rule 4).
        let dir = try TestDirectory()
        defer { dir.remove() }
        try dir.write("out/SUMS.sig", testBytes(700, seed: 1), creatingFolders: true)
        let (status, _, stderr) = try await HaulProcess.capture(
            ["get", "-q", "-d", "out", "--state-dir", dir.file("state"), urls[0]], in: dir.path)
        try await server.shutdown()
        #expect(status == 0, "\(stderr)")
        #expect((try? FileManager.default.contentsOfDirectory(atPath: dir.file("out"))) == ["SUMS.sig"])
        #expect(dir.contents("out/SUMS.sig") == testBytes(700, seed: 1))
    }

    @Test func anEarlierRunsFailureInTheSameFolderIsNotPrintedAgain() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        var missing = Route(content: [])
        missing.status = 404
        server.serve("/nope.bin", missing)
        server.serve("/other.bin", Route(content: testBytes(1000)))
        let first = try await HaulProcess.capture(
            ["get", "--max-tries", "1", "-d", "out", "--state-dir", dir.file("state"), server.url("/nope.bin")], in: dir.path)
        #expect(first.status == 8)
        #expect(first.stderr.contains("nope.bin: 404 Not Found"))
        let second = try await HaulProcess.capture(
            ["get", "-q", "-d", "out", "--state-dir", dir.file("state"), server.url("/other.bin")], in: dir.path)
        #expect(second.status == 0)
        #expect(second.stderr.isEmpty, "\(second.stderr)")
        // Asked for again, it is this run's: tried and said once more.
        let third = try await HaulProcess.capture(
            ["get", "-q", "--max-tries", "1", "-d", "out", "--state-dir", dir.file("state"), server.url("/nope.bin")], in: dir.path)
        #expect(third.status == 8)
        #expect(third.stderr == "haul: \(server.url("/nope.bin")): 404 Not Found\n")
        try await server.shutdown()
    }

    @Test(.enabled(if: ForwardProxy.executablePath != nil || ProcessInfo.processInfo.environment["CI"] != nil))
    func theProxyPasswordCanComeFromTheEnvironment() async throws {
        let credentials = TestCredentials(user: "proxyuser", password: "from.env")
        try await ForwardProxy.withProxy(credentials: credentials) { proxy in
            let server = try await FaultServer.start()
            let dir = try TestDirectory()
            defer { dir.remove() }
            server.serve("/f.bin", Route(content: testBytes(5000)))
            let (status, _, stderr) = try await HaulProcess.capture(
                [
                    "get", "-q", "--max-tries", "1", "--all-proxy", proxy.url, "--proxy-user", credentials.user,
                    "-o", "f.bin", "--state-dir", dir.file("state"), server.url("/f.bin"),
                ],
                in: dir.path, environment: ["HAUL_PROXY_PASSWD": credentials.password])
            try await server.shutdown()
            #expect(status == 0, "\(stderr)")
            #expect(dir.contents("f.bin") == testBytes(5000))
            #expect(proxy.requests().contains { $0.method == "GET" && $0.target == server.url("/f.bin") })
        }
    }

    @Test func theDaemonsErrorCodesComeFromTheReasonNotTheMessage() async throws {
        try await withDaemon { t async throws in
            // A name that cannot resolve: aria2's 19, not the 6 of any network failure.
            let unresolved = try #require(try await t.daemon.call("aria2.addUri", [["http://no-such-host.invalid/x.bin"], ["max-tries": "1"]]).string)
            let failed = try await t.daemon.waitFor(unresolved) { $0["status"] == "error" }
            #expect(failed["errorCode"] == "19", "\(failed)")
            // A 404 whose text speaks of disk space is still a 404 (3), never a full disk (9).
            var missing = Route(content: Array("no disk space".utf8))
            missing.status = 404
            t.server.serve("/gone.bin", missing)
            let gone = try #require(try await t.daemon.call("aria2.addUri", [[.string(t.server.url("/gone.bin"))], ["max-tries": "1"]]).string)
            #expect(try await t.daemon.waitFor(gone) { $0["status"] == "error" }["errorCode"] == "3")
        }
    }

    @Test func aLongNameFromTheServerStillHasRoomForItsPartFile() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        // 253 bytes: a name the file system takes, but not with ".part" after it.
        var route = Route(content: testBytes(2 << 20, seed: 8))
        route.contentDisposition = "attachment; filename=\"\(String(repeating: "n", count: 249)).bin\""
        route.bytesPerSecond = 4 << 20
        server.serve("/long", route)
        let (status, _, stderr) = try await HaulProcess.capture(
            ["get", "-q", "--max-tries", "1", "-d", "out", "--state-dir", dir.file("state"), server.url("/long")], in: dir.path)
        try await server.shutdown()
        #expect(status == 0, "\(stderr)")
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.file("out"))
        #expect(names == [String(repeating: "n", count: 242) + ".bin"], "\(names)")
    }

    @Test func aBodyCutShortSaysSoNotThatTheAnswerIsInvalid() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        var route = Route(content: testBytes(200_000, seed: 9))
        route.cutAfter = 50_000
        route.advertisesRanges = false
        server.serve("/cut.bin", route)
        let (status, _, stderr) = try await HaulProcess.capture(
            ["get", "-q", "--max-tries", "1", "-o", "cut.bin", "--state-dir", dir.file("state"), server.url("/cut.bin")], in: dir.path)
        try await server.shutdown()
        #expect(status == 4, "\(stderr)")
        #expect(stderr == "haul: \(server.url("/cut.bin")): the server closed the connection before the whole body arrived\n")
        #expect(!dir.exists("cut.bin"))
    }
}
