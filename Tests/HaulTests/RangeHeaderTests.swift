import Testing
@testable import Haul

@Suite("Range header")
struct RangeHeaderTests {
    @Test(
        "builds a single range",
        arguments: [
            (Int64(0), Int64?.none, "bytes=0-"),
            (1024, nil, "bytes=1024-"),
            (0, 0, "bytes=0-0"),
            (500, 999, "bytes=500-999"),
            (Int64.max - 1, Int64.max - 1, "bytes=9223372036854775806-9223372036854775806"),
        ])
    func value(start: Int64, end: Int64?, expected: String) {
        #expect(RangeHeader.value(from: start, to: end) == expected)
    }

    @Test func defaultsToOpenEnded() {
        #expect(RangeHeader.value(from: 7) == "bytes=7-")
    }

}
