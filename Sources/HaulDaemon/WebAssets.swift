import Foundation
import Hummingbird
import NIOCore

/// The web page's files (`Sources/HaulDaemon/WebAssets`), compiled into the binary by the
/// `EmbedWebAssets` build plugin (see `WebAssets+Embedded.swift` in the build folder), served
/// with validators, caching and a Content-Security-Policy that allows no inline code.
///
/// `/` is `index.html`, revalidated on every load (`no-cache`); it names the other files by
/// URLs that carry their hash (`/assets/app.1f2e3d4c5b6a7980.js`), which never change content
/// and may be kept for a year. Every answer carries an `ETag`, and `If-None-Match` gets a 304.
enum WebAssets {
    /// One file as the build tool wrote it.
    struct Asset: Sendable {
        let name: String
        let urlPath: String
        let contentType: String
        /// SHA-256 of the served bytes, in hex.
        let hash: String
        let base64: String
    }

    /// Only this daemon's own scripts, styles, images and connections (HTTP and WebSocket); no
    /// inline code, no strings turned into HTML, no framing by another page.
    static let contentSecurityPolicy = [
        "default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "img-src 'self'",
        "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'", "require-trusted-types-for 'script'",
    ].joined(separator: "; ")

    /// An asset ready to send: decoded once, with the headers every answer for it carries.
    struct Served: Sendable {
        let body: ByteBuffer
        let etag: String
        let headers: HTTPFields
    }

    /// Every asset by its URL path, decoded on first use.
    static let served: [String: Served] = Dictionary(
        uniqueKeysWithValues: embedded.map { asset in
            guard let bytes = Data(base64Encoded: asset.base64) else {
                preconditionFailure("WebAssets+Embedded.swift holds bad base64 for \(asset.name); rebuild")
            }
            let etag = "\"\(asset.hash.prefix(32))\""
            let headers: HTTPFields = [
                .contentType: asset.contentType,
                .eTag: etag,
                // The page is revalidated on every load; a hashed URL's content never changes.
                .cacheControl: asset.urlPath == "/" ? "no-cache" : "public, max-age=31536000, immutable",
                .contentSecurityPolicy: contentSecurityPolicy,
                .xContentTypeOptions: "nosniff",
                .referrerPolicy: "no-referrer",
                .crossOriginOpenerPolicy: "same-origin",
                .crossOriginResourcePolicy: "same-origin",
            ]
            return (asset.urlPath, Served(body: ByteBuffer(bytes: bytes), etag: etag, headers: headers))
        })

    /// Answers `GET /` and `GET /assets/NAME` from the embedded files.
    static func addRoutes<Context: RequestContext>(to router: Router<Context>) {
        router.get("/") { request, _ in response(for: "/", request) }
        router.get("/assets/:name") { request, context in
            response(for: "/assets/" + (context.parameters.get("name") ?? ""), request)
        }
    }

    static func response(for path: String, _ request: Request) -> Response {
        guard let asset = served[path] else {
            return Response(
                status: .notFound, headers: [.contentType: "text/plain; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: "no such file: reload the page\n")))
        }
        let conditions = request.headers[values: .ifNoneMatch]
        if !conditions.isEmpty, conditions.contains(where: { matches($0, etag: asset.etag) }) {
            // RFC 9110 §15.4.5: a 304 carries the validators and caching headers a 200 would.
            var headers = asset.headers
            headers[.contentType] = nil
            return Response(status: .notModified, headers: headers)
        }
        return Response(status: .ok, headers: asset.headers, body: .init(byteBuffer: asset.body))
    }

    /// Whether an `If-None-Match` value (`*` or a list of entity tags) names `etag`. The
    /// comparison is weak (RFC 9110 §13.1.2): `W/"x"` matches `"x"`.
    static func matches(_ header: String, etag: String) -> Bool {
        let wanted = etag.hasPrefix("W/") ? String(etag.dropFirst(2)) : etag
        return header.split(separator: ",").contains { tag in
            let tag = tag.trimmingCharacters(in: .whitespaces)
            return tag == "*" || (tag.hasPrefix("W/") ? String(tag.dropFirst(2)) : tag) == wanted
        }
    }
}

/// Names HTTPTypes lacks (reached through `HTTPFields`, the one HTTPTypes type Hummingbird exports).
extension HTTPFields.Element.Name {
    static let referrerPolicy = Self("Referrer-Policy")!
    static let crossOriginOpenerPolicy = Self("Cross-Origin-Opener-Policy")!
}
