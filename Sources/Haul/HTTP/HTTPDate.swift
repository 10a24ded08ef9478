import Foundation

/// HTTP-date parsing and formatting (RFC 9110 §5.6.7), by hand: no shared formatter, so
/// every call is thread-safe, and no locale can change the month names.
///
/// Three forms are read, one is written:
/// ```
/// IMF-fixdate  Sun, 06 Nov 1994 08:49:37 GMT    (the only form senders may generate)
/// rfc850-date  Sunday, 06-Nov-94 08:49:37 GMT   (obsolete)
/// asctime      Sun Nov  6 08:49:37 1994         (obsolete)
/// ```
enum HTTPDate {
    /// Parses any of the three forms, reading RFC 850 two-digit years against the current date.
    static func parse(_ s: String) -> Date? {
        parse(s, relativeTo: Date())
    }

    /// Parses any of the three forms; `now` decides the century of an RFC 850 year.
    ///
    /// Runs of spaces count as one, and day and month names match in any case: §5.6.7
    /// encourages recipients to be robust. The day name is checked to be one but not
    /// checked against the date.
    static func parse(_ s: String, relativeTo now: Date) -> Date? {
        let tokens = s.split(whereSeparator: HTTPSyntax.isOWS)
        let fields: CivilTime?
        switch tokens.count {
        case 6: fields = imfFixdate(tokens)
        case 4: fields = rfc850Date(tokens, currentYear: CivilTime(now).year)
        case 5: fields = asctimeDate(tokens)
        default: fields = nil
        }
        return fields?.date
    }

    /// The IMF-fixdate form, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`; fractions of a second are dropped.
    static func format(_ d: Date) -> String {
        let t = CivilTime(d)
        func pad(_ n: Int, _ width: Int) -> String {
            let digits = String(n)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(CivilTime.dayNames[t.weekday]), \(pad(t.day, 2)) \(CivilTime.monthNames[t.month - 1]) "
            + "\(pad(t.year, 4)) \(pad(t.hour, 2)):\(pad(t.minute, 2)):\(pad(t.second, 2)) GMT"
    }

    // `Sun,` `06` `Nov` `1994` `08:49:37` `GMT`
    private static func imfFixdate(_ t: [Substring]) -> CivilTime? {
        guard t[0].last == ",", isDayName(t[0].dropLast()), t[5] == "GMT",
            let day = number(t[1], digits: 1...2), let month = month(t[2]),
            let year = number(t[3], digits: 4...4)
        else { return nil }
        return CivilTime(year: year, month: month, day: day, time: t[4])
    }

    // `Sunday,` `06-Nov-94` `08:49:37` `GMT`
    private static func rfc850Date(_ t: [Substring], currentYear: Int) -> CivilTime? {
        let date = t[1].split(separator: "-", omittingEmptySubsequences: false)
        guard t[0].last == ",", isDayName(t[0].dropLast()), t[3] == "GMT", date.count == 3,
            let day = number(date[0], digits: 1...2), let month = month(date[1]),
            let yy = number(date[2], digits: 2...2)
        else { return nil }
        // §5.6.7: a two-digit year that looks more than 50 years ahead is the most
        // recent past year with those digits.
        var year = currentYear - currentYear % 100 + yy
        if year > currentYear + 50 { year -= 100 } else if year + 100 <= currentYear + 50 { year += 100 }
        return CivilTime(year: year, month: month, day: day, time: t[2])
    }

    // `Sun` `Nov` `6` `08:49:37` `1994` (the day is space-padded, and the split ate the pad)
    private static func asctimeDate(_ t: [Substring]) -> CivilTime? {
        guard isDayName(t[0]), let month = month(t[1]), let day = number(t[2], digits: 1...2),
            let year = number(t[4], digits: 4...4)
        else { return nil }
        return CivilTime(year: year, month: month, day: day, time: t[3])
    }

    private static func isDayName(_ s: Substring) -> Bool {
        let name = s.lowercased()
        return CivilTime.dayNames.contains { $0.lowercased() == name }
            || CivilTime.longDayNames.contains { $0.lowercased() == name }
    }

    private static func month(_ s: Substring) -> Int? {
        let name = s.lowercased()
        return CivilTime.monthNames.firstIndex { $0.lowercased() == name }.map { $0 + 1 }
    }

    /// Exactly `digits` ASCII digits as an Int; anything else is nil.
    static func number(_ s: Substring, digits: ClosedRange<Int>) -> Int? {
        guard digits.contains(s.utf8.count) else { return nil }
        return HTTPSyntax.int64(digits: s).map { Int($0) }
    }
}
