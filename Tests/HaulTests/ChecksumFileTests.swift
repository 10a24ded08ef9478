import Crypto
import Foundation
import Testing
@testable import Haul

/// `ChecksumFile`: `SHA256SUMS`-style lists in the GNU and BSD formats, and what they refuse.
@Suite struct ChecksumFileTests {
    static func hex(_ digits: Int, _ digit: Character = "a") -> String { String(repeating: digit, count: digits) }

    static func parse(_ text: String) throws(DownloadError) -> ChecksumFile {
        try ChecksumFile(parsing: Array(text.utf8), source: "SUMS")
    }

    /// The error parsing `text` gives, or nil.
    static func error(_ text: String) -> DownloadError? {
        do { _ = try parse(text) } catch { return error }
        return nil
    }

    @Test(arguments: [(32, Checksum.Algorithm.md5), (40, .sha1), (64, .sha256), (128, .sha512)])
    func gnuLinesTakeTheirAlgorithmFromTheDigestsLength(digits: Int, algorithm: Checksum.Algorithm) throws {
        let upper = Self.hex(digits, "B")
        let sums = try Self.parse("\(upper)  text.txt\n\(Self.hex(digits)) *binary.iso\n")
        #expect(sums.count == 2)
        #expect(sums.checksum(forPath: "text.txt") == (try Checksum(parsing: "\(algorithm.rawValue)=\(upper)")))
        #expect(sums.checksum(forPath: "text.txt")?.hex == upper.lowercased())
        // `*` marks binary mode; it is not part of the name.
        #expect(sums.checksum(forPath: "binary.iso")?.algorithm == algorithm)
        #expect(sums.checksum(forPath: "*binary.iso") == nil)
        // Two spaces, then `*`: text mode, and the star is the name's.
        #expect(try Self.parse("\(Self.hex(digits))  *star\n").checksum(forPath: "*star") != nil)
    }

    @Test(arguments: [
        ("MD5", Checksum.Algorithm.md5), ("SHA1", .sha1), ("SHA-1", .sha1), ("SHA256", .sha256), ("SHA-256", .sha256),
        ("SHA2-256", .sha256), ("SHA512", .sha512), ("SHA-512", .sha512), ("sha256", .sha256),
    ])
    func bsdTagLines(tag: String, algorithm: Checksum.Algorithm) throws {
        let digest = Self.hex(algorithm.hexLength, "C")
        let sums = try Self.parse("\(tag) (dist/a (1).tar.gz) = \(digest)\n")
        #expect(sums.checksum(forPath: "dist/a (1).tar.gz") == Checksum(algorithm: algorithm, validHex: digest.lowercased()))
    }

    @Test func realToolOutputMatchesRealDigests() throws {
        let bytes = Array("abc".utf8)
        let sha256 = SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
        let md5 = Insecure.MD5.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
        // `sha256sum abc.txt` and `md5sum --tag abc.txt`, mixed in one file.
        let sums = try Self.parse("\(sha256)  abc.txt\nMD5 (other.txt) = \(md5)\n")
        #expect(sums.checksum(forPath: "abc.txt")?.description == "sha-256=ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(sums.checksum(forPath: "other.txt")?.description == "md5=900150983cd24fb0d6963f7d28e17f72")
    }

    @Test func escapedNamesInBothFormats() throws {
        let text = """
            \\\(Self.hex(64))  new\\nline\\\\back.txt
            \\SHA1 (tab\\\\dir/x\\ny) = \(Self.hex(40))
            \(Self.hex(64))  plain\\name.txt

            """
        let sums = try Self.parse(text)
        #expect(sums.checksum(forPath: "new\nline\\back.txt")?.algorithm == .sha256)
        #expect(sums.checksum(forPath: "tab\\dir/x\ny")?.algorithm == .sha1)
        // Without the leading backslash a backslash is just a character of the name.
        #expect(sums.checksum(forPath: "plain\\name.txt") != nil)
        #expect(Self.error("\\\(Self.hex(64))  bad\\q")?.message.contains("SUMS:1: unknown escape") == true)
        #expect(Self.error("\\\(Self.hex(64))  lone\\")?.message.contains("SUMS:1:") == true)
    }

