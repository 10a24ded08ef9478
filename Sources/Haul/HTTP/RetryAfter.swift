import Foundation

/// Reads `Retry-After` (RFC 9110 §10.2.3): how long a 503 or 429 asks the client to wait.
///
/// ```
/// Retry-After = HTTP-date / delay-seconds
/// delay-seconds = 1*DIGIT
/// ```
enum RetryAfter {
    /// The wait the value asks for, measured from `now` (injected so tests need no clock).
    ///
    /// A date already past gives `.zero`; a sign, a fraction, a number past `Int64.max`
    /// or any other text gives nil, so the caller falls back to its own backoff.
    ///
    ///     RetryAfter.delay(from: "120", now: now)  // .seconds(120)
    static func delay(from value: String, now: Date) -> Duration? {
        let trimmed = HTTPSyntax.trimmingOWS(Substring(value))
        if let seconds = HTTPSyntax.int64(digits: trimmed) {
            return .seconds(seconds)
        }
        guard let date = HTTPDate.parse(String(trimmed), relativeTo: now) else { return nil }
        let interval = date.timeIntervalSince(now)
        return interval > 0 ? .seconds(interval) : .zero
    }
}
