import Foundation
import HaulDaemon
import HaulTestSupport
import Testing

/// The daemon's web page in headless Chromium, driven through its own controls (clicks and
/// typing dispatched as DOM events), each step checked on the page and in the daemon.
/// Skipped where Chromium is missing, except in CI.
@Suite(.serialized) struct WebPageTests {
    static let isCI = ProcessInfo.processInfo.environment["CI"] != nil
    static var chromium: String? { Browser.executable }
    static let secret = "pagesecret"

    /// A fault server, a daemon with a secret that downloads into `downloads/`, and Chromium
    /// with one blank page; all stopped however `body` ends.
    func withPage(
        _ arguments: [String] = [],
        _ body: @escaping @Sendable (FaultServer, DaemonProcess, TestDirectory, Page) async throws -> Void
    ) async throws {
        let chromium = try #require(Self.chromium, "install Debian's chromium (scripts/install-deps.sh --with-test-servers)")
        let dir = try TestDirectory()
        defer { dir.remove() }
        try await FaultServer.withServer { server in
            let daemonArguments = ["--rpc-secret", Self.secret, "-d", dir.file("downloads"), "-q"] + arguments
            try await DaemonProcess.with(state: dir.file("state"), in: dir.path, daemonArguments) { daemon in
                let browser = try Browser(chromium, profile: dir.file("chromium"))
                defer { browser.stop() }
                try await browser.withPage { page in
                    _ = try await page.send("Page.enable")
                    _ = try await page.send("Page.addScriptToEvaluateOnNewDocument", ["source": .string(Self.watcher)])
                    try await body(server, daemon, dir, page)
                    let problems = try await page.evaluate("JSON.stringify(window.__problems)")
                    #expect(problems == "[]", "the page broke no rule and threw nothing")
                }
                #expect(try await daemon.stop() == 0)
            }
        }
    }

    /// Run before the page's own scripts (DevTools scripts are exempt from its policy): keeps
    /// every Content-Security-Policy violation and uncaught error.
    static let watcher = """
        window.__problems = [];
        document.addEventListener("securitypolicyviolation", e => window.__problems.push("CSP " + e.violatedDirective + " " + e.blockedURI));
        window.addEventListener("error", e => window.__problems.push("error " + e.message));
        window.addEventListener("unhandledrejection", e => window.__problems.push("rejection " + (e.reason && e.reason.message)));
        """

    /// Opens the daemon's page, with the secret in the address (as `haul daemon` prints it) or without.
    func open(_ page: Page, _ daemon: DaemonProcess, withSecret: Bool = true) async throws {
        let url = withSecret ? daemon.endpoint.pageURL : "http://127.0.0.1:\(daemon.endpoint.port)/"
        _ = try await page.send("Page.navigate", ["url": .string(url)])
    }

    func waitConnected(_ page: Page) async throws {
        try await page.waitFor("document.body.dataset.connected", toBe: "true")
    }

    /// The selector of a row's button.
    func row(_ gid: String, _ action: String) -> String { "#list [data-gid=\"\(gid)\"] button[data-action=\"\(action)\"]" }

    /// The GID of the row whose name contains `name` (and is not `except`), once there is one.
    func gid(ofRowNamed name: String, except: String? = nil, _ page: Page) async throws -> String {
        try await page.poll(timeout: .seconds(20)) { () async throws -> String? in
            try? await page.evaluate(
                """
                [...document.querySelectorAll("#list [data-gid]")]
                  .filter(r => r.querySelector(".name").textContent.includes(\(Page.literal(name))) && r.dataset.gid !== \(Page.literal(except ?? "")))
                  .map(r => r.dataset.gid)[0] || null
                """
            ).string
        }
    }

    func rowStatus(_ gid: String, _ page: Page) async throws -> String? {
        try? await page.evaluate("(r => r ? r.dataset.status : null)(document.querySelector('#list [data-gid=\"\(gid)\"]'))").string
    }

