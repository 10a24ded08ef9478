import Testing
@testable import Haul

@Suite("Content-Range")
struct ContentRangeTests {
    @Test(
        "parses a byte range",
        arguments: [
            ("bytes 0-499/1234", ContentRange(first: 0, last: 499, total: 1234)),
            ("bytes 500-1233/1234", ContentRange(first: 500, last: 1233, total: 1234)),
            ("bytes 0-0/1", ContentRange(first: 0, last: 0, total: 1)),
            ("bytes 42-99/*", ContentRange(first: 42, last: 99, total: nil)),
            ("BYTES 1-2/3", ContentRange(first: 1, last: 2, total: 3)),
            ("  bytes\t 7 - 9 / 10  ", ContentRange(first: 7, last: 9, total: 10)),
            (
                "bytes 0-9223372036854775806/9223372036854775807",
                ContentRange(first: 0, last: 9_223_372_036_854_775_806, total: 9_223_372_036_854_775_807)
            ),
        ])
    func valid(value: String, expected: ContentRange) {
        #expect(ContentRange.parse(value) == expected)
    }

    @Test(
        "rejects",
        arguments: [
            "",
            "bytes",
            "bytes ",
            "bytes 5-4/10",  // last < first
            "bytes 0-9/9",  // total <= last
            "bytes 0-9/5",
            "bytes -1-9/10",  // negative
            "bytes 0--9/10",
            "bytes +0-9/10",  // signs are not DIGIT
            "bytes 0-9/-10",
            "items 0-9/10",  // another unit
            "bytes=0-9/10",  // Range syntax, not Content-Range
            "bytes0-9/10",
            "bytes 0-9",  // no complete length
            "bytes 0-9/10/11",
            "bytes 0-9-10/11",
            "bytes 1 2-30/40",
            "bytes 0x10-0x20/0x30",
            "bytes */100",  // the unsatisfied form is not a range
            "bytes 0-*/*",
            "garbage",
            "bytes 0-99999999999999999999/*",  // overflows Int64
            "bytes 0-1/99999999999999999999",
            "bytes 0-9223372036854775807/*",  // length would overflow
            "bytes ٠-٩/١٠",  // non-ASCII digits
        ])
    func invalid(value: String) {
        #expect(ContentRange.parse(value) == nil)
    }

    @Test(
        "reads the unsatisfied form",
        arguments: [
            ("bytes */1234", Int64(1234) as Int64?),
            ("bytes */0", 0),
            ("Bytes  * / 77 ", 77),
            ("bytes */*", nil),
            ("bytes */-1", nil),
            ("bytes 0-9/10", nil),
            ("bytes */99999999999999999999", nil),
            ("lines */10", nil),
            ("*/10", nil),
        ])
    func unsatisfied(value: String, expected: Int64?) {
        #expect(ContentRange.parseUnsatisfied(value) == expected)
    }

    @Test func length() throws {
        let range = try #require(ContentRange.parse("bytes 100-199/1000"))
        #expect(range.length == 100)
        #expect(ContentRange(first: 5, last: 5, total: nil).length == 1)
    }
}
