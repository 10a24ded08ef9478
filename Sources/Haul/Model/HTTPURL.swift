import Foundation

/// The parts of an `http(s)` URL a request needs: what `URLComponents` gives, found by one scan
/// of the bytes when the URL is plain ASCII without anything to decode, as the URLs of a long
/// list are; anything else goes through `URLComponents`.
///
/// `URLComponents` cost a list of small files 4 % of its time: each URL was parsed when added
/// and again for each request, and each part asked for was cut out again.
struct HTTPURL: Sendable, Equatable {
    /// Lowercased.
    var scheme: String
    /// As written. (`URLComponents` turns an IDNA name, `xn--…`, into Unicode, which no
    /// resolver takes and no `Host` header may carry; read here, it stays as written.)
    var host: String
    var port: Int?
    /// As written (percent-encoded); empty when the URL has none.
    var path: String
    /// As written, without the `?`; nil without one.
    var query: String?

    /// The host to connect to: an IPv6 literal without its brackets.
    var bareHost: String {
        host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    }

    /// The port, or the scheme's.
    var effectivePort: Int { port ?? (scheme == "https" ? 443 : 80) }

    /// What a request line asks for: the path (`/` when empty) and the query.
    var target: String {
        let path = path.isEmpty ? "/" : path
        return query.map { path + "?" + $0 } ?? path
    }

    /// Parses `string`; nil when `URLComponents` would not parse it or it has no scheme or host.
    init?(_ string: String) {
        if let fast = Self.scan(string) {
            self = fast
        } else if let components = URLComponents(string: string) {
            self.init(components)
        } else {
            return nil
        }
        if scheme.isEmpty || host.isEmpty { return nil }
    }

    init(_ components: URLComponents) {
        scheme = components.scheme?.lowercased() ?? ""
        host = components.host ?? ""
        port = components.port
        path = components.percentEncodedPath
        query = components.percentEncodedQuery
    }

    /// The parts in one pass, for `scheme://host[:port][/path][?query][#fragment]` of bytes that
    /// need no decoding and no checks beyond these; nil for anything else (user information,
    /// `%`, IPv6 literals, characters a URL must not hold), which `URLComponents` then reads.
    private static func scan(_ string: String) -> HTTPURL? {
        var string = string
        return string.withUTF8 { bytes -> HTTPURL? in
            let count = bytes.count
            var i = 0
            while i < count, isSchemeByte(bytes[i]) { i += 1 }
            guard i > 0, i + 2 < count, bytes[i] == UInt8(ascii: ":"), bytes[i + 1] == UInt8(ascii: "/"),
                bytes[i + 2] == UInt8(ascii: "/")
            else { return nil }
            let schemeEnd = i
            i += 3
            let hostStart = i
            var portStart: Int?
            while i < count, bytes[i] != UInt8(ascii: "/"), bytes[i] != UInt8(ascii: "?"), bytes[i] != UInt8(ascii: "#") {
                let byte = bytes[i]
                if byte == UInt8(ascii: ":") {
                    guard portStart == nil else { return nil }
                    portStart = i + 1
                } else if portStart != nil {
                    guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                } else {
                    guard isHostByte(byte) else { return nil }
                }
                i += 1
            }
            let authorityEnd = i
            let hostEnd = portStart.map { $0 - 1 } ?? authorityEnd
            guard hostEnd > hostStart else { return nil }
            var port: Int?
            if let portStart {
                // An empty port is no port, as URLComponents reads it; a long one is not a port.
                let digits = authorityEnd - portStart
                guard digits <= 5 else { return nil }
                if digits > 0 {
                    var value = 0
                    for j in portStart..<authorityEnd { value = value * 10 + Int(bytes[j] - UInt8(ascii: "0")) }
                    guard value <= 65535 else { return nil }
                    port = value
                }
            }
            let pathStart = i
            var queryStart: Int?
            var fragmentStart: Int?
            while i < count {
                let byte = bytes[i]
                if byte == UInt8(ascii: "#") {
                    guard fragmentStart == nil else { return nil }
                    fragmentStart = i
                } else if byte == UInt8(ascii: "?"), queryStart == nil, fragmentStart == nil {
                    queryStart = i + 1
                } else {
                    guard isPathByte(byte) else { return nil }
                }
                i += 1
            }
            let pathEnd = queryStart.map { $0 - 1 } ?? fragmentStart ?? count
            func text(_ range: Range<Int>) -> String { String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self) }
            return HTTPURL(
                scheme: text(0..<schemeEnd).lowercased(), host: text(hostStart..<hostEnd), port: port,
                path: text(pathStart..<pathEnd),
                query: queryStart.map { text($0..<(fragmentStart ?? count)) })
        }
    }

    private init(scheme: String, host: String, port: Int?, path: String, query: String?) {
        self.scheme = scheme
        self.host = host
        self.port = port
        self.path = path
        self.query = query
    }

    private static func isSchemeByte(_ byte: UInt8) -> Bool {
        isAlphanumeric(byte) || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
    }

    /// Unreserved and sub-delimiters (RFC 3986's reg-name without percent-encoding). (A switch:
    /// `"…".utf8.contains(byte)` walks the string's bytes for every byte of every URL.)
    private static func isHostByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "!"), UInt8(ascii: "$"),
            UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"),
            UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="):
            true
        default: isAlphanumeric(byte)
        }
    }

    /// What a path, query or fragment may hold without percent-encoding (`pchar`, `/` and `?`).
    private static func isPathByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: ":"), UInt8(ascii: "@"), UInt8(ascii: "/"), UInt8(ascii: "?"): true
        default: isHostByte(byte)
        }
    }

    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
    }

    /// The host a URL's connections count against (`--max-connections-per-host`): lowercased,
    /// empty for a malformed URL, which then fails on its own.
    static func connectionHost(of url: String) -> String {
        HTTPURL(url)?.host.lowercased() ?? ""
    }
}
