import AsyncHTTPClient
import Foundation
@testable import HaulDaemon
import NIOCore
import Testing

/// The web page's files, compiled into the binary by the EmbedWebAssets build plugin, as the
/// daemon serves them: types, validators, caching and the Content-Security-Policy.
@Suite struct WebAssetsTests {
    @Test(arguments: [
        (#""abc""#, true), (#"W/"abc""#, true), (#""x", "abc""#, true), (#""x",W/"abc""#, true), ("*", true),
        (#""abcd""#, false), ("abc", false), ("", false), (#""x""#, false),
    ])
    func ifNoneMatchComparesWeakly(header: String, matches: Bool) {
        #expect(WebAssets.matches(header, etag: #""abc""#) == matches)
    }

    @Test func theBuildEmbedsEveryFileUnderItsHash() throws {
        let names = Set(WebAssets.embedded.map(\.name))
        #expect(names.isSuperset(of: ["index.html", "app.css", "app.js", "rpc.js", "icon.svg"]))
        let page = String(decoding: try #require(WebAssets.served["/"]).body.readableBytesView, as: UTF8.self)
        for asset in WebAssets.embedded {
            let served = try #require(WebAssets.served[asset.urlPath], "\(asset.name) is served")
            // The build tool's own SHA-256 agrees with swift-crypto's.
            #expect(asset.hash == sha256Hex(Array(served.body.readableBytesView)), "\(asset.name)")
            guard asset.name != "index.html" else { continue }
            #expect(asset.urlPath.hasPrefix("/assets/") && asset.urlPath.contains(".\(asset.hash.prefix(16))."), "\(asset.urlPath)")
            #expect(page.contains("\"\(asset.urlPath)\""), "index.html names \(asset.name) by its hashed URL")
            #expect(!page.contains("\"\(asset.name)\""), "index.html has no unhashed reference to \(asset.name)")
        }
    }

    /// GETs `url`; the answer's headers by lowercased name.
    func get(_ url: String, headers: [(String, String)] = []) async throws -> (status: UInt, headers: [String: [String]], body: ByteBuffer) {
        var request = HTTPClientRequest(url: url)
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let fields = Dictionary(grouping: response.headers, by: { $0.name.lowercased() }).mapValues { $0.map(\.value) }
        return (response.status.code, fields, try await response.body.collect(upTo: 4 << 20))
    }

    @Test func theDaemonServesThemWithTypesCachingAndPolicy() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try await DaemonProcess.with(state: dir.file("state"), in: dir.path, ["--rpc-secret", "s3"]) { daemon in
            let base = "http://127.0.0.1:\(daemon.endpoint.port)"
            // The page itself needs no secret: it asks for one.
            let page = try await get(base + "/")
            #expect(page.status == 200)
            #expect(page.headers["content-type"] == ["text/html; charset=utf-8"])
            #expect(page.headers["cache-control"] == ["no-cache"])
            let policy = try #require(page.headers["content-security-policy"]?.first)
            for directive in [
                "default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "img-src 'self'",
                "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'", "require-trusted-types-for 'script'",
            ] {
                #expect(policy.contains(directive), "\(policy)")
            }
            #expect(!policy.contains("unsafe"))
            #expect(page.headers["x-content-type-options"] == ["nosniff"])
            #expect(page.headers["referrer-policy"] == ["no-referrer"])
            let html = String(buffer: page.body)
            #expect(html.contains("<script defer src=\"/assets/app."))
            #expect(!html.contains("<style") && !html.contains(" style="))

            let pageTag = try #require(page.headers["etag"]?.first)
            #expect(pageTag.hasPrefix("\"") && pageTag.count > 16)
            let revalidated = try await get(base + "/", headers: [("If-None-Match", pageTag)])
            #expect(revalidated.status == 304 && revalidated.body.readableBytes == 0)
            #expect(revalidated.headers["etag"] == [pageTag] && revalidated.headers["cache-control"] == ["no-cache"])
            #expect(try await get(base + "/", headers: [("If-None-Match", "W/\(pageTag)")]).status == 304)
            #expect(try await get(base + "/", headers: [("If-None-Match", #""stale""#)]).status == 200)

            let types = ["css": "text/css; charset=utf-8", "js": "text/javascript; charset=utf-8", "svg": "image/svg+xml"]
            let linked = html.matches(of: /"(\/assets\/[^"]+)"/).map { String($0.1) }
            #expect(linked.count >= 8, "\(linked)")
            for path in linked {
                let asset = try await get(base + path)
                #expect(asset.status == 200, "\(path)")
                let ext = String(path.split(separator: ".").last ?? "")
                #expect(asset.headers["content-type"] == [types[ext] ?? "?"], "\(path)")
                #expect(asset.headers["cache-control"] == ["public, max-age=31536000, immutable"], "\(path)")
                #expect(asset.headers["x-content-type-options"] == ["nosniff"], "\(path)")
                // The name carries the content's hash, so the long caching is safe.
                let hash = sha256Hex(Array(asset.body.readableBytesView))
                #expect(path.contains(".\(hash.prefix(16)).") && asset.headers["etag"] == ["\"\(hash.prefix(32))\""], "\(path)")
                let again = try await get(base + path, headers: [("If-None-Match", "\"\(hash.prefix(32))\"")])
                #expect(again.status == 304 && again.body.readableBytes == 0, "\(path)")
            }
            #expect(try await get(base + "/assets/app.0000000000000000.js").status == 404)
            #expect(try await daemon.stop() == 0)
        }
    }
}
