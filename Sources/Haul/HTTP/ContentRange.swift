/// A `Content-Range` field value of a 206 answer: which bytes of the representation the
/// body holds, and how long the whole representation is when the server knows.
///
/// Grammar (RFC 9110 §14.4):
/// ```
/// Content-Range     = range-unit SP ( range-resp / unsatisfied-range )
/// range-resp        = incl-range "/" ( complete-length / "*" )
/// incl-range        = first-pos "-" last-pos
/// unsatisfied-range = "*/" complete-length
/// ```
/// Parsing tolerates extra OWS around each part and a unit in any case.
struct ContentRange: Equatable, Sendable {
    /// Offset of the first byte in the body.
    var first: Int64
    /// Offset of the last byte in the body; inclusive.
    var last: Int64
    /// The complete length, or nil when the server sent `*` (unknown).
    var total: Int64?

    /// Number of bytes the body carries. Never overflows: ``parse(_:)`` keeps `last < Int64.max`.
    var length: Int64 { last - first + 1 }

    /// Parses `bytes FIRST-LAST/TOTAL` or `bytes FIRST-LAST/*`.
    ///
    /// Returns nil for another unit, the unsatisfied form, signs, non-digits, numbers past
    /// `Int64.max`, `last < first`, or `total <= last`: RFC 9110 §14.4 calls a range-resp
    /// invalid when last-pos is below first-pos or the complete length is not above last-pos.
    ///
    ///     ContentRange.parse("bytes 0-499/1234")  // first 0, last 499, total 1234
    static func parse(_ value: String) -> ContentRange? {
        guard let spec = byteRangeSpec(value) else { return nil }
        let halves = spec.split(separator: "/", omittingEmptySubsequences: false)
        guard halves.count == 2 else { return nil }
        let positions = halves[0].split(separator: "-", omittingEmptySubsequences: false)
        guard positions.count == 2,
            let first = number(positions[0]),
            let last = number(positions[1]),
            first <= last,
            // `last + 1` is the end offset callers compute; keep it representable.
            last < Int64.max
        else { return nil }
        let totalText = HTTPSyntax.trimmingOWS(halves[1])
        if totalText == "*" { return ContentRange(first: first, last: last, total: nil) }
        guard let total = number(totalText), total > last else { return nil }
        return ContentRange(first: first, last: last, total: total)
    }

    /// Parses the unsatisfied form `bytes */LENGTH` a 416 answer carries (RFC 9110 §15.5.17)
    /// and returns the complete length, or nil for anything else.
    static func parseUnsatisfied(_ value: String) -> Int64? {
        guard let spec = byteRangeSpec(value) else { return nil }
        let halves = spec.split(separator: "/", omittingEmptySubsequences: false)
        guard halves.count == 2, HTTPSyntax.trimmingOWS(halves[0]) == "*" else { return nil }
        return number(halves[1])
    }

    /// The part after the `bytes` unit, or nil when the unit is another or missing.
    /// Range units compare case-insensitively (RFC 9110 §14.1); at least one SP or HTAB
    /// must separate the unit from the range.
    private static func byteRangeSpec(_ value: String) -> Substring? {
        let trimmed = HTTPSyntax.trimmingOWS(Substring(value))
        guard let gap = trimmed.firstIndex(where: HTTPSyntax.isOWS),
            trimmed[..<gap].lowercased() == "bytes"
        else { return nil }
        return HTTPSyntax.trimmingOWS(trimmed[gap...])
    }

    private static func number(_ s: Substring) -> Int64? {
        HTTPSyntax.int64(digits: HTTPSyntax.trimmingOWS(s))
    }
}
