import Foundation
import HaulTestSupport
import Testing
@testable import Haul

/// The built `haul put`, killed and rerun the way users do it, against aiohttp-tus.
@Suite(.serialized, .enabled(if: tusServerAvailable || ProcessInfo.processInfo.environment["CI"] != nil))
struct UploadCommandLineTests {
    @Test func killNineThenRerunSendsOnlyTheRest() async throws {
        let tus = try await TusTestServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        let size = 40 << 20
        let content = testBytes(size, seed: 21)
        try dir.write("big.bin", content)
        let arguments = ["put", "-q", "--state-dir", dir.file("state"), "big.bin", tus.url]

        // Slowed down so that the kill lands in the middle: after at least two PATCHes began.
        let haul = try HaulProcess(arguments + ["--limit-rate", "8M"], in: dir.path)
        let reached = try await waitUntil {
            guard tus.received().bytes >= 18 << 20 else { return false }
            haul.signal(SIGKILL)
            return true
        }
        #expect(reached)
        haul.signal(SIGKILL)
        _ = try await haul.finish()
        let killed = tus.received()

        let (status, stderr) = try await HaulProcess.run(arguments, in: dir.path)
        let total = tus.received()
        let stored = try? [UInt8](Data(contentsOf: tus.folder.appendingPathComponent("big.bin")))
        await tus.stop()

        #expect(status == 0, "\(stderr)")
        #expect(stderr.isEmpty, "\(stderr)")
        #expect(digest(stored) == digest(content))
        #expect(total.creations == 1, "the rerun continued the same upload")
        // The rerun sends what the server did not hold: at least the 16 MiB confirmed before the
        // kill stay there. In all, at most the file and one 8 MiB PATCH cut off by the kill.
        #expect(total.bytes - killed.bytes <= Int64(size) - (16 << 20), "the rerun sent \(total.bytes - killed.bytes)")
        #expect(total.bytes <= Int64(size) + (8 << 20), "sent \(total.bytes) in all")
    }

    @Test func aChangedFileIsSaidInOneLineAndUploadedAnew() async throws {
        let tus = try await TusTestServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        try dir.write("c.bin", testBytes(24 << 20, seed: 22))
        let arguments = ["put", "--state-dir", dir.file("state"), "c.bin", tus.url]
        let haul = try HaulProcess(arguments + ["-q", "--limit-rate", "8M"], in: dir.path)
        #expect(try await waitUntil { tus.received().bytes >= 10 << 20 })
        haul.signal(SIGKILL)
        _ = try await haul.finish()
        let changed = testBytes(20 << 20, seed: 23)
        try dir.write("c.bin", changed)

        let (status, stderr) = try await HaulProcess.run(arguments, in: dir.path)
        let stored = try? [UInt8](Data(contentsOf: tus.folder.appendingPathComponent("c.bin")))
        await tus.stop()

        #expect(status == 0, "\(stderr)")
        let lines = stderr.split(separator: "\n")
        #expect(lines.first?.hasPrefix("haul: \(dir.file("c.bin")) changed since its upload began (its length changed") == true, "\(stderr)")
        #expect(lines.last?.contains("uploaded 20.0 MiB by tus") == true, "\(stderr)")
        #expect(digest(stored) == digest(changed))
    }

    /// A plain `PUT` keeps no record, so it does not open the store: none is made, and one that
    /// is not a database stops only the commands that need it, each with the one line it said
    /// when the store was opened at the start.
    @Test(.enabled(if: NginxServer.executablePath != nil || ProcessInfo.processInfo.environment["CI"] != nil))
    func aPlainPutOpensNoStore() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try dir.write("p.bin", testBytes(3000, seed: 24))
        try FileManager.default.createDirectory(atPath: dir.file("www"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: dir.file("bad"), withIntermediateDirectories: true)
        try dir.write("bad/state.sqlite", Array("not a database, not at all".utf8))
        let runs = try await NginxServer.withServer(root: dir.file("www"), options: .init(webDAV: true)) { nginx in
            let url = nginx.url("/dav/p.bin")
            return (
                fresh: try await HaulProcess.run(["put", "-q", "--protocol", "put", "--state-dir", dir.file("state"), "p.bin", url], in: dir.path),
                plain: try await HaulProcess.run(["put", "-q", "--protocol", "put", "--state-dir", dir.file("bad"), "p.bin", url], in: dir.path),
                auto: try await HaulProcess.run(["put", "-q", "--state-dir", dir.file("bad"), "p.bin", url], in: dir.path),
                get: try await HaulProcess.run(["get", "-q", "--state-dir", dir.file("bad"), "-d", dir.file("out"), url], in: dir.path)
            )
        }

        #expect(runs.fresh.status == 0, "\(runs.fresh.stderr)")
        #expect(FileManager.default.fileExists(atPath: dir.file("state")))
        #expect(!FileManager.default.fileExists(atPath: dir.file("state/state.sqlite")))
        #expect(runs.plain.status == 0, "\(runs.plain.stderr)")
        #expect(digest(dir.contents("www/p.bin")) == digest(testBytes(3000, seed: 24)))
        let line = "haul: cannot open the store \(dir.file("bad/state.sqlite")): file is not a database; check the disk and the state folder (--state-dir)\n"
        #expect(runs.auto.status == 3)
        #expect(runs.auto.stderr == line)
        #expect(runs.get.status == 3)
        #expect(runs.get.stderr == line)
        #expect(!FileManager.default.fileExists(atPath: dir.file("out/p.bin")))
    }

