/// Where the parts of an absolute `scheme://authority/path?query#fragment` URL are, found in
/// its bytes without parsing the rest: what redaction and file naming need, for every URL of a
/// long list.
enum URLParts {
    /// The authority (`user:password@host:port`): after the first `://`, up to the first `/`,
    /// `?` or `#`, or the end. Nil without a `://`.
    static func authority(of url: String) -> Range<String.Index>? {
        var url = url
        let offsets: (Int, Int)? = url.withUTF8 { bytes in
            guard bytes.count >= 3 else { return nil }
            for i in 0...(bytes.count - 3)
            where bytes[i] == UInt8(ascii: ":") && bytes[i + 1] == UInt8(ascii: "/") && bytes[i + 2] == UInt8(ascii: "/") {
                var end = i + 3
                while end < bytes.count, !isDelimiter(bytes[end], andSlash: true) { end += 1 }
                return (i + 3, end)
            }
            return nil
        }
        guard let (start, end) = offsets else { return nil }
        let utf8 = url.utf8
        return utf8.index(utf8.startIndex, offsetBy: start)..<utf8.index(utf8.startIndex, offsetBy: end)
    }

    /// The path as written (percent-encoded): after the authority, up to `?` or `#`; empty when
    /// the URL has none. Nil without a `://`.
    static func path(of url: String) -> Substring? {
        guard let authority = authority(of: url) else { return nil }
        let rest = url.utf8[authority.upperBound...]
        let end = rest.firstIndex { isDelimiter($0, andSlash: false) } ?? url.endIndex
        return url[authority.upperBound..<end]
    }

    /// `?` and `#` end a path; `/` also ends an authority.
    private static func isDelimiter(_ byte: UInt8, andSlash: Bool) -> Bool {
        byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") || (andSlash && byte == UInt8(ascii: "/"))
    }
}
