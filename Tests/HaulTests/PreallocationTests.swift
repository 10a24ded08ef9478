#if canImport(Glibc)
import Glibc
#endif
import CHaulSystem
import Foundation
import HaulTestSupport
import Testing
@testable import Haul

/// The part file reserves its disk blocks before the transfer, without changing its size.
@Suite struct PreallocationTests {
    static let size = 8 << 20

    @Test(
        .enabled(if: Self.tempDirectoryPreallocates, "the temp dir's filesystem has no fallocate"),
        arguments: [0, 1000])
    func reservesBlocksButKeepsTheSize(existingBytes: Int) throws {
        let directory = try TestDirectory()
        defer { directory.remove() }
        let bytes = testBytes(existingBytes)
        try directory.write("f.part", bytes)
        let part = try PartFile(path: directory.file("f.part"))
        try part.preallocate(Int64(Self.size))
        let after = try #require(allocation(of: part.path))
        #expect(after.size == existingBytes)
        #expect(after.allocated >= Self.size)
        #expect(directory.contents("f.part") == bytes)
    }

    @Test(.enabled(if: Self.tempDirectoryPreallocates, "the temp dir's filesystem has no fallocate"))
    func aRunningDownloadHasBlocksForTheWholeFile() async throws {
        try await FaultServer.withServer { server in
            let harness = try Harness()
            defer { harness.remove() }
            var route = Route(content: testBytes(Self.size, seed: 3))
            route.bytesPerSecond = 8 << 20
            server.serve("/f.bin", route)
            let downloader = try harness.downloader()
            let task = try await downloader.download(harness.request(server.url("/f.bin"), file: "f.bin"))
            let part = harness.directory.file("f.bin.part")
            var seen: (size: Int, allocated: Int)?
            let midway = try await waitUntil {
                seen = allocation(of: part)
                return seen.map { $0.size > 0 && $0.size < Self.size } ?? false
            }
            #expect(midway, "never saw the part file while it was being written")
            if let seen { #expect(seen.allocated >= Self.size, "\(seen.allocated) bytes allocated at size \(seen.size)") }
            _ = try await task.result()
            try await downloader.shutdown()
            #expect(digest(harness.directory.contents("f.bin")) == digest(route.content))
        }
    }

    @Test(.enabled("needs root and a mountable tmpfs") { TinyDisk.canMount })
    func aDiskTooSmallFailsBeforeWritingAnyByte() async throws {
        try await FaultServer.withServer { server in
            let harness = try Harness()
            defer { harness.remove() }
            let disk = try #require(TinyDisk(at: harness.directory.file("disk")))
            defer { disk.unmount() }
            server.serve("/f.bin", Route(content: [UInt8](repeating: 7, count: Self.size)))
            let destination = disk.path + "/f.bin"
            let result = try await harness.download(DownloadRequest(url: server.url("/f.bin"), file: destination))
            guard case .failure(let error) = result else {
                Issue.record("a file bigger than the disk downloaded")
                return
            }
            #expect(error.kind == .io)
            #expect(error.message == "not enough disk space for \(destination).part: \(Self.size) bytes needed; free some and run again")
            #expect(!error.description.contains("\n"))
            // It fails as the answer's head arrives: the body stops at what socket buffers
            // took, nothing of it is written.
            #expect(server.stats("/f.bin").bodyBytesSent < Self.size)
            #expect(fileSize(destination + ".part") == 0)
            #expect(!FileManager.default.fileExists(atPath: destination))
        }
    }

    /// Whether fallocate works where ``TestDirectory`` puts its files (ext4 and tmpfs do).
    static var tempDirectoryPreallocates: Bool {
        let path = NSTemporaryDirectory() + "/haul-fallocate-probe-\(getpid())"
        let fd = open(path, O_RDWR | O_CREAT, 0o644)
        defer { close(fd); unlink(path) }
        return haul_fallocate_keep_size(fd, 0, 4096) == 0 || errno != EOPNOTSUPP
    }
}

/// The file size and the bytes of disk blocks it holds (`st_blocks` counts 512-byte units).
private func allocation(of path: String) -> (size: Int, allocated: Int)? {
    var info = stat()
    guard stat(path, &info) == 0 else { return nil }
    return (Int(info.st_size), Int(info.st_blocks) * 512)
}
