/// Builds `Range` request values (RFC 9110 §14.2).
enum RangeHeader {
    /// `bytes=start-` or `bytes=start-end` (end inclusive).
    static func value(from start: Int64, to end: Int64? = nil) -> String {
        end.map { "bytes=\(start)-\($0)" } ?? "bytes=\(start)-"
    }
}