    /// The daemon's status word for `gid`, or nil once it no longer knows it.
    func daemonStatus(_ gid: String, _ daemon: DaemonProcess) async -> String? {
        try? await daemon.call("aria2.tellStatus", [.string(gid), ["status"]])["status"]?.string
    }

    /// Waits until the page's row and the daemon both say one of `statuses`.
    func waitForStatus(
        _ gid: String, _ statuses: Set<String>, _ page: Page, _ daemon: DaemonProcess,
        timeout: Duration = .seconds(20)
    ) async throws {
        var seen: (page: String?, daemon: String?) = (nil, nil)
        do {
            _ = try await page.poll(timeout: timeout) { () async throws -> Bool? in
                seen = (try await rowStatus(gid, page), await daemonStatus(gid, daemon))
                return seen.page.map(statuses.contains) == true && seen.daemon.map(statuses.contains) == true ? true : nil
            }
        } catch {
            Issue.record("\(gid): waited for \(statuses.sorted()); the page says \(seen.page ?? "nothing"), the daemon \(seen.daemon ?? "nothing")")
            throw error
        }
    }

    // MARK: The secret

    @Test(.enabled(if: chromium != nil || isCI))
    func asksForTheSecretBeforeShowingAnyNumber() async throws {
        try await withPage { server, daemon, _, page in
            // Something to count, so a number shown too early would be seen.
            try await daemon.call("aria2.addUri", [[.string(server.url("/waiting.bin"))], ["pause": "true"]])
            try await open(page, daemon, withSecret: false)
            let sample = """
                !document.getElementById("toast") ? "" : JSON.stringify({ auth: document.body.dataset.auth,
                  prompt: document.getElementById("auth").getClientRects().length > 0,
                  list: document.getElementById("app").getClientRects().length > 0,
                  stats: document.getElementById("stats").getClientRects().length > 0,
                  rows: document.querySelectorAll("#list [data-gid]").length })
                """
            var samples: [String] = []
            _ = try await page.poll(timeout: .seconds(20)) { () async throws -> Bool? in
                // Nothing until the document has been parsed.
                let state = (try? await page.evaluate(sample).string) ?? ""
                if !state.isEmpty { samples.append(state) }
                return state.contains(#""prompt":true"#) ? true : nil
            }
            // From the first paint to the prompt: no list, no counts, no rows.
            for state in samples {
                #expect(state.contains(#""list":false"#) && state.contains(#""stats":false"#) && state.contains(#""rows":0"#), "\(state)")
            }
            #expect(try await page.text("#connText") == "Secret needed")

            try await page.type("wrong", into: "#authInput")
            try await page.click("#authSubmit")
            try await page.waitFor("document.getElementById('authHint').textContent.includes('not accepted')", toBe: true)
            #expect(try await page.isVisible("#app") == false)
            #expect(try await page.evaluate("document.querySelectorAll('#list [data-gid]').length") == 0)

            try await page.type(Self.secret, into: "#authInput")
            try await page.click("#authSubmit")
            try await waitConnected(page)
            try await page.waitFor("document.getElementById('countWaiting').textContent", toBe: "1")
            #expect(try await page.isVisible("#app"))
            #expect(try await page.isVisible("#stats"))
            #expect(try await page.isVisible("#auth") == false)
            try await page.waitFor("document.querySelectorAll('#list [data-gid]').length", toBe: 1)

            // The secret is remembered: a reload shows the list without asking.
            _ = try await page.send("Page.reload")
            try await page.waitFor("document.body.dataset.auth", toBe: "ok")
            #expect(try await page.isVisible("#auth") == false)
        }
    }

    // MARK: Controls

    @Test(.enabled(if: chromium != nil || isCI))
    func addsPausesResumesAndRemoves() async throws {
        try await withPage(["-x", "1"]) { server, daemon, _, page in
            var slow = Route(content: testBytes(4 << 20, seed: 11))
            slow.bytesPerSecond = 256 << 10
            server.serve("/slow.iso", slow)
            try await open(page, daemon)
            try await waitConnected(page)

            try await page.type(server.url("/slow.iso"), into: "#urls")
            try await page.click("#addBtn")
            let gid = try await gid(ofRowNamed: "slow.iso", page)
            try await waitForStatus(gid, ["active"], page, daemon)
            #expect(try await page.evaluate("document.getElementById('urls').value") == "")
            #expect(
                try await daemon.call("aria2.tellStatus", [.string(gid), ["files"]])["files"]?[0]?["uris"]?[0]?["uri"]
                    == .string(server.url("/slow.iso")))

            try await page.click(row(gid, "pause"))
            try await waitForStatus(gid, ["paused"], page, daemon)
            #expect(try await page.text("#list [data-gid=\"\(gid)\"] .badge") == "Paused")

            try await page.click(row(gid, "resume"))
            try await waitForStatus(gid, ["active", "waiting"], page, daemon)

            // An unfinished download is cancelled (aria2 lists it as removed), then taken off the list.
            try await page.click(row(gid, "remove"))
            try await waitForStatus(gid, ["removed"], page, daemon)
            try await page.click(row(gid, "remove"))
            _ = try await page.poll(timeout: .seconds(20)) { () async throws -> Bool? in
                let gone = try await rowStatus(gid, page) == nil
                return gone ? (await daemonStatus(gid, daemon) == nil ? true : nil) : nil
            }
        }
    }

