/// Sizes on the command line: `1048576`, `512K`, `1M`, `2G` (binary multiples, as aria2 reads them).
public enum ByteCount {
    /// The number of bytes `text` says, or nil when it is not a size.
    public static func parse(_ text: String) -> Int64? {
        let multipliers: [Character: Int64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30]
        guard let last = text.uppercased().last else { return nil }
        let (digits, multiplier) = multipliers[last].map { (text.dropLast(), $0) } ?? (Substring(text), 1)
        guard let value = Int64(digits), value >= 0, value <= Int64.max / multiplier else { return nil }
        return value * multiplier
    }

    /// A rate limit as aria2 and curl read one: a size per second, where 0 means no limit.
    /// Nil when `text` is not a size; otherwise the limit (nil for none).
    public static func rateLimit(_ text: String) -> Int64?? {
        guard let rate = parse(text) else { return nil }
        return .some(rate > 0 ? rate : nil)
    }
}
