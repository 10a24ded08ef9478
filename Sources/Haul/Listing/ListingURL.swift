/// A listing page's URL, split the way links on it are checked: the origin a link must keep
/// and the decoded path it must stay directly below.
struct ListingURL: Sendable, Hashable {
    /// The page's URL as given, ending with `/`.
    let url: String
    /// `scheme://host:port`, lowercased, the default port dropped, credentials left out.
    let origin: String
    /// The path's bytes, percent-decoded, ending with `/`.
    let path: [UInt8]

    /// Nil for anything but an absolute http(s) URL.
    init?(_ text: String) {
        guard let (origin, path) = Self.split(text) else { return nil }
        var url = text
        if let end = url.firstIndex(where: { $0 == "?" || $0 == "#" }) { url = String(url[..<end]) }
        if !url.hasSuffix("/") { url += "/" }
        self.url = url
        self.origin = origin
        var decoded = PercentEncoding.decode(path)
        if decoded.last != UInt8(ascii: "/") { decoded.append(UInt8(ascii: "/")) }
        self.path = decoded
    }

    /// The origin and the raw path of an absolute http(s) URL.
    static func split(_ text: String) -> (origin: String, path: Substring)? {
        guard let colon = text.firstIndex(of: ":") else { return nil }
        let scheme = text[..<colon].lowercased()
        guard scheme == "http" || scheme == "https", text[colon...].hasPrefix("://") else { return nil }
        let rest = text[text.index(colon, offsetBy: 3)...]
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        var authority = rest[..<authorityEnd]
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        var host = authority.lowercased()
        let defaultPort = scheme == "http" ? ":80" : ":443"
        if host.hasSuffix(defaultPort) { host.removeLast(defaultPort.count) }
        guard !host.isEmpty else { return nil }
        var path = rest[authorityEnd...]
        if let end = path.firstIndex(where: { $0 == "?" || $0 == "#" }) { path = path[..<end] }
        return (scheme + "://" + host, path.isEmpty ? "/" : path)
    }

    /// The decoded name of the direct child `href` links to, and whether it is a folder (a
    /// final `/`); nil for any other link.
    func child(of href: String) -> (name: [UInt8], isDirectory: Bool)? {
        var link = Substring(href)
        while let first = link.first, first.isWhitespace { link.removeFirst() }
        while let last = link.last, last.isWhitespace { link.removeLast() }
        if let hash = link.firstIndex(of: "#") { link = link[..<hash] }
        // A query is a sort order or a script, never a file of the folder. (Looked for byte
        // by byte: Foundation's search for a string took a third of a listing's reading.)
        guard !link.isEmpty, !link.utf8.contains(UInt8(ascii: "?")) else { return nil }
        let rest: [UInt8]
        if link.hasPrefix("/") || Self.hasScheme(link) {
            let absolute =
                link.hasPrefix("//") ? origin.prefix { $0 != ":" } + ":" + link : link.hasPrefix("/") ? origin + link : String(link)
            guard let (linkOrigin, linkPath) = Self.split(absolute), linkOrigin == origin else { return nil }
            let decoded = PercentEncoding.decode(linkPath)
            guard decoded.count > path.count, decoded.starts(with: path) else { return nil }
            rest = Array(decoded[path.count...])
        } else {
            // `./name`: nginx and Caddy write a name with a colon so it cannot read as a scheme.
            if link.hasPrefix("./") { link = link.dropFirst(2) }
            rest = PercentEncoding.decode(link)
        }
        var name = rest[...]
        let isDirectory = name.last == UInt8(ascii: "/")
        if isDirectory { name = name.dropLast() }
        guard !name.isEmpty, !name.contains(UInt8(ascii: "/")) else { return nil }
        return (Array(name), isDirectory)
    }

    /// Whether a link starts with `scheme:` (RFC 3986: a letter, then letters, digits, `+-.`).
    static func hasScheme(_ link: Substring) -> Bool {
        if link.hasPrefix("//") { return true }
        for (offset, byte) in link.utf8.enumerated() {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"): continue
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."):
                if offset == 0 { return false }
            case UInt8(ascii: ":"): return offset > 0
            default: return false
            }
        }
        return false
    }
}
