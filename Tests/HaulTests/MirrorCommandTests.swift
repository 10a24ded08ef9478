import Foundation
import HaulTestSupport
import Testing
@testable import Haul

/// `haul mirror`, the built binary, against nginx's autoindex and hand-written listings.
@Suite(.serialized)
struct MirrorCommandTests {
    static let inCI = ProcessInfo.processInfo.environment["CI"] != nil
    static var hasNginx: Bool { NginxServer.executablePath != nil || inCI }

    /// A tree of small files in nested folders, path → bytes.
    static func tree() -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        for folder in 0..<4 {
            for file in 0..<6 {
                files["d\(folder)/sub \(file % 2)/f\(file).bin"] = testBytes(500 + 300 * file, seed: UInt64(folder * 10 + file))
            }
        }
        files["top.txt"] = Array("top".utf8)
        files["é 日本 100%.txt"] = Array("names".utf8)
        return files
    }

    static func write(_ files: [String: [UInt8]], into dir: TestDirectory, under folder: String) throws {
        for (path, bytes) in files { try dir.write(folder + "/" + path, bytes, creatingFolders: true) }
    }

    /// Every regular file below `root`, path → bytes.
    static func read(_ root: String) -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        guard let walker = FileManager.default.enumerator(atPath: root) else { return files }
        while let path = walker.nextObject() as? String {
            var isFolder: ObjCBool = false
            if FileManager.default.fileExists(atPath: root + "/" + path, isDirectory: &isFolder), !isFolder.boolValue {
                files[path] = FileManager.default.contents(atPath: root + "/" + path).map { Array($0) }
            }
        }
        return files
    }

    static func summary(_ stdout: String) throws -> [String: Int] {
        let object = try JSONSerialization.jsonObject(with: Data(stdout.utf8)) as? [String: Int]
        return try #require(object, "not a summary: \(stdout)")
    }

    @Test func firstCopyThenAnUnchangedResyncSendsNoBody() async throws {
        guard Self.hasNginx else { return }
        let dir = try TestDirectory()
        defer { dir.remove() }
        let files = Self.tree()
        try Self.write(files, into: dir, under: "www")
        try await NginxServer.withServer(root: dir.file("www"), options: .init()) { nginx in
            let arguments = ["mirror", "--json", "--state-dir", dir.file("state"), nginx.url("/autoindex/"), dir.file("copy")]
            let first = try await HaulProcess.capture(arguments, in: dir.path)
            #expect(first.status == 0, "\(first.stderr)")
            #expect(try Self.summary(first.stdout)["new"] == files.count)
            #expect(Self.read(dir.file("copy")) == files)

            let before = nginx.accessLog().count
            let second = try await HaulProcess.capture(arguments, in: dir.path)
            #expect(second.status == 0, "\(second.stderr)")
            let counts = try Self.summary(second.stdout)
            #expect(counts["unchanged"] == files.count && counts["new"] == 0 && counts["updated"] == 0)
            let resync = nginx.accessLog().dropFirst(before).filter { !$0.path.hasSuffix("/") }
            #expect(resync.count == files.count)
            // One conditional HEAD a file, answered 304.
            #expect(
                resync.allSatisfy { $0.method == "HEAD" && $0.status == 304 && $0.bodyBytesSent == 0 },
                "\(resync.filter { $0.method != "HEAD" || $0.status != 304 })")
            // On kept-alive connections, not one a file: the files' requests take turns on the
            // connections of the download slots (-j 16 by default) and of the listings read at
            // once (8), which the files reuse once their listings are read.
            let connections = Set(nginx.accessLog().dropFirst(before).map(\.connection)).count
            #expect(connections <= 16 + 8, "\(connections) connections")
            #expect(Self.read(dir.file("copy")) == files)
        }
    }

    @Test func aResyncOfManyFilesKeepsItsConnections() async throws {
        guard Self.hasNginx else { return }
        let dir = try TestDirectory()
        defer { dir.remove() }
        var files: [String: [UInt8]] = [:]
        for index in 0..<800 { files["d\(index % 4)/f\(index).bin"] = testBytes(200 + index % 300, seed: UInt64(index)) }
        try Self.write(files, into: dir, under: "www")
        try await NginxServer.withServer(root: dir.file("www"), options: .init()) { nginx in
            let arguments = ["mirror", "-q", "--state-dir", dir.file("state"), nginx.url("/autoindex/"), dir.file("copy")]
            let (first, firstErrors) = try await HaulProcess.run(arguments, in: dir.path)
            #expect(first == 0, "\(firstErrors)")
            let before = nginx.accessLog().count
            let (second, secondErrors) = try await HaulProcess.run(arguments, in: dir.path)
            #expect(second == 0, "\(secondErrors)")
            let resync = nginx.accessLog().dropFirst(before)
            let heads = resync.filter { $0.method == "HEAD" && $0.status == 304 }
            #expect(heads.count == files.count)
            // An answer without a body goes back to the pool whole: 800 files take turns on the
            // connections of the download slots (-j 16) and of the listings (8), never more.
            let connections = Set(resync.map(\.connection)).count
            #expect(connections <= 16 + 8, "\(connections) connections for \(resync.count) requests")
            // A listing's files are asked about a few at a time, pipelined: each HEAD after the
            // first of a pipeline reaches nginx before the answer to the one before it.
            let pipelined = heads.count { $0.pipelined }
            #expect(pipelined >= files.count / 2, "\(pipelined) of \(heads.count) HEADs pipelined")
        }
    }

    @Test func aChangedFileIsFetchedAgainAndAGoneOneDeletedButNeverAFileTheMirrorDidNotWrite() async throws {
        guard Self.hasNginx else { return }
        let dir = try TestDirectory()
        defer { dir.remove() }
        var files = Self.tree()
        try Self.write(files, into: dir, under: "www")
        // Someone's own files in the mirror's folder, one where the server has a file too.
        try dir.write("copy/mine.txt", Array("mine".utf8), creatingFolders: true)
        try dir.write("copy/d0/theirs.bin", Array("theirs".utf8), creatingFolders: true)
        try dir.write("www/d0/theirs.bin", Array("server".utf8))
        try await NginxServer.withServer(root: dir.file("www"), options: .init()) { nginx in
            let arguments = ["mirror", "--json", "--delete", "--state-dir", dir.file("state"), nginx.url("/autoindex/"), dir.file("copy")]
            let first = try await HaulProcess.capture(arguments, in: dir.path)
            #expect(first.status == 0, "\(first.stderr)")
            #expect(first.stderr.contains("d0/theirs.bin"))
            #expect(dir.contents("copy/d0/theirs.bin") == Array("theirs".utf8))

            // Same size, new bytes, an older date: only validators can tell.
            let changed = "d1/sub 1/f3.bin"
            files[changed] = testBytes(files[changed]!.count, seed: 99)
            try dir.write("www/" + changed, files[changed]!)
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_000_000)], ofItemAtPath: dir.file("www/" + changed))
            let gone = "d2/sub 0/f0.bin"
            try FileManager.default.removeItem(atPath: dir.file("www/" + gone))
            files[gone] = nil
            try FileManager.default.removeItem(atPath: dir.file("www/d0/theirs.bin"))

            let dry = try await HaulProcess.capture(arguments + ["--dry-run"], in: dir.path)
            #expect(dry.status == 0, "\(dry.stderr)")
            #expect(dir.exists("copy/" + gone))

            let second = try await HaulProcess.capture(arguments, in: dir.path)
            #expect(second.status == 0, "\(second.stderr)")
            let counts = try Self.summary(second.stdout)
            #expect(counts["updated"] == 1 && counts["deleted"] == 1 && counts["unchanged"] == files.count - 1, "\(counts)")
            var expected = files
            expected["mine.txt"] = Array("mine".utf8)
            expected["d0/theirs.bin"] = Array("theirs".utf8)
            #expect(Self.read(dir.file("copy")) == expected)
        }
    }

    @Test func hostileListingsStayInsideTheTree() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        func page(_ links: [String]) -> Route {
            var route = Route(content: Array(links.map { "<a href=\"\($0)\">x</a>" }.joined(separator: "\n").utf8))
            route.contentType = "text/html"
            return route
        }
        let top = [
            "../", "/", "/secret.txt", "http://localhost:\(server.port)/t/other-host.txt", "https://127.0.0.1/t/x.txt",
            "?C=N;O=D", "a.txt", "loop/", "..%2Fsecret.txt",
        ]
        server.serve("/t/", page(top))
        // A link loop on the server: /t/loop/ lists what /t/ lists.
        server.serve("/t/loop/", page(top))
        server.serve("/t/a.txt", Route(content: Array("a".utf8)))
        server.serve("/secret.txt", Route(content: Array("secret".utf8)))
        let result = try await HaulProcess.capture(
            ["mirror", "--json", "--state-dir", dir.file("state"), server.url("/t/"), dir.file("copy")], in: dir.path)
        try await server.shutdown()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(Self.read(dir.file("copy")) == ["a.txt": Array("a".utf8)])
        #expect(server.stats("/secret.txt").requests.isEmpty)
        #expect(server.stats("/t/loop/loop/").requests.isEmpty)
    }

    @Test func aListingOfAHundredThousandFiles() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        var html = ""
        for index in 0..<100_000 { html += "<a href=\"f\(index).bin\">f\(index).bin</a>\n" }
        var route = Route(content: Array(html.utf8))
        route.contentType = "text/html"
        server.serve("/big/", route)
        let result = try await HaulProcess.capture(
            ["mirror", "--dry-run", "--json", "--state-dir", dir.file("state"), server.url("/big/"), dir.file("copy")], in: dir.path)
        try await server.shutdown()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try Self.summary(result.stdout)["new"] == 100_000)
        #expect(!dir.exists("copy/f0.bin"))
    }

    @Test func includeExcludeAndLevelChooseWhatIsCopied() async throws {
        guard Self.hasNginx else { return }
        let dir = try TestDirectory()
        defer { dir.remove() }
        let files = Self.tree()
        try Self.write(files, into: dir, under: "www")
        try await NginxServer.withServer(root: dir.file("www"), options: .init()) { nginx in
            func mirror(_ options: [String], into folder: String) async throws -> [String: [UInt8]] {
                let arguments = ["mirror", "-q", "--state-dir", dir.file("state")] + options + [nginx.url("/autoindex/"), dir.file(folder)]
                let result = try await HaulProcess.capture(arguments, in: dir.path)
                #expect(result.status == 0, "\(result.stderr)")
                return Self.read(dir.file(folder))
            }
            let onlyF1 = try await mirror(["--include", "f1.bin", "--exclude", "d3"], into: "a")
            #expect(onlyF1 == files.filter { $0.key.hasSuffix("/f1.bin") && !$0.key.hasPrefix("d3/") })
            let noBins = try await mirror(["--exclude", "*.bin"], into: "b")
            #expect(noBins == files.filter { !$0.key.hasSuffix(".bin") })
            let oneFolder = try await mirror(["--include", "d0/sub 1/*"], into: "c")
            #expect(oneFolder == files.filter { $0.key.hasPrefix("d0/sub 1/") })
            let top = try await mirror(["--level", "0"], into: "d")
            #expect(top == files.filter { !$0.key.contains("/") })
            let twoLevels = try await mirror(["--level", "1"], into: "e")
            #expect(twoLevels == files.filter { $0.key.split(separator: "/").count <= 2 })
        }
    }

    @Test func badInputIsOneClearLine() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let result = try await HaulProcess.capture(["mirror", "ftp://example.com/", dir.file("copy")], in: dir.path)
        #expect(result.status == 64)
        #expect(result.stderr.contains("http:// or https://"))
        #expect(!dir.exists("copy"))

        try dir.write("file", Array("x".utf8))
        let notAFolder = try await HaulProcess.capture(["mirror", "http://127.0.0.1:9/", dir.file("file")], in: dir.path)
        #expect(notAFolder.status == 2)
        #expect(notAFolder.stderr.split(separator: "\n").count == 1 && notAFolder.stderr.contains("is not a folder"), "\(notAFolder.stderr)")

        // Nothing listens there: one line says which listing could not be read.
        let refused = try await HaulProcess.capture(
            ["mirror", "--max-tries", "1", "--state-dir", dir.file("state"), "http://127.0.0.1:9/pub/", dir.file("copy")], in: dir.path)
        #expect(refused.status == 4)
        #expect(refused.stderr.split(separator: "\n").count == 1 && refused.stderr.contains("http://127.0.0.1:9/pub/"), "\(refused.stderr)")
    }

    /// `--delete` takes a folder gone from the server with its last file, but never a folder
    /// that still holds something this mirror did not write.
    @Test func deleteRemovesTheFoldersItEmpties() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        func listing(_ names: [String]) -> Route {
            var route = Route(content: Array(names.map { "<a href=\"\($0)\">\($0)</a>" }.joined().utf8))
            route.contentType = "text/html"
            return route
        }
        server.serve("/t/", listing(["top.bin", "gone/", "kept/"]))
        server.serve("/t/gone/", listing(["deep/"]))
        server.serve("/t/gone/deep/", listing(["a.bin"]))
        server.serve("/t/kept/", listing(["b.bin"]))
        for path in ["/t/top.bin", "/t/gone/deep/a.bin", "/t/kept/b.bin"] { server.serve(path, Route(content: testBytes(1000))) }
        let arguments = ["mirror", "-q", "--delete", "--state-dir", dir.file("state"), server.url("/t/"), dir.file("copy")]
        let first = try await HaulProcess.run(arguments, in: dir.path)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(dir.exists("copy/gone/deep/a.bin") && dir.exists("copy/kept/b.bin"))

        // Both folders are gone from the server; the user keeps a file of their own in one.
        server.serve("/t/", listing(["top.bin"]))
        try dir.write("copy/kept/mine.txt", Array("mine".utf8))
        let second = try await HaulProcess.run(arguments, in: dir.path)
        try await server.shutdown()
        #expect(second.status == 0, "\(second.stderr)")
        #expect(!dir.exists("copy/gone"), "an emptied folder goes, its emptied parent too")
        #expect(!dir.exists("copy/kept/b.bin") && dir.contents("copy/kept/mine.txt") == Array("mine".utf8))
        #expect(dir.exists("copy/top.bin"))
    }

    @Test func killNineDuringAMirrorThenRerunFetchesOnlyWhatIsMissing() async throws {
        let server = try await FaultServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        let names = (0..<16).map { "f\($0).bin" }
        var contents: [String: [UInt8]] = [:]
        var listing = Route(content: Array(names.map { "<a href=\"\($0)\">\($0)</a>" }.joined().utf8))
        listing.contentType = "text/html"
        server.serve("/k/", listing)
        for (index, name) in names.enumerated() {
            contents[name] = testBytes(256 << 10, seed: UInt64(index))
            var route = Route(content: contents[name]!)
            route.bytesPerSecond = 512 << 10
            server.serve("/k/" + name, route)
        }
        let arguments = ["mirror", "-q", "-j", "4", "--state-dir", dir.file("state"), server.url("/k/"), dir.file("copy")]
        let haul = try HaulProcess(arguments, in: dir.path)
        let complete: () -> [String] = { names.filter { dir.exists("copy/" + $0) } }
        #expect(try await waitUntil { complete().count >= 4 })
        haul.signal(SIGKILL)
        _ = try await haul.finish()
        let done = complete()
        #expect(done.count < names.count)
        let sent = Dictionary(uniqueKeysWithValues: done.map { ($0, server.stats("/k/" + $0).bodyBytesSent) })

        let (status, stderr) = try await HaulProcess.run(arguments, in: dir.path)
        #expect(status == 0, "\(stderr)")
        #expect(Self.read(dir.file("copy")) == contents)
        // A file complete before the kill: asked about, never sent again.
        for name in done { #expect(server.stats("/k/" + name).bodyBytesSent == sent[name], "\(name)") }
        try await server.shutdown()
    }
}
