import Foundation
import Testing
@testable import Haul

@Suite("Retry-After")
struct RetryAfterTests {
    /// 1994-11-06 08:47:37 GMT: two minutes before the RFC 9110 example date.
    static let now = Date(timeIntervalSince1970: 784_111_777 - 120)

    @Test(
        "reads a delay",
        arguments: [
            ("0", Duration.zero),
            ("120", .seconds(120)),
            ("  30\t", .seconds(30)),
            ("007", .seconds(7)),
            ("9223372036854775807", .seconds(Int64.max)),
            ("Sun, 06 Nov 1994 08:49:37 GMT", .seconds(120)),
            ("Sunday, 06-Nov-94 08:49:37 GMT", .seconds(120)),
            ("Sun Nov  6 08:49:37 1994", .seconds(120)),
            ("Sun, 06 Nov 1994 09:47:37 GMT", .seconds(3600)),
            ("Sun, 06 Nov 1994 08:47:37 GMT", .zero),  // now
            ("Sat, 05 Nov 1994 08:49:37 GMT", .zero),  // past
            ("Thu, 01 Jan 1970 00:00:00 GMT", .zero),
        ])
    func delay(value: String, expected: Duration) {
        #expect(RetryAfter.delay(from: value, now: Self.now) == expected)
    }

    @Test(
        "rejects",
        arguments: [
            "",
            "   ",
            "-5",
            "+5",
            "1.5",
            "5s",
            "soon",
            "1e3",
            "99999999999999999999",
            "Sun, 06 Nov 1994 25:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 CET",
            "120, 60",
        ])
    func invalid(value: String) {
        #expect(RetryAfter.delay(from: value, now: Self.now) == nil)
    }

    @Test func fractionOfNowCountsAgainstTheDate() throws {
        let now = Self.now.addingTimeInterval(0.25)
        let delay = try #require(RetryAfter.delay(from: "Sun, 06 Nov 1994 08:49:37 GMT", now: now))
        #expect(delay == .milliseconds(119_750))
    }
}
