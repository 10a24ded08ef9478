import Foundation

/// Decodes RFC 8187 extended parameter values, the `filename*` form of Content-Disposition.
///
/// ```
/// ext-value   = charset "'" [ language ] "'" value-chars
/// value-chars = *( pct-encoded / attr-char )
/// ```
enum RFC8187 {
    /// The decoded text, or nil for a malformed value, a bad `%` escape, bytes that are not
    /// valid in the charset, or a charset other than UTF-8 and ISO-8859-1.
    ///
    /// Charset names compare case-insensitively (§3.2.1) and the language tag is ignored.
    /// Some servers wrap the whole value in quotes; the caller has already removed them.
    ///
    ///     RFC8187.decode("UTF-8''%E2%82%AC%20rates")  // "€ rates"
    static func decode(_ value: String) -> String? {
        let parts = value.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, let bytes = percentDecoded(parts[2]) else { return nil }
        switch HTTPSyntax.trimmingOWS(parts[0]).lowercased() {
        case "utf-8":
            // Foundation rather than `String(validating:)`, which needs macOS 15.
            return String(bytes: bytes, encoding: .utf8)
        case "iso-8859-1":
            // ISO-8859-1 maps each byte to the Unicode scalar of the same number.
            return String(String.UnicodeScalarView(bytes.map(Unicode.Scalar.init)))
        default:
            return nil
        }
    }

    /// The bytes `value-chars` stand for. Printable ASCII outside attr-char is taken as
    /// itself, since servers send such names; raw non-ASCII and whitespace are rejected.
    private static func percentDecoded(_ s: Substring) -> [UInt8]? {
        var bytes: [UInt8] = []
        var iterator = s.utf8.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(PercentEncoding.hexValue),
                    let low = iterator.next().flatMap(PercentEncoding.hexValue)
                else { return nil }
                bytes.append(high << 4 | low)
            case 0x21...0x7E:
                bytes.append(byte)
            default:
                return nil
            }
        }
        return bytes
    }
}
