import Foundation

/// `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP date.
enum RetryAfter {
    /// The wait asked for; `.zero` for a date in the past; nil for garbage.
    static func delay(from value: String, now: Date) -> Duration? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if !trimmed.isEmpty, trimmed.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            return Int64(trimmed).map { .seconds($0) } ?? .seconds(Int64.max / 1_000_000_000_000)
        }
        guard let date = HTTPDate.parse(trimmed) else { return nil }
        let seconds = date.timeIntervalSince(now)
        return seconds > 0 ? .milliseconds(Int64(seconds * 1000)) : .zero
    }
}
