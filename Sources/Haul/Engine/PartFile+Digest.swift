import Foundation

// Hashing what is in a part file: the engine's use of the model's digests.

extension StreamingDigest {
    /// Feeds the bytes of `range` of `part`, read a MiB at a time.
    mutating func update(from part: PartFile, range: Range<Int64>) throws(DownloadError) {
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(min(Int64(1 << 20), max(1, Int64(range.count)))), alignment: 16)
        defer { chunk.deallocate() }
        var offset = range.lowerBound
        while offset < range.upperBound {
            let wanted = UnsafeMutableRawBufferPointer(rebasing: chunk[0..<Int(min(Int64(chunk.count), range.upperBound - offset))])
            let n = try part.read(into: wanted, at: offset)
            guard n > 0 else { throw .io("read", path: part.path, errno: EIO) }
            update(UnsafeRawBufferPointer(rebasing: chunk[0..<n]))
            offset += Int64(n)
        }
    }
}

extension PieceChecksums {
    /// Hashes piece `index` of `part` and compares it with its digest.
    func matches(_ index: Int, of part: PartFile, total: Int64) throws(DownloadError) -> Bool {
        var digest = StreamingDigest(algorithm)
        try digest.update(from: part, range: range(of: index, total: total))
        return digest.finalizeHex() == hashes[index]
    }
}
