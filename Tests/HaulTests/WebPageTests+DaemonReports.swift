import Foundation
import GRDB
import Haul
import HaulDaemon
import HaulTestSupport
import Testing

/// What the page shows from what the daemon reports beyond aria2: why a download waits, which
/// pieces are on disk, options in words and units, and settings that outlive a restart.
extension WebPageTests {
    func rowWaitText(_ gid: String) -> String { "document.querySelector('#list [data-gid=\"\(gid)\"] .eta').textContent" }

    @Test(.enabled(if: chromium != nil || isCI))
    func saysWhyADownloadWaits() async throws {
        try await withPage(["-x", "1", "-j", "1", "--max-connections-per-host", "1"]) { server, daemon, _, page in
            var slow = Route(content: testBytes(4 << 20, seed: 31))
            slow.bytesPerSecond = 128 << 10
            for name in ["first", "second", "third"] { server.serve("/\(name).iso", slow) }
            let first = try #require(try await daemon.call("aria2.addUri", [[.string(server.url("/first.iso"))]]).string)
            _ = try await daemon.waitFor(first) { $0["status"] == "active" }
            let second = try #require(try await daemon.call("aria2.addUri", [[.string(server.url("/second.iso"))]]).string)
            let third = try #require(try await daemon.call("aria2.addUri", [[.string(server.url("/third.iso"))], ["pause": "true"]]).string)
            try await open(page, daemon)
            try await waitConnected(page)

            // -j 1 is taken.
            try await page.waitFor(rowWaitText(second), toBe: "Waiting for a free slot (1 of 1 running)")
            #expect(
                try await daemon.call("aria2.tellStatus", [.string(second), ["waitingReason"]])["waitingReason"]
                    == ["kind": "slot", "running": "1", "limit": "1"])
            // A second slot, but the host's one connection is taken.
            try await daemon.call("aria2.changeGlobalOption", [["max-concurrent-downloads": "2"]])
            try await page.waitFor(
                rowWaitText(second),
                toBe: "Waiting: host 127.0.0.1 has its 1 connections (--max-connections-per-host)")
            #expect(try await daemon.call("aria2.tellStatus", [.string(second)])["waitingReason"]?["kind"] == "host")
            // Paused: the detail view says so; the running one has no reason.
            try await page.click(row(third, "details"))
            try await page.waitFor("document.getElementById('detailFacts').textContent.includes('it waits until you resume it')", toBe: true)
            #expect(try await daemon.call("aria2.tellStatus", [.string(first)])["waitingReason"] == nil)
            // A dependency (the library's, not aria2's RPC): as the page words it.
            #expect(
                try await page.evaluate("Fmt.waitText({ status: 'waiting', waitingReason: { kind: 'dependency', gid: 'abc', name: 'base.iso' } })")
                    == "Waiting for download base.iso")
            // Finished downloads still being written hold the rest back (a disk slower than the network).
            #expect(
                try await page.evaluate("Fmt.waitText({ status: 'waiting', waitingReason: { kind: 'writing', pending: '256', limit: '256' } })")
                    == "Waiting: 256 finished downloads are still being written to disk")
        }
    }

    /// aria2's bitfield from ranges: bit i (MSB first) set when all of piece i is in them.
    static func bitfield(_ ranges: ByteRanges, total: Int64, piece: Int64 = 1 << 20) -> String {
        let count = Int((total + piece - 1) / piece)
        var bytes = [UInt8](repeating: 0, count: (count + 7) / 8)
        for i in 0..<count {
            let (start, end) = (Int64(i) * piece, min(Int64(i + 1) * piece, total))
            if ranges.ranges.contains(where: { $0.lowerBound <= start && $0.upperBound >= end }) { bytes[i / 8] |= 0x80 >> UInt8(i % 8) }
        }
        return bytes.map { String(format: "%02x", $0) }.joined()
    }

    @Test(.enabled(if: chromium != nil || isCI))
    func showsWhichPiecesAreOnDiskAndOptionsInWords() async throws {
        try await withPage(["-x", "2", "--min-split-size", "1M"]) { server, daemon, dir, page in
            var route = Route(content: testBytes(8 << 20, seed: 32))
            route.bytesPerSecond = 1 << 20
            server.serve("/pieces.img", route)
            let gid = try #require(try await daemon.call("aria2.addUri", [[.string(server.url("/pieces.img"))], ["max-download-limit": "600K"]]).string)
            try await open(page, daemon)
            try await waitConnected(page)
            try await waitForStatus(gid, ["active"], page, daemon)
            try await page.click(row(gid, "details"))
            try await page.waitFor("document.getElementById('detail').dataset.for", toBe: .string(gid))
            try await page.waitFor("document.getElementById('detailUris').textContent.includes('In use')", toBe: true)

            // Options under the page's labels, in units; aria2's keys and raw values behind "raw".
            let options = "document.getElementById('detailOptions').textContent"
            try await page.waitFor("\(options).includes('Speed limit600 KiB/s')", toBe: true)
            #expect(try await page.evaluate("\(options).includes('max-download-limit')") == false)
            #expect(try await page.evaluate("document.getElementById('limitInput').value") == "600K")
            try await page.click("#detailRaw")
            try await page.waitFor("\(options).includes('max-download-limit614400')", toBe: true)
            try await page.click("#detailRaw")
            try await page.waitFor("\(options).includes('max-download-limit')", toBe: false)

            // Paused partway: the bitfield is the ranges the store holds, and the page draws it.
            _ = try await daemon.waitFor(gid, timeout: .seconds(30)) { Int($0["completedLength"]?.string ?? "") ?? 0 >= 3 << 20 }
            try await page.click("#detailActions button[data-action=\"pause\"]")
            try await waitForStatus(gid, ["paused"], page, daemon)
            // The pause's last ranges may reach the store a moment after the status says paused.
            let database = try DatabaseQueue(path: dir.file("state/state.sqlite"))
            var seen: (bitfield: JSONValue?, ranges: ByteRanges) = (nil, ByteRanges())
            let polled = try? await page.poll(timeout: .seconds(10)) { () async throws -> (JSONValue, ByteRanges)? in
                let status = try await daemon.call("aria2.tellStatus", [.string(gid), ["bitfield", "numPieces", "pieceLength"]])
                let stored = try await database.read { db in
                    try String.fetchOne(db, sql: "SELECT ranges FROM download WHERE url LIKE '%/pieces.img'")
                }
                let text = try #require(stored, "the download has no row")
                let ranges = try #require(ByteRanges(parsing: text))
                seen = (status["bitfield"], ranges)
                return status["bitfield"] == .string(Self.bitfield(ranges, total: 8 << 20)) ? (status, ranges) : nil
            }
            let (status, ranges) = try #require(polled, "tellStatus's bitfield and the store's ranges: \(seen)")
            let expected = Self.bitfield(ranges, total: 8 << 20)
            #expect(status["numPieces"] == "8" && status["pieceLength"] == "1048576")
            #expect(expected != "00" && expected != "ff", "paused partway with whole pieces on disk: \(ranges)")
            let have = expected.compactMap { $0.hexDigitValue }.map { $0.nonzeroBitCount }.reduce(0, +)
            try await page.waitFor(
                "document.getElementById('detailPiecesText').textContent",
                toBe: .string("\(have) of 8 pieces of 1.00 MiB each"))
        }
    }

    @Test(.enabled(if: chromium != nil || isCI))
    func settingsChangedOnThePageSurviveARestart() async throws {
        let chromium = try #require(Self.chromium)
        let dir = try TestDirectory()
        defer { dir.remove() }
        let arguments = ["--rpc-secret", Self.secret, "-d", dir.file("downloads")]
        let browser = try Browser(chromium, profile: dir.file("chromium"))
        defer { browser.stop() }
        let field: @Sendable (String) -> String = { name in "document.querySelector('#settingsForm [name=\"\(name)\"]').value" }
        try await DaemonProcess.with(state: dir.file("state"), in: dir.path, arguments + ["-q"]) { daemon in
            try await browser.withPage { page in
                try await open(page, daemon)
                try await waitConnected(page)
                try await page.click("#openSettings")
                try await page.waitFor("document.getElementById('settings').dataset.loaded", toBe: "true")
                #expect(try await page.evaluate(field("max-overall-download-limit")) == "0")
                try await page.type("3", into: "#settingsForm [name=\"max-concurrent-downloads\"]")
                try await page.type("600K", into: "#settingsForm [name=\"max-overall-download-limit\"]")
                try await page.type("7", into: "#settingsForm [name=\"max-tries\"]")
                try await page.click("#settingsSave")
                try await page.waitFor("document.getElementById('settingsMsg').textContent.startsWith('Saved')", toBe: true)
                // Shown as typed, not as 614400.
                try await page.waitFor(field("max-overall-download-limit"), toBe: "600K")
            }
            #expect(try await daemon.stop() == 0)
        }
        // Started again: the saved settings apply, except one the command line gives.
        try await DaemonProcess.with(state: dir.file("state"), in: dir.path, arguments + ["-j", "4"]) { daemon in
            let options = try await daemon.call("aria2.getGlobalOption")
            #expect(options["max-tries"] == "7")
            #expect(options["max-overall-download-limit"] == "614400")
            #expect(options["max-concurrent-downloads"] == "4", "-j on the command line wins")
            let overridden = try await daemon.logLines(containing: "max-concurrent-downloads", "not applied", "command line")
            #expect(overridden.count == 1, "\(daemon.log)")
            try await browser.withPage { page in
                try await open(page, daemon)
                try await waitConnected(page)
                try await page.click("#openSettings")
                try await page.waitFor("document.getElementById('settings').dataset.loaded", toBe: "true")
                #expect(try await page.evaluate(field("max-tries")) == "7")
                #expect(try await page.evaluate(field("max-overall-download-limit")) == "600K")
            }
            #expect(try await daemon.stop() == 0)
        }
    }
}

