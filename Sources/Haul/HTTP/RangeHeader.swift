/// Builds `Range` request field values (RFC 9110 §14.2).
enum RangeHeader {
    /// A single byte range: `bytes=START-` (to the end) or `bytes=START-END`.
    ///
    /// - Parameters:
    ///   - start: offset of the first byte wanted; not negative.
    ///   - end: offset of the last byte wanted, inclusive as in `last-pos` (§14.1.2),
    ///     or nil for everything from `start` on.
    ///
    ///     RangeHeader.value(from: 0, to: 0)  // "bytes=0-0", the first byte only
    static func value(from start: Int64, to end: Int64? = nil) -> String {
        assert(start >= 0, "a Range first-pos cannot be negative")
        guard let end else { return "bytes=\(start)-" }
        // §14.1.1: a last-pos below first-pos makes the range invalid, and servers ignore it.
        assert(end >= start, "a Range last-pos cannot be below first-pos")
        return "bytes=\(start)-\(end)"
    }
}
