import Foundation
import HaulTestSupport
import Synchronization
import Testing
@testable import Haul

/// The listing readers against the servers that write the listings: nginx (its three
/// `autoindex_format`s), Apache (plain and fancy), lighttpd, Caddy (HTML and JSON) and
/// Python's `http.server`. Each walks the same tree and must find every file, under its own
/// name, at a URL that serves its bytes. Skipped where a server is missing, except in CI.
@Suite(.serialized)
struct ListingServerTests {
    /// Path below the root → content. Spaces, `&`, `%`, `:`, `#`, accents and CJK.
    static let tree: [String: String] = [
        "a&b é.txt": "one",
        "100% sure #1.txt": "two",
        "sub dir/c:d.txt": "three",
        "sub dir/deeper/日本語.txt": "four",
        "b/z": "five",
        // Sanitised as `get` does: the local name loses the blanks around it.
        "spaced/ padded.txt": "",
    ]

    static let inCI = ProcessInfo.processInfo.environment["CI"] != nil

    static func makeTree() throws -> TestDirectory {
        let dir = try TestDirectory()
        for (path, content) in tree { try dir.write("www/" + path, Array(content.utf8), creatingFolders: true) }
        // A file whose name is not UTF-8: `lat` + Latin-1 é + `.txt`.
        let path = Array(dir.file("www/b/").utf8) + [0x6C, 0x61, 0x74, 0xE9, 0x2E, 0x74, 0x78, 0x74, 0]
        let descriptor = path.withUnsafeBytes { open($0.baseAddress!.assumingMemoryBound(to: CChar.self), O_CREAT | O_WRONLY, 0o644) }
        #expect(descriptor >= 0)
        #expect(write(descriptor, "six", 3) == 3)
        close(descriptor)
        return dir
    }

    /// Walks `start` and checks each file: its local path, and that its URL serves its bytes.
    static func walkAndCheck(_ start: String, state: String, expected: [String: String]? = nil) async throws {
        let downloader = try Downloader(.init(stateDirectory: state))
        let found = FoundFiles()
        let walk = TreeWalk(start: start, template: DownloadRequest(url: start, directory: state))
        let report = await walk.run(with: downloader) { files in found.add(files) }
        #expect(report.failures.isEmpty, "\(report.failures.map { "\($0.url): \($0.error)" })")
        let files = found.files
        var wanted = expected ?? tree.filter { !$0.key.hasSuffix(" padded.txt") }
        if expected == nil {
            wanted["spaced/padded.txt"] = ""
            // Its bytes stay in the URL; the local name writes them as %XX (Python's server
            // sends them as the UTF-8 of surrogates, which are not UTF-8 either).
            let latin = files.filter { $0.path.hasPrefix("b/lat%") && $0.path.hasSuffix(".txt") }
            #expect(latin.count == 1, "from \(start): \(files.map(\.path))")
            if let only = latin.first { wanted[only.path] = "six" }
        }
        #expect(Set(files.map(\.path)) == Set(wanted.keys), "from \(start)")
        for file in files {
            let page = try await downloader.page(DownloadRequest(url: file.url, directory: state), maxBytes: 1 << 20)
            #expect(String(decoding: page.body, as: UTF8.self) == wanted[file.path], "\(file.url)")
        }
        try await downloader.shutdown()
    }

    @Test(arguments: ["/autoindex/", "/autoindex-json/", "/autoindex-xml/"])
    func nginx(location: String) async throws {
        guard NginxServer.executablePath != nil || Self.inCI else { return }
        let dir = try Self.makeTree()
        defer { dir.remove() }
        try await NginxServer.withServer(root: dir.file("www")) { nginx in
            try await Self.walkAndCheck(nginx.url(location), state: dir.file("state"))
        }
    }

    @Test(arguments: ListingServer.Kind.allCases)
    func server(kind: ListingServer.Kind) async throws {
        let dir = try Self.makeTree()
        defer { dir.remove() }
        let server: ListingServer
        do { server = try await ListingServer.start(kind, root: dir.file("www")) } catch let error as TestServerError
            where error == .notInstalled && !Self.inCI
        {
            return
        }
        do {
            try await Self.walkAndCheck(server.url("/"), state: dir.file("state"))
            // Below the root, a walk never climbs (Apache's fancy index links the parent).
            try await Self.walkAndCheck(
                server.url("/sub%20dir/"), state: dir.file("state2"),
                expected: ["c:d.txt": "three", "deeper/日本語.txt": "four"])
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }
}

extension ListingServerTests {
    /// A mirror of each server's tree, then a resync: the resync's HEADs go pipelined, and
    /// each server answers them in its own way (Python's closes its connection after each
    /// answer, with the rest unread), yet every file is found unchanged and none is fetched.
    @Test(arguments: ListingServer.Kind.allCases)
    func aResyncFindsEveryFileUnchanged(kind: ListingServer.Kind) async throws {
        let dir = try Self.makeTree()
        defer { dir.remove() }
        for index in 0..<30 { try dir.write("www/many/f\(index).txt", Array("file \(index)".utf8), creatingFolders: true) }
        let server: ListingServer
        do { server = try await ListingServer.start(kind, root: dir.file("www")) } catch let error as TestServerError
            where error == .notInstalled && !Self.inCI
        {
            return
        }
        do {
            let configuration = Mirror.Configuration(url: server.url("/"), directory: dir.file("copy"))
            try await Downloader.withDownloader(.init(stateDirectory: dir.file("state"))) { downloader throws(DownloadError) in
                let first = try await Mirror(configuration, downloader: downloader).run()
                #expect(first.new == Self.tree.count + 1 + 30 && first.failed == 0, "\(kind): \(first)")
                let second = try await Mirror(configuration, downloader: downloader).run()
                #expect(
                    second.unchanged == first.new && second.updated == 0 && second.failed == 0 && second.bytesFetched == 0,
                    "\(kind): \(second)")
            }
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }
}

/// Files a walk hands on, gathered across its calls.
final class FoundFiles: Sendable {
    private let state = Mutex<[TreeWalk.File]>([])
    func add(_ files: [TreeWalk.File]) { state.withLock { $0 += files } }
    var files: [TreeWalk.File] { state.withLock { $0 } }
}
