import Foundation

/// Turns a name a server or URL supplies into one safe path component.
///
/// The name may come from anyone on the network, so it must not climb out of the
/// download folder (`../`), hide itself (`.name`), smuggle terminal escapes or
/// right-to-left tricks into listings, or exceed what the file system accepts.
enum FileNameSanitizer {
    /// The longest name kept, in bytes: `NAME_MAX` (255 on Linux file systems and APFS) less
    /// what Haul may add to it — `.part` while it downloads, `.999` to step around a file of the
    /// same name — so that every name made from it can exist.
    static let maxBytes = 255 - ".part".utf8.count - ".999".utf8.count
    /// Longest `.ext` (dot included) kept across truncation; a longer tail is not an extension.
    static let maxExtensionBytes = 32

    /// A safe single path component made from `name`, or nil when nothing usable remains.
    ///
    /// Keeps what follows the last `/` or `\`, drops control and bidi-override
    /// characters, trims whitespace and dots from both ends (no hidden files, no `.`
    /// or `..`), and cuts the name to ``maxBytes`` UTF-8 bytes on a character boundary,
    /// keeping a short extension.
    ///
    ///     FileNameSanitizer.sanitize("../../etc/passwd")  // "passwd"
    static func sanitize(_ name: String) -> String? {
        // Nothing to drop, trim or cut: most names of a listing or a list.
        if isPlain(name[...]) { return name }
        let visible = String(String.UnicodeScalarView(name.unicodeScalars.filter { !isInvisible($0) }))
        // Both separators: a `\` name would become a path on Windows shares and in zip tools.
        let lastComponent = visible.split(omittingEmptySubsequences: false) { $0 == "/" || $0 == "\\" }.last ?? ""
        let cut = truncated(trimmed(lastComponent))
        // Trim again: the cut may leave a trailing dot or space, or nothing but `.ext`.
        let result = trimmed(cut)
        return result.isEmpty ? nil : String(result)
    }

    /// The sanitised last non-empty segment of a URL path, percent-decoded.
    ///
    /// Invalid percent-encoding is kept as written. Decoding comes before sanitising, so
    /// an encoded `%2F` cannot smuggle a separator past it.
    ///
    ///     FileNameSanitizer.name(fromURLPath: "/a/b/file%20name.iso")  // "file name.iso"
    static func name(fromURLPath path: String) -> String? {
        guard let segment = path.split(separator: "/").last else { return nil }
        if isPlain(segment) { return String(segment) }
        // Foundation answers nil for a bad escape or bytes that are not UTF-8.
        return sanitize(segment.removingPercentEncoding ?? String(segment))
    }

    /// Whether `name` is already a safe name as it is: short, printable ASCII letters, digits
    /// and `-_.+~` only (so nothing to decode, drop or trim), neither starting nor ending with
    /// a dot. Most URLs of a long list name their file this way.
    static func isPlain(_ name: Substring) -> Bool {
        let utf8 = name.utf8
        guard let first = utf8.first, let last = utf8.last, utf8.count <= maxBytes,
            first != UInt8(ascii: "."), last != UInt8(ascii: ".")
        else { return false }
        return utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "+"), UInt8(ascii: "~"):
                true
            default:
                false
            }
        }
    }

    /// C0 (NUL included), DEL and C1 controls, and the Unicode bidi controls that make
    /// `evil\u{202E}txt.exe` display as `evilexe.txt`.
    private static func isInvisible(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: true
        case 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    private static func trimmed(_ s: Substring) -> Substring {
        let junk: (Character) -> Bool = { $0 == "." || $0.isWhitespace }
        guard let start = s.firstIndex(where: { !junk($0) }), let end = s.lastIndex(where: { !junk($0) }) else {
            return s[s.endIndex...]
        }
        return s[start...end]
    }

    /// `name` cut to ``maxBytes`` UTF-8 bytes between characters, so no multi-byte
    /// sequence or combining mark is split, keeping the extension when it is short.
    private static func truncated(_ name: Substring) -> Substring {
        guard name.utf8.count > maxBytes else { return name }
        var stem = name
        var ext = name[name.endIndex...]
        if let dot = name.lastIndex(of: "."), dot != name.startIndex,
            name.utf8[dot...].count <= maxExtensionBytes
        {
            stem = name[..<dot]
            ext = name[dot...]
        }
        let budget = maxBytes - ext.utf8.count
        var end = stem.startIndex
        var used = 0
        while end < stem.endIndex {
            let next = stem.index(after: end)
            used += stem.utf8[end..<next].count
            guard used <= budget else { break }
            end = next
        }
        return Substring(String(stem[..<end]) + ext)
    }
}