    @Test(.enabled(if: chromium != nil || isCI))
    func retriesAFailedDownloadWithItsOptions() async throws {
        try await withPage { server, daemon, dir, page in
            var later = Route(content: testBytes(300 << 10, seed: 12))
            later.status = 404
            server.serve("/later.bin", later)
            try await open(page, daemon)
            try await waitConnected(page)

            try await page.type(dir.file("elsewhere"), into: "#dir")
            try await page.type(server.url("/later.bin"), into: "#urls")
            try await page.click("#addBtn")
            let failed = try await gid(ofRowNamed: "later.bin", page)
            try await waitForStatus(failed, ["error"], page, daemon)
            #expect(try await page.text("#list [data-gid=\"\(failed)\"] .err")?.contains("404") == true)

            // The detail view shows the error.
            try await page.click(row(failed, "details"))
            try await page.waitFor("document.getElementById('detail').dataset.for", toBe: .string(failed))
            try await page.waitFor("document.getElementById('detailFacts').textContent.includes('404')", toBe: true)
            // No file was made: the File line says why rather than "not known until the server answers".
            #expect(try await page.evaluate("document.getElementById('detailFacts').textContent.includes('Filenone: ')") == true)
            #expect(try await page.evaluate("document.getElementById('detailFacts').textContent.includes('not known')") == false)
            try await page.click("#detail [data-close]")
            try await page.waitFor("document.getElementById('detail').open", toBe: false)

            // The server has the file now: Retry adds the URL again with the old options.
            server.update("/later.bin") { $0.status = nil }
            try await page.click(row(failed, "retry"))
            let retried = try await gid(ofRowNamed: "later.bin", except: failed, page)
            try await waitForStatus(retried, ["complete"], page, daemon)
            try await page.waitFor("document.querySelector('#list [data-gid=\"\(retried)\"]').dataset.percent", toBe: "100")
            #expect(await daemonStatus(failed, daemon) == nil, "the failed download's result is removed")
            #expect(try await rowStatus(failed, page) == nil)
            #expect(try await daemon.call("aria2.getOption", [.string(retried)])["dir"] == .string(dir.file("elsewhere")))
            #expect(dir.contents("elsewhere/later.bin") == later.content)
        }
    }

