import Foundation
import HaulTestSupport
import Testing
@testable import Haul
@testable import HaulDaemon

/// Metalink documents (v4 and v3) read into files and requests, hostile ones refused with one
/// line; Metalink/HTTP's `Link` and `Digest` headers; and `aria2.addMetalink`.
@Suite struct MetalinkTests {
    static let sha1A = String(repeating: "a", count: 40)
    static let sha256B = String(repeating: "b", count: 64)
    static let md5C = String(repeating: "c", count: 32)

    /// A Metalink 4 document of `files` (the inner XML of each `<file>`, keyed by name).
    static func meta4(_ files: [(name: String, body: String)]) -> Data {
        let inner = files.map { "  <file name=\"\($0.name)\">\n\($0.body)\n  </file>" }.joined(separator: "\n")
        return Data(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <metalink xmlns="urn:ietf:params:xml:ns:metalink">
              <published>2024-01-01T00:00:00Z</published>
            \(inner)
            </metalink>
            """.utf8)
    }

    /// The one-line message parsing `document` fails with.
    static func failure(_ document: Data) -> String? {
        do {
            _ = try Metalink(parsing: document)
            return nil
        } catch {
            #expect(error.kind == .invalidRequest)
            #expect(!error.message.contains("\n"), "one line: \(error.message)")
            return error.message
        }
    }

    // MARK: Reading

    @Test func readsAMetalink4Document() throws {
        let document = Self.meta4([
            (
                "sub/a.bin",
                """
                <size>1048576</size>
                <identity>a</identity>
                <hash type="sha-1">\(Self.sha1A)</hash>
                <hash type="sha-256">\(Self.sha256B.uppercased())</hash>
                <hash type="sha3-256">not a digest Haul checks</hash>
                <pieces length="262144" type="sha-1">
                  <hash>\(String(repeating: "1", count: 40))</hash>
                  <hash>\(String(repeating: "2", count: 40))</hash>
                  <hash>\(String(repeating: "3", count: 40))</hash>
                  <hash>\(String(repeating: "4", count: 40))</hash>
                </pieces>
                <url location="us" priority="2">https://us.example/a.bin</url>
                <url location="de" priority="1">http://de.example/a.bin</url>
                <url priority="3">ftp://ftp.example/a.bin</url>
                <url>http://plain.example/a.bin</url>
                <url location="fr" priority="5">https://us.example/a.bin</url>
                <metaurl mediatype="torrent">http://t.example/a.torrent</metaurl>
                """
            ),
            ("b.txt", "<hash type=\"md5\">\(Self.md5C)</hash>\n<url>http://h.example/b.txt</url>"),
        ])
        let metalink = try Metalink(parsing: document)
        #expect(metalink.files.count == 2 && metalink.skipped.isEmpty)
        let a = metalink.files[0]
        #expect(a.name == "sub/a.bin" && a.size == 1 << 20)
        #expect(
            a.sources == [
                .init(uri: "http://de.example/a.bin", priority: 1, location: "de"),
                .init(uri: "https://us.example/a.bin", priority: 2, location: "us"),
                .init(uri: "http://plain.example/a.bin"),
            ], "by priority, no ftp, no metaurl, no URL twice")
        #expect(a.checksum?.description == "sha-256=\(Self.sha256B)", "the strongest hash, lowercased")
        #expect(a.pieces == PieceChecksums(algorithm: .sha1, length: 262_144, hashes: (1...4).map { String(repeating: "\($0)", count: 40) }))
        #expect(metalink.files[1].name == "b.txt" && metalink.files[1].checksum?.description == "md5=\(Self.md5C)")
        #expect(metalink.files[1].size == nil && metalink.files[1].pieces == nil)
    }

    @Test func readsAMetalink3Document() throws {
        let document = Data(
            """
            <?xml version="1.0" encoding="utf-8"?>
            <metalink version="3.0" xmlns="http://www.metalinker.org/" generator="test">
              <files>
                <file name="linux.iso">
                  <size>5</size>
                  <verification>
                    <hash type="md5">\(Self.md5C)</hash>
                    <hash type="sha256">\(Self.sha256B)</hash>
                    <pieces length="2" type="sha1">
                      <hash piece="2">\(String(repeating: "3", count: 40))</hash>
                      <hash piece="0">\(String(repeating: "1", count: 40))</hash>
                      <hash piece="1">\(String(repeating: "2", count: 40))</hash>
                    </pieces>
                  </verification>
                  <resources>
                    <url type="ftp" preference="100">ftp://ftp.example/linux.iso</url>
                    <url type="http" preference="50" location="de">http://de.example/linux.iso</url>
                    <url type="https" preference="100" location="us">https://us.example/linux.iso</url>
                    <url type="bittorrent" preference="100">http://t.example/linux.torrent</url>
                  </resources>
                </file>
                <file name="only-ftp.iso">
                  <resources><url type="ftp">ftp://ftp.example/only-ftp.iso</url></resources>
                </file>
              </files>
            </metalink>
            """.utf8)
        let metalink = try Metalink(parsing: document)
        #expect(metalink.files.count == 1)
        #expect(metalink.skipped == ["only-ftp.iso: no http:// or https:// URL"])
        let file = try #require(metalink.files.first)
        #expect(file.name == "linux.iso" && file.size == 5)
        // Preference 100 (most preferred) is priority 1; 50 is 51.
        #expect(
            file.sources == [
                .init(uri: "https://us.example/linux.iso", priority: 1, location: "us"),
                .init(uri: "http://de.example/linux.iso", priority: 51, location: "de"),
            ])
        #expect(file.checksum?.description == "sha-256=\(Self.sha256B)")
        #expect(file.pieces?.hashes == (1...3).map { String(repeating: "\($0)", count: 40) }, "in piece order")
        #expect(file.pieces?.length == 2 && file.pieces?.algorithm == .sha1)
    }

    @Test func keepsTheBestSourcesUpToTheLimit() throws {
        let urls = (1...80).reversed().map { "<url priority=\"\($0)\">http://h\($0).example/f</url>" }.joined(separator: "\n")
        let file = try #require(try Metalink(parsing: Self.meta4([("f", urls)])).files.first)
        #expect(file.sources.count == DownloadRequest.maxSources)
        #expect(file.sources.map(\.priority) == (1...DownloadRequest.maxSources).map { $0 })
    }

    @Test func aFileBecomesARequestInsideTheFolder() throws {
        let file = try #require(
            try Metalink(
                parsing: Self.meta4([
                    ("sub/f.bin", "<hash type=\"sha-256\">\(Self.sha256B)</hash><url>http://a/f</url><url>http://b/f</url>")
                ])
            ).files.first)
        var template = DownloadRequest(url: "", directory: "/tmp/x")
        template.connections = 6
        let request = file.request(in: "/tmp/x/dl", template: template)
        #expect(request.destination == .file("/tmp/x/dl/sub/f.bin"))
        #expect(request.confinement == "/tmp/x/dl" && request.connections == 6)
        #expect(request.sources.map(\.uri) == ["http://a/f", "http://b/f"])
        #expect(request.checksum == file.checksum)
        try request.validate()
    }

    @Test(arguments: [
        ("sub/./dir//f.bin", "sub/dir/f.bin"),
        (".hidden/..name.", "hidden/name"),
        ("evil\u{202E}txt.exe", "eviltxt.exe"),
    ])
    func namesAreMadeSafeSubpaths(name: String, expected: String) throws {
        let document = Self.meta4([(name, "<url>http://a/f</url>")])
        #expect(try Metalink(parsing: document).files.first?.name == expected)
    }

    // MARK: Hostile documents

    static let hostile: [(String, String, String)] = [
        (
            "billion laughs",
            """
            <?xml version="1.0"?>
            <!DOCTYPE lolz [
              <!ENTITY lol "lol">
              <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
              <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
              <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
              <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
              <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
              <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
              <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
              <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
              <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
            ]>
            <metalink xmlns="urn:ietf:params:xml:ns:metalink"><file name="&lol9;"><url>http://a/&lol9;</url></file></metalink>
            """,
            "document type declaration"
        ),
        (
            "external entity",
            """
            <?xml version="1.0"?><!-- a comment first --><?pi x?>
            <!DOCTYPE m [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
            <metalink xmlns="urn:ietf:params:xml:ns:metalink"><file name="f"><url>http://a/&xxe;</url></file></metalink>
            """,
            "document type declaration"
        ),
        (
            "external DTD",
            """
            <!DOCTYPE metalink SYSTEM "http://127.0.0.1:1/metalink.dtd">
            <metalink xmlns="urn:ietf:params:xml:ns:metalink"><file name="f"><url>http://a/f</url></file></metalink>
            """,
            "document type declaration"
        ),
        (
            "UTF-7, hiding its declaration",
            """
            <?xml version="1.0" encoding="UTF-7"?>+ADw-!DOCTYPE m +AFs-+ADw-!ENTITY x SYSTEM +ACI-file:///etc/passwd+ACI-+AD4-+AF0-+AD4-
            <metalink xmlns="urn:ietf:params:xml:ns:metalink"><file name="f"><url>http://a/+ACY-x;</url></file></metalink>
            """,
            "only UTF-8 is read"
        ),
        ("text before the root", "+ADw-!DOCTYPE <metalink/>", "text before its root element"),
        ("a comment that does not end", "<?xml version='1.0'?><!-- <!DOCTYPE x []> <metalink/>", "does not end"),
        (
            "undeclared entity",
            #"<metalink xmlns="urn:ietf:params:xml:ns:metalink"><file name="f"><url>http://a/&lol;</url></file></metalink>"#,
            "refers to the entity &lol;"
        ),
        (
            "malformed",
            "<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\">\n<file name=\"f\">\n<url>http://a/f</url>\n</metalink>\n",
            "not well-formed XML: line 4"
        ),
        ("cut short", #"<metalink xmlns="urn:ietf:params:xml:ns:metalink"><file name="f"><url>http://a/f</url>"#, "Metalink"),
        ("not metalink", #"<html><body>hello</body></html>"#, "not a Metalink document: its root is <html>"),
        ("no files", #"<metalink xmlns="urn:ietf:params:xml:ns:metalink"></metalink>"#, "lists no files"),
        (
            "no usable URL",
            #"<metalink xmlns="urn:ietf:params:xml:ns:metalink"><file name="f"><url>ftp://a/f</url></file></metalink>"#,
            "no file of the Metalink document has an http:// or https:// URL"
        ),
        ("traversal", meta4Text("../../etc/passwd", "<url>http://a/f</url>"), "leads out of the download folder"),
        ("absolute", meta4Text("/abs", "<url>http://a/f</url>"), "is absolute"),
        ("backslash", meta4Text(#"a\..\b"#, "<url>http://a/f</url>"), "backslash"),
        ("control character", meta4Text("a&#9;b", "<url>http://a/f</url>"), "control characters"),
        ("no name", meta4Text("", "<url>http://a/f</url>"), "has no name"),
        ("only dots", meta4Text("./.", "<url>http://a/f</url>"), "no usable name"),
        ("non-hex hash", meta4Text("f", "<hash type=\"sha-256\">\(String(repeating: "z", count: 64))</hash><url>http://a/f</url>"), "not 64 hex digits"),
        ("short hash", meta4Text("f", "<hash type=\"sha-1\">abc</hash><url>http://a/f</url>"), "not 40 hex digits"),
        (
            "non-hex piece",
            meta4Text("f", "<size>3</size><pieces length=\"4\" type=\"md5\"><hash>xyz</hash></pieces><url>http://a/f</url>"),
            "piece digest"
        ),
        (
            "pieces not covering the size",
            meta4Text("f", "<size>9</size><pieces length=\"4\" type=\"md5\"><hash>\(md5C)</hash></pieces><url>http://a/f</url>"),
            "do not cover its 9 bytes"
        ),
        (
            "bad piece length",
            meta4Text("f", "<pieces length=\"0\" type=\"md5\"><hash>\(md5C)</hash></pieces><url>http://a/f</url>"),
            "piece length"
        ),
        (
            "a piece length near Int64.max",
            meta4Text("f", "<size>10</size><pieces length=\"9223372036854775807\" type=\"md5\"><hash>\(md5C)</hash></pieces><url>http://a/f</url>"),
            "piece length"
        ),
        ("bad size", meta4Text("f", "<size>-1</size><url>http://a/f</url>"), "not a number of bytes"),
        (
            "a name twice",
            #"<metalink xmlns="urn:ietf:params:xml:ns:metalink"><file name="f"><url>http://a/f</url></file><file name="./f"><url>http://b/f</url></file></metalink>"#,
            "twice"
        ),
    ]

    static func meta4Text(_ name: String, _ body: String) -> String {
        #"<metalink xmlns="urn:ietf:params:xml:ns:metalink"><file name="\#(name)">\#(body)</file></metalink>"#
    }

    @Test(arguments: hostile)
    func aHostileDocumentIsRefusedWithOneLine(what: String, document: String, message: String) {
        let started = ContinuousClock.now
        let failure = Self.failure(Data(document.utf8))
        #expect(failure?.contains(message) == true, "\(what): \(failure ?? "parsed")")
        #expect(ContinuousClock.now - started < .seconds(5), "\(what) took long")
    }

    @Test func anOversizedOrNotUTF8DocumentIsRefusedUnread() {
        var document = Data(Self.meta4Text("f", "<url>http://a/f</url>").utf8)
        document.append(Data(repeating: 0x20, count: Metalink.maxDocumentBytes))
        #expect(Self.failure(document)?.contains("at most \(Metalink.maxDocumentBytes)") == true)
        #expect(Self.failure(Data([0xFF, 0xFE, 0x3C, 0x00]))?.contains("not UTF-8") == true)
        // UTF-16 without a byte order mark, which libxml2 would recognise by its first bytes.
        let utf16 = #"<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE m [<!ENTITY x "y">]><metalink/>"#
        #expect(Self.failure(Data(utf16.utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }))?.contains("not UTF-8") == true)
        #expect(Self.failure(Data())?.contains("empty") == true)
    }

    @Test func tooManyPiecesOrFilesAreRefused() {
        let pieces = String(repeating: "<hash/>", count: PieceChecksums.maxPieces + 1)
        let manyPieces = Self.meta4Text("f", "<pieces length=\"1\" type=\"md5\">\(pieces)</pieces><url>http://a/f</url>")
        #expect(Self.failure(Data(manyPieces.utf8))?.contains("more than \(PieceChecksums.maxPieces) piece digests") == true)
        let files = (0...Metalink.maxFiles).map { "<file name=\"\($0)\"/>" }.joined()
        let manyFiles = #"<metalink xmlns="urn:ietf:params:xml:ns:metalink">\#(files)</metalink>"#
        #expect(Self.failure(Data(manyFiles.utf8))?.contains("more than \(Metalink.maxFiles) files") == true)
    }

    // MARK: Metalink/HTTP

    @Test func linkHeadersNameTheMirrorsAndTheDocument() {
        let headers = [
            #"<http://m2.example/f>; rel=duplicate; pri=2; geo=DE, <ftp://m.example/f>; rel=duplicate; pri=1"#,
            #"<http://m1.example/f>; rel="duplicate"; pri=1; geo=us, </mirror/f>; rel=duplicate"#,
            #"<http://example.com/f.meta4>; rel=describedby; type="application/metalink4+xml""#,
            #"<http://example.com/f.torrent>; rel=describedby; type="application/x-bittorrent", <http://x/a,b>; title="a, b"; rel=duplicate"#,
        ]
        #expect(
            Metalink.duplicates(inLinkHeaders: headers, base: "http://origin.example/dl/f")
                == [
                    .init(uri: "http://m1.example/f", priority: 1, location: "us"),
                    .init(uri: "http://m2.example/f", priority: 2, location: "de"),
                    .init(uri: "http://origin.example/mirror/f"),
                    .init(uri: "http://x/a,b"),
                ])
        #expect(Metalink.duplicates(inLinkHeaders: headers).count == 3, "no base: the relative link is left out")
        #expect(Metalink.documentURL(inLinkHeaders: headers) == "http://example.com/f.meta4")
        #expect(Metalink.documentURL(inLinkHeaders: [#"<http://example.com/f.torrent>; rel=describedby; type="application/x-bittorrent""#]) == nil)
        #expect(Metalink.duplicates(inLinkHeaders: ["garbage, <http://a/f>; rel=duplicate", "<http://b/f>; rel=next"]) == [.init(uri: "http://a/f")])
    }

    @Test func digestHeadersGiveTheStrongestChecksum() {
        // sha-256 and md5 of "test".
        let sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
        #expect(
            Metalink.checksum(inDigestHeaders: ["MD5=CY9rzUYh03PK3k6DJie09g==, SHA-256=n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg="])?.description
                == "sha-256=\(sha256)")
        #expect(Metalink.checksum(inDigestHeaders: ["md5=CY9rzUYh03PK3k6DJie09g=="])?.description == "md5=098f6bcd4621d373cade4e832627b4f6")
        #expect(Metalink.checksum(inDigestHeaders: ["SHA-256=not base64!", "UNIXsum=123"]) == nil)
        #expect(Metalink.checksum(inDigestHeaders: ["SHA-256=CY9rzUYh03PK3k6DJie09g=="]) == nil, "16 bytes are no SHA-256")
    }

    // MARK: aria2.addMetalink

    @Test func addMetalinkAddsOneDownloadPerFile() async throws {
        try await RPCFixture.with(secret: "s3cret") { t async throws in
            let a = t.serve("/a1.bin", seed: 3, size: 300 << 10)
            t.serve("/a2.bin", seed: 3, size: 300 << 10)
            let b = t.serve("/b.bin", seed: 4, size: 10 << 10)
            let document = Self.meta4([
                (
                    "nested/a.bin",
                    """
                    <hash type="sha-256">\(sha256Hex(a))</hash>
                    <url priority="1">\(t.server.url("/a1.bin"))</url>
                    <url priority="2">\(t.server.url("/a2.bin"))</url>
                    """
                ),
                ("b.bin", "<url>\(t.server.url("/b.bin"))</url>"),
            ])
            let options: JSONValue = ["dir": .string(t.dir.file("downloads/ml")), "split": "2", "max-connection-per-server": "2"]
            let gids = try #require(try await t.call("aria2.addMetalink", [.string(document.base64EncodedString()), options]).array)
            #expect(gids.count == 2)
            for gid in gids { try await t.waitFor(try #require(gid.string)) { $0["status"] == "complete" } }
            #expect(t.dir.contents("downloads/ml/nested/a.bin") == a)
            #expect(t.dir.contents("downloads/ml/b.bin") == b)
            let status = try await t.call("aria2.getOption", [gids[0]])
            #expect(status["split"] == "2")

            // Bad base64, a bad document, an option that means one file: one line each, nothing added.
            #expect(await t.failure("aria2.addMetalink", ["%%%"]) == "the Metalink document is not valid base64")
            let traversal = Data(Self.meta4Text("../x", "<url>http://a/f</url>").utf8).base64EncodedString()
            #expect(await t.failure("aria2.addMetalink", [.string(traversal)])?.contains("leads out of the download folder") == true)
            let entity = Data(Self.hostile[0].1.utf8).base64EncodedString()
            #expect(await t.failure("aria2.addMetalink", [.string(entity)])?.contains("document type declaration") == true)
            #expect(await t.failure("aria2.addMetalink", [.string(document.base64EncodedString()), ["out": "x"]])?.contains("out") == true)
            #expect(try await t.gids("aria2.tellStopped", [0, 10]).count == 2)
            #expect(try await t.gids("aria2.tellWaiting", [0, 10]).isEmpty)
            #expect(try await t.call("aria2.getVersion")["enabledFeatures"]?.array?.contains("Metalink") == true)
        }
    }

    /// Without a secret the daemon confines every file of a Metalink to its download folder.
    @Test func addMetalinkKeepsFilesInsideTheDownloadFolder() async throws {
        try await RPCFixture.with { t async throws in
            let content = t.serve("/f.bin", size: 4 << 10)
            let document = Self.meta4([("deep/er/f.bin", "<url>\(t.server.url("/f.bin"))</url>")]).base64EncodedString()
            #expect(await t.failure("aria2.addMetalink", [.string(document), ["dir": "/etc"]])?.contains("outside the download folder") == true)
            let gids = try await t.call("aria2.addMetalink", [.string(document), [:], 0])
            let gid = try #require(gids.array?.first?.string)
            try await t.waitFor(gid) { $0["status"] == "complete" }
            #expect(t.dir.contents("downloads/deep/er/f.bin") == content)
        }
    }
}
