/// Small pieces of the HTTP grammar shared by the header parsers (RFC 9110 §5.6).
enum HTTPSyntax {
    /// `OWS = *( SP / HTAB )` (RFC 9110 §5.6.3): the only whitespace a field value may pad with.
    static func isOWS(_ c: Character) -> Bool {
        c == " " || c == "\t"
    }

    /// `s` without leading and trailing OWS.
    static func trimmingOWS(_ s: Substring) -> Substring {
        guard let start = s.firstIndex(where: { !isOWS($0) }),
            let end = s.lastIndex(where: { !isOWS($0) })
        else { return s[s.endIndex...] }
        return s[start...end]
    }

    /// `1*DIGIT` as a non-negative `Int64`, or nil for an empty string, any non-digit
    /// (a sign included) or a value past `Int64.max`.
    static func int64(digits s: Substring) -> Int64? {
        guard !s.isEmpty else { return nil }
        var value: Int64 = 0
        for byte in s.utf8 {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            let (shifted, o1) = value.multipliedReportingOverflow(by: 10)
            let (sum, o2) = shifted.addingReportingOverflow(Int64(byte - UInt8(ascii: "0")))
            guard !o1, !o2 else { return nil }
            value = sum
        }
        return value
    }
}