    @Test(.enabled(if: chromium != nil || isCI))
    func showsDetailsAndChangesLimitsAndSettings() async throws {
        try await withPage(["-x", "2"]) { server, daemon, dir, page in
            var slow = Route(content: testBytes(8 << 20, seed: 13))
            slow.bytesPerSecond = 512 << 10
            server.serve("/big.img", slow)
            let gid = try #require(try await daemon.call("aria2.addUri", [[.string(server.url("/big.img"))]]).string)
            try await open(page, daemon)
            try await waitConnected(page)
            try await waitForStatus(gid, ["active"], page, daemon)

            try await page.click(row(gid, "details"))
            try await page.waitFor("document.getElementById('detail').open", toBe: true)
            try await page.waitFor("document.getElementById('detail').dataset.for", toBe: .string(gid))
            let facts = "document.getElementById('detailFacts').textContent"
            try await page.waitFor("\(facts).includes(\(Page.literal(dir.file("downloads/big.img"))))", toBe: true)
            try await page.waitFor("\(facts).includes('Connections')", toBe: true)
            #expect(try await page.text("#detailFacts")?.contains("8.00 MiB") == true)
            #expect(try await page.text("#detailUris")?.contains(server.url("/big.img")) == true)
            // Drawn from each status as it arrives: an early one may not count the pieces yet (flaky under load).
            try await page.waitFor("document.getElementById('detailPiecesText').textContent.includes('of 8 pieces')", toBe: true)
            try await page.waitFor("document.getElementById('detailOptions').textContent.includes('Speed limitno limit')", toBe: true)

            // Its own speed limit.
            try await page.type("100K", into: "#limitInput")
            try await page.click("#limitSave")
            try await page.waitFor("document.getElementById('detail').dataset.limit", toBe: "102400")
            #expect(try await daemon.call("aria2.getOption", [.string(gid)])["max-download-limit"] == "102400")
            #expect(try await page.text("#limitMsg")?.contains("Limited to 100 KiB/s") == true)
            try await page.waitFor("document.getElementById('detailOptions').textContent.includes('Speed limit100 KiB/s')", toBe: true)
            // A value the daemon refuses says why and changes nothing.
            try await page.type("fast", into: "#limitInput")
            try await page.click("#limitSave")
            try await page.waitFor("document.getElementById('limitMsg').textContent.startsWith('Not changed')", toBe: true)
            #expect(try await daemon.call("aria2.getOption", [.string(gid)])["max-download-limit"] == "102400")
            try await page.click("#detail [data-close]")
            try await page.waitFor("document.getElementById('detail').open", toBe: false)

            // Settings for every download: shown as the daemon has them, changed where edited.
            try await page.click("#openSettings")
            try await page.waitFor("document.getElementById('settings').dataset.loaded", toBe: "true")
            let field = { (name: String) in "document.querySelector('#settingsForm [name=\"\(name)\"]').value" }
            let before = try await daemon.call("aria2.getGlobalOption")
            #expect(try await page.evaluate(field("split")) == before["split"])
            #expect(try await page.evaluate(field("dir")) == .string(dir.file("downloads")))
            try await page.type("3", into: "#settingsForm [name=\"max-concurrent-downloads\"]")
            try await page.type("1M", into: "#settingsForm [name=\"max-overall-download-limit\"]")
            try await page.type("7", into: "#settingsForm [name=\"max-tries\"]")
            try await page.click("#settingsSave")
            try await page.waitFor("document.getElementById('settingsMsg').textContent.startsWith('Saved')", toBe: true)
            let after = try await daemon.call("aria2.getGlobalOption")
            #expect(after["max-concurrent-downloads"] == "3")
            #expect(after["max-overall-download-limit"] == "1048576")
            #expect(after["max-tries"] == "7")
            #expect(after["split"] == before["split"] && after["dir"] == before["dir"], "fields left alone are not sent")
            try await page.waitFor(field("max-overall-download-limit"), toBe: "1M")
            try await page.click("#settings [data-close]")
            try await page.waitFor("document.getElementById('settings').open", toBe: false)
        }
    }

