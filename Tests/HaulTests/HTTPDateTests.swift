import Foundation
import Testing
@testable import Haul

@Suite("HTTP-date")
struct HTTPDateTests {
    /// 1994-11-06 08:49:37 GMT, the example instant of RFC 9110 §5.6.7.
    static let example = Date(timeIntervalSince1970: 784_111_777)
    /// 2025-06-01 00:00:00 GMT, for reading RFC 850 two-digit years.
    static let now2025 = Date(timeIntervalSince1970: 1_748_736_000)

    @Test(
        "parses all three forms",
        arguments: [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
            "Sun Nov 06 08:49:37 1994",
            "sun, 06 nov 1994 08:49:37 GMT",
            "  Sun,  06 Nov 1994\t08:49:37 GMT ",
            "Sun, 6 Nov 1994 08:49:37 GMT",
        ])
    func parses(value: String) {
        #expect(HTTPDate.parse(value, relativeTo: Self.now2025) == Self.example)
    }

    @Test(
        "rejects",
        arguments: [
            "",
            "soon",
            "Sun, 06 Nov 1994 08:49:37",  // no zone
            "Sun, 06 Nov 1994 08:49:37 PST",  // only GMT is allowed
            "Sun 06 Nov 1994 08:49:37 GMT",  // no comma
            "Funday, 06 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 94 08:49:37 GMT",  // IMF needs four digits
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 31 Feb 1994 08:49:37 GMT",
            "Sun, 29 Feb 2023 08:49:37 GMT",  // not a leap year
            "Sun, 29 Feb 1900 08:49:37 GMT",  // century, not a leap year
            "Sun, 00 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:60:00 GMT",
            "Sun, 06 Nov 1994 8:49:37 GMT",
            "Sun, 06 Nov 1994 08:49 GMT",
            "Sun, 06 Nov 0000 08:49:37 GMT",
            "Sun, 06 Nov +994 08:49:37 GMT",
            "Sunday, 06-Nov-1994 08:49:37 GMT",  // RFC 850 has two digits
            "Sunday, 06-Nov 08:49:37 GMT",
            "Sun Nov  6 08:49:37 94",
            "1994-11-06T08:49:37Z",
        ])
    func rejects(value: String) {
        #expect(HTTPDate.parse(value, relativeTo: Self.now2025) == nil)
    }

    @Test(
        "reads RFC 850 years within 50 years ahead",
        arguments: [
            ("Sunday, 06-Nov-94 08:49:37 GMT", 1994),
            ("Sunday, 06-Nov-30 08:49:37 GMT", 2030),
            ("Sunday, 06-Nov-75 08:49:37 GMT", 2075),
            ("Sunday, 06-Nov-76 08:49:37 GMT", 1976),
            ("Sunday, 06-Nov-00 08:49:37 GMT", 2000),
        ])
    func twoDigitYears(value: String, year: Int) throws {
        let date = try #require(HTTPDate.parse(value, relativeTo: Self.now2025))
        #expect(CivilTime(date).year == year)
    }

    @Test(
        "formats IMF-fixdate",
        arguments: [
            (0.0, "Thu, 01 Jan 1970 00:00:00 GMT"),
            (-1, "Wed, 31 Dec 1969 23:59:59 GMT"),
            (784_111_777.9, "Sun, 06 Nov 1994 08:49:37 GMT"),
            (951_782_400, "Tue, 29 Feb 2000 00:00:00 GMT"),
            (1_709_208_000, "Thu, 29 Feb 2024 12:00:00 GMT"),
            (2_147_483_648, "Tue, 19 Jan 2038 03:14:08 GMT"),
            (-11_644_473_600, "Mon, 01 Jan 1601 00:00:00 GMT"),
            (253_402_300_799, "Fri, 31 Dec 9999 23:59:59 GMT"),
        ])
    func formats(seconds: Double, expected: String) {
        #expect(HTTPDate.format(Date(timeIntervalSince1970: seconds)) == expected)
    }

    @Test("agrees with a POSIX DateFormatter and round-trips", arguments: Array(stride(from: -4e9, through: 8e9, by: 987_654_321.5)))
    func matchesFoundation(seconds: Double) {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        let date = Date(timeIntervalSince1970: seconds)
        let text = HTTPDate.format(date)
        #expect(text == formatter.string(from: date))
        #expect(HTTPDate.parse(text) == Date(timeIntervalSince1970: seconds.rounded(.down)))
    }

    @Test func leapSecondLandsOnTheNextMinute() {
        let date = HTTPDate.parse("Sat, 31 Dec 2016 23:59:60 GMT")
        #expect(date == HTTPDate.parse("Sun, 01 Jan 2017 00:00:00 GMT"))
    }
}
