import Foundation

/// A `Content-Range: bytes first-last/total` value (RFC 9110 §14.4).
struct ContentRange: Equatable, Sendable {
    var first: Int64
    var last: Int64
    /// nil for `*` (length unknown to the server).
    var total: Int64?

    var length: Int64 { last - first + 1 }

    /// Parses `bytes first-last/total` or `bytes first-last/*`; nil for anything else.
    static func parse(_ value: String) -> ContentRange? {
        guard let (range, total) = split(value), range != "*" else { return nil }
        let bounds = range.split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = number(bounds[0]), let last = number(bounds[1]), first <= last else { return nil }
        if total == "*" { return ContentRange(first: first, last: last, total: nil) }
        guard let length = number(total), last < length else { return nil }
        return ContentRange(first: first, last: last, total: length)
    }

    /// The length in a 416's `bytes */length`; nil for anything else.
    static func parseUnsatisfied(_ value: String) -> Int64? {
        guard let (range, total) = split(value), range == "*" else { return nil }
        return number(total)
    }

    private static func split(_ value: String) -> (Substring, Substring)? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        guard trimmed.lowercased().hasPrefix("bytes ") else { return nil }
        let rest = trimmed.dropFirst(6).trimmingCharacters(in: .whitespaces)
        let parts = rest.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        return (Substring(parts[0].trimmingCharacters(in: .whitespaces)), Substring(parts[1].trimmingCharacters(in: .whitespaces)))
    }

    /// Digits only: `Int64("+5")` would accept a sign.
    private static func number(_ text: Substring) -> Int64? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int64(text)
    }
}
