import Foundation
import Testing
@testable import Haul
@testable import HaulDaemon

/// aria2's `bitfield` from byte ranges: one bit a 1 MiB piece, the first piece in the highest
/// bit, padded to whole bytes, a bit set only when all of its piece is in the ranges.
@Suite struct Aria2BitfieldTests {
    static let mib: Int64 = 1 << 20

    @Test(
        arguments: [
            // (ranges in MiB unless noted, total length, bitfield)
            ([], 8 * mib, "00"),
            ([0..<8 * mib], 8 * mib, "ff"),
            ([0..<mib + 512 << 10, 4 * mib..<5 * mib + 512 << 10], 8 * mib, "88"),
            // A piece one byte short is not there.
            ([0..<mib - 1, mib..<3 * mib], 8 * mib, "60"),
            // The last (tenth) piece is shorter: it is whole once the file's end is in.
            ([9 * mib..<9 * mib + 100], 9 * mib + 100, "0040"),
            ([0..<9 * mib + 100], 9 * mib + 100, "ffc0"),
            // A small file is one piece.
            ([0..<1000], 1000, "80"),
            ([0..<999], 1000, "00"),
        ] as [([Range<Int64>], Int64, String)])
    func piecesOnDisk(ranges: [Range<Int64>], total: Int64, bitfield: String) {
        #expect(DownloadManager.Download.bitfield(ByteRanges(ranges), totalLength: total) == bitfield)
    }
}
