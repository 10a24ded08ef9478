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

    @Test(arguments: ["x", "10-5", "-1-4", "1-2-3"])
    func badTextIsRejected(text: String) {
        #expect(ByteRanges(parsing: text) == nil)
    }
}
