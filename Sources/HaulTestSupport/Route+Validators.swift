import Crypto

/// The validators a route sends for one version of its content.
struct ContentValidators: Equatable {
    /// The ETag header value, quotes and weak prefix included.
    var etag: String?
    /// The Last-Modified header value (IMF-fixdate).
    var lastModified: String?

    /// Derives validators from the content's digest and how often the content changed.
    init(_ kind: Route.Validators, digest: String, version: Int) {
        let strong = "\"" + digest + "\""
        let date = HTTPDate.imfFixdate(secondsSince1970: Self.baseDate + version)
        switch kind {
        case .none: (etag, lastModified) = (nil, nil)
        case .strongETagAndLastModified: (etag, lastModified) = (strong, date)
        case .lastModifiedOnly: (etag, lastModified) = (nil, date)
        case .weakETagOnly: (etag, lastModified) = ("W/" + strong, nil)
        }
    }

    /// Mon, 01 Jan 2024 00:00:00 GMT; each content change moves Last-Modified one second later.
    static let baseDate = 1_704_067_200

    /// The first 16 hex digits of the SHA-256 of `content`.
    static func digest(of content: [UInt8]) -> String {
        SHA256.hash(data: content).prefix(8).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }

    /// Whether an If-Range value lets the Range apply (RFC 9110 §13.1.5).
    ///
    /// An entity-tag matches only by strong comparison, so a weak tag on either side never
    /// matches; a date matches only if it is exactly the Last-Modified we send.
    func ifRangeMatches(_ value: String) -> Bool {
        let value = value.trimmingSpaces
        if value.hasPrefix("\"") || value.hasPrefix("W/") {
            guard let etag, !etag.hasPrefix("W/") else { return false }
            return value == etag
        }
        return lastModified == value
    }
}

/// IMF-fixdate formatting (RFC 9110 §5.6.7), without Foundation.
enum HTTPDate {
    private static let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// "Sun, 06 Nov 1994 08:49:37 GMT" for a Unix time.
    static func imfFixdate(secondsSince1970 seconds: Int) -> String {
        let days = seconds / 86_400
        let (year, month, day) = civil(fromDays: days)
        let secondOfDay = seconds % 86_400
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let time = "\(two(secondOfDay / 3600)):\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60))"
        return "\(weekdays[days % 7]), \(two(day)) \(months[month - 1]) \(year) \(time) GMT"
    }

    /// Proleptic Gregorian date for days since 1970-01-01 (non-negative), after Howard Hinnant's algorithm.
    private static func civil(fromDays days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = z / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

extension String {
    /// The string without leading and trailing spaces and tabs.
    var trimmingSpaces: String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        return String(self.drop(while: isSpace).reversed().drop(while: isSpace).reversed())
    }
}