    // MARK: Many downloads

    /// What one of the page's refreshes asked for and got, from the WebSocket frames Chromium saw.
    struct Refresh {
        var rowsAsked = 0
        var rowsReceived = 0
        var bytesReceived = 0
    }

    struct Traffic {
        var refreshes: [Refresh] = []
        /// Calls that asked for more rows than a page holds: reading the whole list for a search or sort.
        var wholeListReads: [JSONValue] = []
    }

    static func traffic(_ events: [Page.Event]) -> Traffic {
        func payload(_ event: Page.Event) -> JSONValue? {
            event.params["response"]?["payloadData"]?.string.flatMap { try? JSONValue.parse(Data($0.utf8)) }
        }
        var traffic = Traffic()
        var refreshIDs: [JSONValue: Int] = [:]
        for event in events {
            guard let message = payload(event) else { continue }
            if event.method == "Network.webSocketFrameSent" {
                let calls: [(method: String, params: [JSONValue])]
                if message["method"] == "system.multicall" {
                    calls = (message["params"]?[0]?.array ?? []).map { ($0["methodName"]?.string ?? "", $0["params"]?.array ?? []) }
                } else {
                    calls = [(message["method"]?.string ?? "", message["params"]?.array ?? [])]
                }
                var refresh = Refresh()
                for call in calls {
                    switch call.method {
                    case "aria2.tellWaiting", "aria2.tellStopped":
                        // [token, offset, num, keys]
                        let num = Int(call.params.count > 2 ? call.params[2].integer ?? 0 : 0)
                        refresh.rowsAsked += num
                        if num > 50 { traffic.wholeListReads.append(.array(call.params.dropFirst().map { $0 })) }
                    case "aria2.tellStatus": refresh.rowsAsked += 1
                    default: break
                    }
                }
                if calls.first?.method == "aria2.getGlobalStat", let id = message["id"] {
                    refreshIDs[id] = traffic.refreshes.count
                    traffic.refreshes.append(refresh)
                }
            } else if let id = message["id"], let index = refreshIDs[id] {
                traffic.refreshes[index].bytesReceived = (event.params["response"]?["payloadData"]?.string?.utf8.count) ?? 0
                for answer in message["result"]?.array ?? [] {
                    switch answer[0] {
                    case .array(let rows)?: traffic.refreshes[index].rowsReceived += rows.count
                    case .object(let row)? where row["gid"] != nil: traffic.refreshes[index].rowsReceived += 1
                    default: break
                    }
                }
            }
        }
        return traffic
    }