extension WebPageTests {
    @Test(.enabled(if: chromium != nil || isCI))
    func showsTheDaemonsMirrorsALineEachAndRunsOrRemovesThem() async throws {
        try await withPage { server, daemon, _, page in
            let files = MirrorTests.serveTree(on: server, count: 4, size: 1000)
            try await open(page, daemon)
            try await waitConnected(page)
            #expect(try await page.evaluate("document.getElementById('mirrors').hidden") == true)
            let id = try #require(
                try await daemon.call("haul.addMirror", [.string(server.url("/tree/")), ["dir": "tree", "every": "1h"]]).string)
            let item = "document.querySelector('#mirrorList [data-mirror=\"\(id)\"]')"
            try await page.waitFor("document.getElementById('mirrors').hidden", toBe: false)
            try await page.waitFor("\(item).textContent.includes('\(files.count) new, 0 updated, 0 unchanged')", toBe: true)
            #expect(try await page.evaluate("\(item).textContent.includes('next run in')") == true)
            #expect(try await page.evaluate("\(item).textContent.includes('\(server.url("/tree/"))')") == true)

            // Run now: the second run finds every file unchanged.
            try await page.click("#mirrorList [data-mirror=\"\(id)\"] button[data-action=\"runMirror\"]")
            try await page.waitFor("\(item).textContent.includes('0 new, 0 updated, \(files.count) unchanged')", toBe: true)
            // Remove: gone from the page and from the daemon; the files stay.
            try await page.click("#mirrorList [data-mirror=\"\(id)\"] button[data-action=\"removeMirror\"]")
            try await page.waitFor("document.getElementById('mirrors').hidden", toBe: true)
            #expect(try await daemon.call("haul.tellMirrors") == [])
        }
    }

    @Test(.enabled(if: chromium != nil || isCI))
    func showsTheDaemonsUploadsALineEachAndResumesOrRemovesThem() async throws {
        let uploads = try await ResumableUploadTestServer.start()
        try await withPage { _, daemon, dir, page in
            try dir.write("up.bin", testBytes(1 << 20, seed: 73))
            try await open(page, daemon)
            try await waitConnected(page)
            #expect(try await page.evaluate("document.getElementById('uploads').hidden") == true)
            let gid = try #require(
                try await daemon.call("haul.addUpload", [.string(dir.file("up.bin")), .string(uploads.url("up.bin")), ["pause": "true"]])
                    .string)
            let item = "document.querySelector('#uploadList [data-upload=\"\(gid)\"]')"
            try await page.waitFor("document.getElementById('uploads').hidden", toBe: false)
            try await page.waitFor("\(item).textContent.includes('Paused')", toBe: true)
            #expect(try await page.evaluate("\(item).textContent.includes('\(dir.file("up.bin"))')") == true)
            // Resume: it is sent, all of it.
            try await page.click("#uploadList [data-upload=\"\(gid)\"] button[data-action=\"resume\"]")
            try await page.waitFor("\(item).textContent.includes('Sent')", toBe: true)
            #expect(try await page.evaluate("\(item).textContent.includes('1.00 MiB of 1.00 MiB')") == true)
            // Remove: gone from the page and from the daemon.
            try await page.click("#uploadList [data-upload=\"\(gid)\"] button[data-action=\"remove\"]")
            try await page.waitFor("document.getElementById('uploads').hidden", toBe: true)
            #expect(try await daemon.call("haul.tellUploads") == [])
        }
        await uploads.stop()
    }
}
