@testable import HaulTestSupport
import Testing

/// Range header parsing and date formatting, as plain values.
@Suite struct ByteRangeRequestTests {
    @Test(arguments: [
        ("bytes=0-99", ByteRangeRequest.satisfiable(0...99)),
        ("bytes=50-", .satisfiable(50...99)),
        ("bytes=-10", .satisfiable(90...99)),
        ("bytes=-500", .satisfiable(0...99)),
        ("bytes=99-99", .satisfiable(99...99)),
        ("BYTES=1-2", .satisfiable(1...2)),
        ("bytes=100-", .unsatisfiable),
        ("bytes=-0", .unsatisfiable),
        ("bytes=5-1", .ignored),
        ("bytes=a-1", .ignored),
        ("items=0-1", .ignored),
        ("bytes=", .ignored),
    ])
    func parses(header: String, expected: ByteRangeRequest) {
        #expect(ByteRangeRequest(header: header, length: 100) == expected)
    }

    @Test func formatsIMFFixdate() {
        #expect(HTTPDate.imfFixdate(secondsSince1970: 784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.imfFixdate(secondsSince1970: 1_709_164_800) == "Thu, 29 Feb 2024 00:00:00 GMT")
    }
}