    @Test(.enabled(if: chromium != nil || isCI))
    func pagesThroughTwoThousandDownloadsFetchingOnlyWhatIsShown() async throws {
        try await withPage { server, daemon, _, page in
            // 2,000 paused downloads, added as a script would: multicalls of 500.
            for batch in 0..<4 {
                let calls: [JSONValue] = (0..<500).map { i in
                    let url = JSONValue.string(server.url("/many/\(batch * 500 + i).bin"))
                    return ["methodName": "aria2.addUri", "params": [.string("token:\(Self.secret)"), [url], ["pause": "true"]]]
                }
                let results = try await daemon.call("system.multicall", [.array(calls)])
                #expect(results.array?.count == 500 && results.array?.allSatisfy { $0.array != nil } == true, "\(results)")
            }
            _ = try await page.send("Network.enable")
            page.record(["Network.webSocketFrameSent", "Network.webSocketFrameReceived"])
            try await open(page, daemon)
            try await waitConnected(page)
            try await page.waitFor("document.getElementById('countWaiting').textContent", toBe: "2,000")
            try await page.waitFor("document.getElementById('range').textContent", toBe: "1–50 of 2,000")
            try await page.waitFor("document.querySelectorAll('#list [data-gid]').length", toBe: 50)
            #expect(try await page.text("#pageText") == "Page 1 of 40")
            let firstWaiting = try await daemon.call("aria2.tellWaiting", [0, 1, ["gid"]])[0]?["gid"]
            #expect(try await page.evaluate("document.querySelector('#list [data-gid]').dataset.gid") == firstWaiting)

            // Let it refresh a few times, then read what went over the WebSocket.
            let refreshes = "Number(document.body.dataset.refreshes)"
            let start = try await page.evaluate(refreshes).integer ?? 0
            try await page.waitFor("\(refreshes) >= \(start + 3)", toBe: true)
            var traffic = Self.traffic(page.events)
            #expect(traffic.refreshes.count >= 3)
            #expect(traffic.wholeListReads.isEmpty, "\(traffic.wholeListReads)")
            for refresh in traffic.refreshes {
                #expect(refresh.rowsAsked <= 50 && refresh.rowsReceived <= 50, "\(refresh)")
                #expect(refresh.bytesReceived < 64 << 10, "\(refresh)")
            }
            #expect(traffic.refreshes.contains { $0.rowsReceived == 50 })

            // The next page: the next 50 of the queue.
            try await page.click("#pager [data-page=\"next\"]")
            try await page.waitFor("document.getElementById('range').textContent", toBe: "51–100 of 2,000")
            let queue = try await daemon.call("aria2.tellWaiting", [50, 2, ["gid"]])
            let (fiftieth, fiftyFirst) = (try #require(queue[0]?["gid"]?.string), try #require(queue[1]?["gid"]?.string))
            try await page.waitFor("document.querySelector('#list [data-gid]').dataset.gid", toBe: .string(fiftieth))

            // Down one place in the queue, in the daemon and on the page.
            try await page.click(row(fiftieth, "down"))
            _ = try await page.poll(timeout: .seconds(10)) { () async throws -> Bool? in
                try await daemon.call("aria2.tellWaiting", [50, 2, ["gid"]]) == [["gid": .string(fiftyFirst)], ["gid": .string(fiftieth)]] ? true : nil
            }
            try await page.waitFor(
                "[...document.querySelectorAll('#list [data-gid]')].slice(0, 2).map(r => r.dataset.gid).join()",
                toBe: .string("\(fiftyFirst),\(fiftieth)"))

            // A search reads the whole list once, with only the keys it needs; refreshes stay small.
            let before = page.events.count
            try await page.type("1999.bin", into: "#search")
            try await page.waitFor("document.getElementById('range').textContent", toBe: "1–1 of 1")
            try await page.waitFor("document.querySelector('#list [data-gid] .name').textContent", toBe: "1999.bin")
            let searching = try await page.evaluate(refreshes).integer ?? 0
            try await page.waitFor("\(refreshes) >= \(searching + 3)", toBe: true)
            traffic = Self.traffic(Array(page.events[before...]))
            let reads = traffic.wholeListReads.compactMap(\.array)
            #expect(reads.map { $0[1] } == [1000, 1000, 1000, 1000], "one pass over the waiting and stopped lists: \(reads)")
            #expect(reads.allSatisfy { $0[2] == ["gid", "status", "files"] }, "\(reads)")
            for refresh in traffic.refreshes { #expect(refresh.rowsAsked <= 1 && refresh.rowsReceived <= 1, "\(refresh)") }

            // A sort over everything: names in reverse, numerically.
            try await page.type("", into: "#search")
            try await page.choose("name", in: "#sort")
            try await page.click("#order")
            try await page.waitFor("document.getElementById('range').textContent", toBe: "1–50 of 2,000")
            try await page.waitFor("document.querySelector('#list [data-gid] .name').textContent", toBe: "1999.bin")
            #expect(try await page.text("#list [data-gid]:nth-child(2) .name") == "1998.bin")
        }
    }
}

extension JSONValue {
    /// The element at `index` of an array.
    fileprivate subscript(index: Int) -> JSONValue? {
        guard let array, array.indices.contains(index) else { return nil }
        return array[index]
    }
}
