import Testing
@testable import Haul

@Suite struct ByteRangesTests {
    @Test func insertMergesTouchingAndOverlappingRanges() {
        var ranges = ByteRanges()
        ranges.insert(10..<20)
        ranges.insert(0..<5)
        ranges.insert(5..<10)
        ranges.insert(30..<40)
        #expect(ranges.ranges == [0..<20, 30..<40])
        #expect(ranges.contiguousPrefix == 20)
        #expect(ranges.byteCount == 30)
        #expect(ranges.clamped(to: 35).ranges == [0..<20, 30..<35])
    }

    @Test(arguments: ["", "0-10", "0-10,20-30"])
    func textRoundTrips(text: String) throws {
        let parsed = try #require(ByteRanges(parsing: text))
        #expect(parsed.description == text)
    }

    @Test(arguments: [
        "x", "10-5", "-1-4", "1-2-3", "5", "5-", "-5", "+", "++1-2", "1+-2", " 1-2", "1-2 ", "1-2,x", "0-99999999999999999999",
        "0-٣",
    ])
    func badTextIsRejected(text: String) {
        #expect(ByteRanges(parsing: text) == nil)
    }

    /// What the store or a token may hold beside ``ByteRanges/description``'s own form: parts out
    /// of order, touching or empty, commas to spare, a `+` before a number (as `Int64("+1")`).
    @Test(arguments: [
        ("20-30,0-10", [0..<10, 20..<30] as [Range<Int64>]), ("0-5,5-10", [0..<10]), ("0-10,2-4", [0..<10]), ("5-5", []),
        (",0-5,,7-9,", [0..<5, 7..<9]), ("+1-+4", [1..<4]), (",", []), ("0-9223372036854775807", [0..<Int64.max]),
    ])
    func textIsNormalised(text: String, ranges: [Range<Int64>]) throws {
        #expect(try #require(ByteRanges(parsing: text)).ranges == ranges)
    }
}
