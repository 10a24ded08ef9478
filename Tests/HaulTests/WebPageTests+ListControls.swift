import Foundation
import HaulDaemon
import HaulTestSupport
import Testing

/// The list's controls for many rows at once: Undo after a remove, selecting several, compact
/// rows, the pagers with a page jump, and the add form starting afresh.
extension WebPageTests {
    /// Height in CSS pixels of the first row.
    static let firstRowHeight = "document.querySelector('#list [data-gid]').getBoundingClientRect().height"

    @Test(.enabled(if: chromium != nil || isCI))
    func removeWaitsForUndoAndTheAddFormStartsAfresh() async throws {
        try await withPage(["-x", "1"]) { server, daemon, dir, page in
            var slow = Route(content: testBytes(4 << 20, seed: 21))
            slow.bytesPerSecond = 128 << 10
            server.serve("/keep.iso", slow)
            server.serve("/later.iso", slow)
            try await open(page, daemon)
            try await waitConnected(page)

            // Added paused: the next add is not paused unless ticked again.
            try await page.click("#addPaused")
            try await page.type(server.url("/later.iso"), into: "#urls")
            try await page.click("#addBtn")
            let later = try await gid(ofRowNamed: "later.iso", page)
            try await waitForStatus(later, ["paused"], page, daemon)
            #expect(try await page.evaluate("document.getElementById('addPaused').checked") == false)
            #expect(try await page.evaluate("document.getElementById('urls').value") == "")

            try await page.type(server.url("/keep.iso"), into: "#urls")
            try await page.click("#addBtn")
            let gid = try await gid(ofRowNamed: "keep.iso", page)
            try await waitForStatus(gid, ["active"], page, daemon)
            _ = try await daemon.waitFor(gid) { Int($0["completedLength"]?.string ?? "") ?? 0 > 0 }

            // Remove: the row goes at once, the daemon is not told yet, and Undo brings it back.
            try await page.click(row(gid, "remove"))
            try await page.waitFor("document.getElementById('undo').hidden", toBe: false)
            #expect(try await page.text("#undoText") == "Removed keep.iso")
            #expect(try await rowStatus(gid, page) == nil)
            #expect(await daemonStatus(gid, daemon) == "active")
            try await page.click("#undoBtn")
            try await page.waitFor("document.getElementById('undo').hidden", toBe: true)
            try await waitForStatus(gid, ["active"], page, daemon)
            // Past the bar's 8 seconds, nothing was removed and the partial is still there.
            try await Task.sleep(for: .seconds(9))
            #expect(await daemonStatus(gid, daemon) == "active")
            #expect(FileManager.default.fileExists(atPath: dir.file("downloads/keep.iso.part")))

            // Without Undo, the remove reaches the daemon when the bar goes.
            try await page.click(row(later, "remove"))
            try await page.waitFor("document.getElementById('undoText').textContent", toBe: "Removed later.iso")
            #expect(await daemonStatus(later, daemon) == "paused")
            _ = try await page.poll(timeout: .seconds(15)) { () async throws -> Bool? in await daemonStatus(later, daemon) == nil ? true : nil }
            #expect(try await page.evaluate("document.getElementById('undo').hidden") == true)
            #expect(await daemonStatus(gid, daemon) == "active", "only the removed one went")
        }
    }

    @Test(.enabled(if: chromium != nil || isCI))
    func selectsSeveralJumpsToAPageAndShowsCompactRows() async throws {
        try await withPage { server, daemon, _, page in
            var slow = Route(content: testBytes(1 << 20, seed: 22))
            slow.bytesPerSecond = 32 << 10
            let calls: [JSONValue] = (0..<120).map { i in
                server.serve("/set/\(i).bin", slow)
                return [
                    "methodName": "aria2.addUri",
                    "params": daemon.tokenParams([[.string(server.url("/set/\(i).bin"))], ["pause": "true"]]),
                ]
            }
            let added = try await daemon.call("system.multicall", [.array(calls)])
            let gids = (added.array ?? []).compactMap { $0.array?.first?.string }
            #expect(gids.count == 120)
            try await open(page, daemon)
            try await waitConnected(page)
            try await page.waitFor("document.getElementById('range').textContent", toBe: "1–50 of 120")

            // A pager above the list too, and a jump to a page by its number.
            #expect(try await page.isVisible("#pagerTop"))
            #expect(try await page.text("#pagerTop .page-text") == "Page 1 of 3")
            try await page.type("3", into: "#pagerTop .page-input")
            _ = try await page.evaluate("document.querySelector('#pagerTop form.jump').requestSubmit()")
            try await page.waitFor("document.getElementById('range').textContent", toBe: "101–120 of 120")
            try await page.waitFor("document.getElementById('pageText').textContent", toBe: "Page 3 of 3")
            try await page.type("1", into: "#pager .page-input")
            _ = try await page.evaluate("document.querySelector('#pager form.jump').requestSubmit()")
            try await page.waitFor("document.getElementById('range').textContent", toBe: "1–50 of 120")

            // Compact rows: at most 40 px, and still so after a reload.
            #expect(try await page.evaluate("\(Self.firstRowHeight) > 40") == true, "rows are roomy until asked")
            try await page.click("#compact")
            try await page.waitFor("\(Self.firstRowHeight) <= 40", toBe: true)
            _ = try await page.send("Page.reload")
            try await waitConnected(page)
            try await page.waitFor("document.querySelectorAll('#list [data-gid]').length", toBe: 50)
            try await page.waitFor("\(Self.firstRowHeight) <= 40", toBe: true)
            #expect(try await page.evaluate("document.getElementById('compact').getAttribute('aria-pressed')") == "true")

            // Select all on the page, then clear.
            try await page.click("#selectAll")
            try await page.waitFor("document.getElementById('batchCount').textContent", toBe: "50 selected")
            #expect(try await page.evaluate("document.querySelectorAll('#list input.sel:checked').length") == 50)
            try await page.click("#batchClear")
            try await page.waitFor("document.getElementById('batch').hidden", toBe: true)

            // Three ticked: resumed, paused and removed together.
            let three = Array(gids.prefix(3))
            for gid in three { try await page.click("#list [data-gid=\"\(gid)\"] input.sel") }
            try await page.waitFor("document.getElementById('batchCount').textContent", toBe: "3 selected")
            try await page.click("#batchResume")
            for gid in three { try await waitForStatus(gid, ["active", "waiting"], page, daemon) }
            #expect(await daemonStatus(gids[3], daemon) == "paused", "only the selected ones")
            try await page.click("#batchPause")
            for gid in three { try await waitForStatus(gid, ["paused"], page, daemon) }
            try await page.click("#batchRemove")
            try await page.waitFor("document.getElementById('undoText').textContent", toBe: "Removed 3 downloads")
            try await page.click("#undoBtn")
            try await page.waitFor("document.querySelectorAll('#list [data-gid]').length", toBe: 50)
            for gid in three { try await page.click("#list [data-gid=\"\(gid)\"] input.sel") }
            try await page.click("#batchRemove")
            _ = try await page.poll(timeout: .seconds(20)) { () async throws -> Bool? in
                var gone = true
                for gid in three where await daemonStatus(gid, daemon) != nil { gone = false }
                return gone ? true : nil
            }
            try await page.waitFor("document.getElementById('range').textContent", toBe: "1–50 of 117")
            #expect(await daemonStatus(gids[3], daemon) == "paused")
        }
    }
}
