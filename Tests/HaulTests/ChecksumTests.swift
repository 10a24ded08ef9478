import NIOPosix
import Testing
@testable import Haul

@Suite struct ChecksumTests {
    @Test(arguments: [
        ("sha-256=" + String(repeating: "a", count: 64), Checksum.Algorithm.sha256),
        ("SHA256=" + String(repeating: "B", count: 64), .sha256),
        ("sha-1=" + String(repeating: "0", count: 40), .sha1),
        ("sha512=" + String(repeating: "f", count: 128), .sha512),
        ("md5=" + String(repeating: "9", count: 32), .md5),
    ])
    func parsesAria2Forms(text: String, algorithm: Checksum.Algorithm) throws {
        let checksum = try Checksum(parsing: text)
        #expect(checksum.algorithm == algorithm)
        #expect(checksum.hex == checksum.hex.lowercased())
    }

    @Test(arguments: ["sha-256", "crc32=00000000", "sha-256=abc", "md5=" + String(repeating: "z", count: 32)])
    func rejectsWithAReason(text: String) {
        #expect(throws: DownloadError.self) { try Checksum(parsing: text) }
    }

    @Test func streamingDigestMatchesKnownVector() {
        var digest = StreamingDigest(.sha256)
        Array("abc".utf8).withUnsafeBytes { digest.update($0) }
        #expect(digest.finalizeHex() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test func aResumedFilesHashIsReadOffTheEventLoops() async throws {
        // The blocking reads of a whole-file hash run on the blocking-I/O threads.
        let ranOnLoop = try await offTheEventLoops { () throws(DownloadError) in
            MultiThreadedEventLoopGroup.currentEventLoop != nil
        }
        #expect(!ranOnLoop)
        await #expect(throws: DownloadError.self) {
            try await offTheEventLoops { () throws(DownloadError) -> Int in throw .io("disk") }
        }
    }
}