    @Test func aLeadingDotSlashIsDroppedOnBothSides() throws {
        let sums = try Self.parse("\(Self.hex(64))  ./a.iso\nSHA256 (./sub/b.iso) = \(Self.hex(64, "b"))\n")
        #expect(sums.checksum(forPath: "a.iso") != nil)
        #expect(sums.checksum(forPath: "./a.iso") != nil)
        #expect(sums.checksum(forPath: "sub/b.iso")?.hex == Self.hex(64, "b"))
        #expect(sums.checksums.keys.sorted() == ["a.iso", "sub/b.iso"])
    }

    @Test func blankLinesCommentsAndCRLFAreSkipped() throws {
        let text = "# made by sha256sum\r\n\r\n   \n\t# indented comment\n\(Self.hex(64))  a.iso\r\n\n"
        let sums = try Self.parse(text)
        #expect(sums.checksums.keys.sorted() == ["a.iso"])
        #expect(try Self.parse("").count == 0)
    }

    @Test func namesKeepTheirSpaces() throws {
        let sums = try Self.parse("\(Self.hex(64))   leading space.txt \n")
        #expect(sums.checksum(forPath: " leading space.txt ") != nil)
    }

    @Test(arguments: [
        ("not a checksum line", "SUMS:2: expected"),
        ("\(ChecksumFileTests.hex(64)) one-space.txt", "SUMS:2: expected"),
        ("\(ChecksumFileTests.hex(64))", "SUMS:2: expected"),
        ("\(ChecksumFileTests.hex(64))  ", "SUMS:2: the file name is empty"),
        ("\(ChecksumFileTests.hex(63))  odd.txt", "SUMS:2: a digest of 63 hex digits"),
        ("\(ChecksumFileTests.hex(56))  sha224.txt", "SUMS:2: a digest of 56 hex digits"),
        ("\(ChecksumFileTests.hex(62))zz  x.txt", "SUMS:2: expected"),
        ("SHA256 (x.txt) = \(ChecksumFileTests.hex(40))", "SUMS:2: bad SHA256 digest"),
        ("SHA256 (x.txt) \(ChecksumFileTests.hex(64))", "SUMS:2: expected 'ALGORITHM (NAME) = HEX'"),
        ("BLAKE2b (x.txt) = \(ChecksumFileTests.hex(128))", "SUMS:2: unsupported algorithm BLAKE2b"),
    ])
    func aMalformedLineIsAnErrorNamingTheFileAndLine(line: String, message: String) {
        let error = Self.error("\(Self.hex(64))  fine.txt\n\(line)\n")
        #expect(error?.kind == .invalidRequest)
        #expect(error?.message.hasPrefix(message) == true, "\(String(describing: error))")
        #expect(error?.message.contains("\n") == false)
    }

    @Test func aNameListedTwice() throws {
        // The same digest again is harmless.
        let same = try Self.parse("\(Self.hex(64))  a.iso\n\(Self.hex(64))  ./a.iso\n")
        #expect(same.count == 1)
        // Another algorithm too: the strongest digest is kept.
        let mixed = try Self.parse("MD5 (a.iso) = \(Self.hex(32))\n\(Self.hex(128))  a.iso\n\(Self.hex(40))  a.iso\n")
        #expect(mixed.checksum(forPath: "a.iso")?.algorithm == .sha512)
        // A different digest of the same algorithm is a contradiction.
        let error = Self.error("# list\n\(Self.hex(64))  a.iso\nSHA256 (./a.iso) = \(Self.hex(64, "b"))\n")
        #expect(error?.message == "SUMS:3: a.iso is listed twice with different sha-256 digests (first on line 2)")
    }

