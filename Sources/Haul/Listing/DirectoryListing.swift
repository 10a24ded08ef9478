import Foundation

/// What one directory listing page of a web server holds: the files and folders directly
/// inside it.
///
/// A listing is hostile input. Only a link to a direct child of the page's own URL becomes an
/// entry: a link upward (`../`, the parent's absolute path), to another host or scheme, with a
/// query (Apache's `?C=N;O=D` sort links) or to a deeper path is left out, so a walk that
/// follows entries never leaves the tree it started in. Each entry's URL is rebuilt from the
/// decoded name with one canonical percent-encoding, whatever the page wrote, so two spellings
/// of one link are one entry.
///
/// Read by ``read(_:contentType:url:)``: nginx's `autoindex` (HTML, JSON, XML), Apache's
/// `mod_autoindex` (plain and fancy), lighttpd's `mod_dirlisting`, Caddy's `file_server browse`
/// (HTML and JSON) and Python's `http.server`.
package struct DirectoryListing: Sendable, Hashable {
    /// One file or folder in a listing.
    package struct Entry: Sendable, Hashable {
        /// The local name: percent-decoded, bytes that are not UTF-8 written as `%XX`, then
        /// sanitised as `haul get` sanitises a server's name.
        package var name: String
        /// The absolute URL, canonically percent-encoded; a folder's ends with `/`.
        package var url: String
        package var isDirectory: Bool

        package init(name: String, url: String, isDirectory: Bool) {
            self.name = name
            self.url = url
            self.isDirectory = isDirectory
        }
    }

    package var entries: [Entry] = []
    /// Links and names left out (outside the folder, queries, unusable names, repeats).
    package var leftOut = 0
    /// The page is not the JSON or XML it says it is: what it lists is unknown.
    package var unreadable = false

    package init(entries: [Entry] = [], leftOut: Int = 0) {
        self.entries = entries
        self.leftOut = leftOut
    }

    /// The formats a listing comes in.
    package enum Format: Sendable, Hashable {
        case html, json, xml
    }

    /// Reads a listing page.
    ///
    /// - Parameters:
    ///   - body: the page as sent.
    ///   - contentType: the `Content-Type` it came with, if any.
    ///   - url: the page's URL after redirects; a folder's URL (a missing final `/` is added).
    package static func read(_ body: [UInt8], contentType: String?, url: String) -> DirectoryListing {
        var builder = Builder(pageURL: url)
        switch format(of: body, contentType: contentType) {
        case .json: readJSON(body, into: &builder)
        case .xml: readXML(body, into: &builder)
        case .html: readHTML(body, into: &builder)
        }
        return builder.listing
    }

    /// The format by the `Content-Type`, else by the first byte that is not blank.
    package static func format(of body: [UInt8], contentType: String?) -> Format {
        let type = (contentType ?? "").lowercased()
        if type.contains("json") { return .json }
        if type.contains("xml") && !type.contains("xhtml") { return .xml }
        if type.contains("html") { return .html }
        let first = body.first { ![0x20, 0x09, 0x0A, 0x0D, 0xEF, 0xBB, 0xBF].contains($0) }
        switch first {
        case UInt8(ascii: "["), UInt8(ascii: "{"): return .json
        default:
            let head = String(decoding: body.prefix(64), as: UTF8.self).lowercased()
            return head.contains("<?xml") && !head.contains("<!doctype html") ? .xml : .html
        }
    }
}

extension DirectoryListing {
    /// Collects entries for one page: checks each link against the page's URL, decodes and
    /// sanitises names, drops repeats.
    struct Builder {
        let page: ListingURL?
        var listing = DirectoryListing()
        private var seen = Set<String>()

        init(pageURL: String) {
            page = ListingURL(pageURL)
        }

        /// A link as an HTML page writes it (entities already decoded).
        mutating func add(href: String) {
            guard let page, let (name, isDirectory) = page.child(of: href) else {
                listing.leftOut += 1
                return
            }
            add(bytes: name, isDirectory: isDirectory)
        }

        /// A name as a JSON or XML listing gives it (not percent-encoded, bytes that are not
        /// UTF-8 escaped by ``RawBytesEscape``); a final `/` marks a folder (Caddy), as does
        /// `isDirectory`.
        mutating func add(name: String, isDirectory: Bool) {
            var bytes = RawBytesEscape.bytes(of: name)
            var folder = isDirectory
            if bytes.last == UInt8(ascii: "/") {
                bytes.removeLast()
                folder = true
            }
            add(bytes: bytes, isDirectory: folder)
        }

        private mutating func add(bytes: [UInt8], isDirectory: Bool) {
            guard let page, !bytes.isEmpty, bytes != [0x2E], bytes != [0x2E, 0x2E],
                !bytes.contains(UInt8(ascii: "/")), !bytes.contains(0),
                let name = FileNameSanitizer.sanitize(Self.text(of: bytes))
            else {
                listing.leftOut += 1
                return
            }
            let url = page.url + PercentEncoding.encode(bytes) + (isDirectory ? "/" : "")
            guard seen.insert(url).inserted else {
                listing.leftOut += 1
                return
            }
            listing.entries.append(Entry(name: name, url: url, isDirectory: isDirectory))
        }

        /// The bytes as text; a name that is not UTF-8 keeps every byte above ASCII as `%XX`,
        /// so two such names stay two names.
        static func text(of bytes: [UInt8]) -> String {
            if let text = String(validating: bytes, as: UTF8.self) { return text }
            var text = ""
            for byte in bytes {
                if byte < 0x80 {
                    text.unicodeScalars.append(Unicode.Scalar(byte))
                } else {
                    text += "%" + PercentEncoding.hex(byte)
                }
            }
            return text
        }
    }
}