    /// `haul put FILE... URL`: each file in turn, into a folder URL under its own name, or to a
    /// tus endpoint as an upload of its own; several files to one plain URL are refused before
    /// anything is sent (each would replace the last).
    @Test(.enabled(if: NginxServer.executablePath != nil || ProcessInfo.processInfo.environment["CI"] != nil))
    func severalFilesGoEachToItsOwnPlace() async throws {
        let tus = try await TusTestServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        let contents = ["one.bin": testBytes(5000, seed: 31), "two words.bin": testBytes(300_000, seed: 32)]
        for (name, bytes) in contents { try dir.write(name, bytes) }
        try FileManager.default.createDirectory(atPath: dir.file("www"), withIntermediateDirectories: true)
        let state = dir.file("state")
        let runs = try await NginxServer.withServer(root: dir.file("www"), options: .init(webDAV: true)) { nginx in
            (
                folder: try await HaulProcess.run(["put", "-q", "--state-dir", state, "one.bin", "two words.bin", nginx.url("/dav/")], in: dir.path),
                plain: try await HaulProcess.run(["put", "--state-dir", state, "one.bin", "two words.bin", nginx.url("/dav/x.bin")], in: dir.path),
                missing: try await HaulProcess.run(
                    ["put", "-q", "--protocol", "put", "--state-dir", state, "nope.bin", "one.bin", nginx.url("/dav/again/")], in: dir.path)
            )
        }
        let toTus = try await HaulProcess.run(["put", "-q", "--protocol", "tus", "--state-dir", state, "one.bin", "two words.bin", tus.url], in: dir.path)
        let stored = contents.keys.map { (dir.contents("www/\($0)"), (try? [UInt8](Data(contentsOf: tus.folder.appendingPathComponent($0))))) }
        await tus.stop()

        #expect(runs.folder.status == 0, "\(runs.folder.stderr)")
        #expect(runs.folder.stderr.isEmpty, "\(runs.folder.stderr)")
        #expect(toTus.status == 0, "\(toTus.stderr)")
        for ((name, bytes), (inFolder, atTus)) in zip(contents, stored) {
            #expect(digest(inFolder) == digest(bytes), "\(name)")
            #expect(digest(atTus) == digest(bytes), "\(name)")
        }
        #expect(runs.plain.status == 64)
        #expect(runs.plain.stderr.hasPrefix("Error: several files go into a folder URL ending with /"), "\(runs.plain.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("www/x.bin")))
        // A file that cannot be read is said in one line; the others still go.
        #expect(runs.missing.status == 3)
        #expect(runs.missing.stderr == "haul: cannot read \(dir.file("nope.bin")): No such file or directory\n", "\(runs.missing.stderr)")
        #expect(digest(dir.contents("www/again/one.bin")) == digest(contents["one.bin"]!))
    }

    @Test func errorsAreOneLineWithTheirExitStatus() async throws {
        let tus = try await TusTestServer.start()
        let dir = try TestDirectory()
        defer { dir.remove() }
        let state = dir.file("state")
        let missing = try await HaulProcess.run(["put", "--state-dir", state, "nope.bin", tus.url], in: dir.path)
        try dir.write("a.bin", [1, 2, 3])
        // aiohttp answers a PUT to the creation endpoint with 405.
        let refused = try await HaulProcess.run(["put", "--protocol", "put", "--state-dir", state, "a.bin", tus.url], in: dir.path)
        await tus.stop()

        #expect(missing.status == 3)
        #expect(missing.stderr == "haul: cannot read \(dir.file("nope.bin")): No such file or directory\n")
        #expect(refused.status == 8)
        #expect(refused.stderr == "haul: \(tus.url): 405 Method Not Allowed\n")
    }
}