    @Test func aNameAloneMatchesAFileBelowOnlyWhenItIsUnambiguous() throws {
        let sums = try Self.parse(
            """
            \(Self.hex(64, "1"))  alone.iso
            \(Self.hex(64, "2"))  twice.iso
            \(Self.hex(64, "3"))  other/twice.iso
            \(Self.hex(64, "4"))  dir/deep.iso

            """)
        #expect(sums.checksum(forPath: "1.0/alone.iso")?.hex == Self.hex(64, "1"))
        #expect(sums.matchesByBaseNameOnly("1.0/alone.iso"))
        #expect(!sums.matchesByBaseNameOnly("alone.iso"))
        // Two listed names end with twice.iso: a file elsewhere matches neither.
        #expect(sums.checksum(forPath: "1.0/twice.iso") == nil)
        #expect(sums.checksum(forPath: "other/twice.iso")?.hex == Self.hex(64, "3"))
        // A listed name with a folder matches only that path.
        #expect(sums.checksum(forPath: "deep.iso") == nil)
        #expect(sums.checksum(forPath: "x/dir/deep.iso") == nil)
        #expect(sums.checksum(forPath: "unlisted.iso") == nil)
        #expect(throws: DownloadError.self) { try sums.requiredChecksum(forPath: "unlisted.iso") }
        #expect(sums.notListed("unlisted.iso").kind == .checksum)
        #expect(sums.notListed("unlisted.iso").message.contains("unlisted.iso is not in the checksum file SUMS"))
        #expect(try sums.requiredChecksum(forPath: "alone.iso").hex == Self.hex(64, "1"))
    }

    @Test func theNameAURLIsSavedUnder() {
        #expect(ChecksumFile.fileName(ofURL: "http://h/a/b/file%20name.iso?x=1") == "file name.iso")
        #expect(ChecksumFile.fileName(ofURL: "http://h/") == nil)
    }

    @Test func hostileInputIsAnErrorNotACrash() throws {
        let valid = Array("\(Self.hex(64))  a".utf8)
        let nul = valid + [0] + Array("b\n".utf8)
        #expect(Self.message(nul) == "SUMS:1: the line holds a NUL byte")
        let long = Array("\(Self.hex(64))  ".utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: 1 << 20)
        #expect(Self.message(long) == "SUMS:1: the line is longer than \(ChecksumFile.maxLineBytes) bytes")
        let notUTF8 = Array("\(Self.hex(64))  ".utf8) + [0xff, 0xfe, 0x0a]
        #expect(Self.message(notUTF8) == "SUMS:1: the line is not UTF-8")
        // Too large as a whole, even in short valid lines.
        let line = Array("\(Self.hex(64))  same\n".utf8)
        var huge: [UInt8] = []
        huge.reserveCapacity(ChecksumFile.maxBytes + line.count)
        while huge.count <= ChecksumFile.maxBytes { huge += line }
        #expect(Self.message(huge) == "checksum file SUMS is larger than 64 MiB")
        // Random bytes and random mixes of the syntax: each parses or throws.
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("0123456789abcdefABCDEF ()=*\\./#\n\r\tSHA256MD5-n".utf8) + [0, 0xc3, 0xa9, 0xff]
        for _ in 0..<2000 {
            let length = Int.random(in: 0..<200, using: &generator)
            let bytes = (0..<length).map { _ in alphabet.randomElement(using: &generator)! }
            _ = try? ChecksumFile(parsing: bytes, source: "fuzz")
        }
    }

    static func message(_ bytes: [UInt8]) -> String? {
        do { _ = try ChecksumFile(parsing: bytes, source: "SUMS") } catch { return error.message }
        return nil
    }

    @Test func readsAFileAndSaysWhenItCannot() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try dir.write("SHA256SUMS", Array("\(Self.hex(64))  a.iso\n".utf8))
        #expect(try ChecksumFile(contentsOfFile: dir.file("SHA256SUMS")).checksum(forPath: "a.iso") != nil)
        #expect(throws: DownloadError.self) { try ChecksumFile(contentsOfFile: dir.file("missing")) }
        do {
            _ = try ChecksumFile(contentsOfFile: dir.file("missing"))
        } catch {
            #expect(error.kind == .io && error.message.contains("cannot read checksum file"))
        }
    }
}
