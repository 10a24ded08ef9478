import Foundation
import HaulTestSupport
import Testing
@testable import Haul

/// What a caller can read off a failure without parsing its message.
@Suite struct DownloadErrorTests {
    @Test(
        arguments: [
            (ENOSPC, DownloadError.Reason.diskFull), (EDQUOT, .diskFull), (EROFS, .readOnly), (EACCES, .permissionDenied),
            (EPERM, .permissionDenied), (ENOTDIR, .notADirectory), (EIO, nil),
        ] as [(Int32, DownloadError.Reason?)])
    func aFileErrorCarriesItsPathErrnoAndReason(code: Int32, reason: DownloadError.Reason?) {
        let error = DownloadError.io("write to", path: "/data/f.bin", errno: code)
        #expect(error.kind == .io)
        #expect(error.path == "/data/f.bin")
        #expect(error.errorNumber == code)
        #expect(error.reason == reason)
        #expect(error.description == "cannot write to /data/f.bin: \(String(cString: strerror(code)))")
    }

    @Test func aFolderThatIsAFileFailsWithNotADirectory() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        server.serve("/f.bin", Route(content: testBytes(1000)))
        try harness.directory.write("plain", [1, 2, 3])
        let downloader = try harness.downloader()
        let task = try await downloader.download(harness.request(server.url("/f.bin"), file: "plain/f.bin"))
        let error = await #expect(throws: DownloadError.self) { try await task.result() }
        try await downloader.shutdown()
        try await server.shutdown()
        #expect(error?.kind == .io)
        #expect(error?.reason == .notADirectory)
        #expect(error?.errorNumber == ENOTDIR)
        #expect(error?.path == harness.directory.file("plain"))
    }

    /// `mkdir` says why a folder cannot be made, and the error keeps its number: EACCES in a
    /// folder without write permission (not ENOTDIR, which Foundation's `createDirectory` made
    /// of every failure), ENOTDIR only where a part of the path is a file.
    @Test func aFolderThatCannotBeMadeSaysWhyInItsErrorNumber() throws {
        let directory = try TestDirectory()
        defer {
            chmod(directory.file("locked"), 0o755)
            directory.remove()
        }
        try directory.write("locked/.keep", [], creatingFolders: true)
        try directory.write("plain", [1])
        chmod(directory.file("locked"), 0o555)
        #expect(FilePaths.makeFolders(directory.file("a/b/c")) == nil)
        #expect(FilePaths.makeFolders(directory.file("a/b/c")) == nil, "made already")
        #expect(FilePaths.makeFolders(directory.file("plain/x")) == ENOTDIR)
        #expect(FilePaths.makeFolders(directory.file("plain")) == ENOTDIR)
        // Root ignores permissions; /proc refuses anyone a new folder (ENOENT).
        if geteuid() != 0 { #expect(FilePaths.makeFolders(directory.file("locked/x")) == EACCES) }
        #expect(FilePaths.makeFolders("/proc/haul-test/x") == ENOENT)
        #expect(throws: DownloadError.self) { try DestinationResolver.ensureFolder(of: "/proc/haul-test/f.bin") }
        do throws(DownloadError) {
            try DestinationResolver.ensureFolder(of: "/proc/haul-test/f.bin")
        } catch {
            #expect(error.errorNumber == ENOENT)
            #expect(error.path == "/proc/haul-test")
        }
    }

    @Test func everyKindHasItsOwnStoredNumberAndPausedComesLast() {
        let numbers = DownloadError.Kind.all.map(\.storedValue)
        #expect(numbers == Array(1...9))
        #expect(DownloadError.Kind(storedValue: 9) == .paused)
        #expect(DownloadError.Kind(storedValue: 5) == .io)
    }

    @Test func aVersionOneTokenIsStillReadAndVersionTwoWritesOffsetsAndLengths() throws {
        let old = #"""
            {"version":1,"id":"5f1c02a000000001","url":"http://example.com/f","destination":"/tmp/f",
             "totalLength":3000,"validators":{"etag":"\"a\""},"ranges":"0-1000,2000-2500"}
            """#
        let token = try JSONDecoder().decode(ResumeToken.self, from: Data(old.utf8))
        #expect(token.version == 1)
        #expect(token.ranges == ByteRanges([0..<1000, 2000..<2500]))

        var current = token
        current.version = ResumeToken.currentVersion
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let json = String(decoding: try encoder.encode(current), as: UTF8.self)
        #expect(json.contains(#""ranges":[{"length":1000,"offset":0},{"length":500,"offset":2000}]"#))
        #expect(json.contains(#""version":2"#))
        #expect(try JSONDecoder().decode(ResumeToken.self, from: Data(json.utf8)) == current)
    }
}
