/// `count` bytes whose values follow their offsets, so a shifted range shows up as a mismatch.
func testContent(_ count: Int, seed: Int = 0) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: ($0 + seed) % 251) }
}

/// Decodes a chunked body (no trailers); nil if the framing is broken.
func dechunk(_ raw: [UInt8]) -> [UInt8]? {
    var body: [UInt8] = []
    var rest = raw[...]
    while let lineEnd = rest.firstIndex(of: UInt8(ascii: "\r")) {
        guard let size = Int(String(decoding: rest[..<lineEnd], as: UTF8.self), radix: 16) else { return nil }
        let start = lineEnd + 2
        guard rest.endIndex >= start + size + 2 else { return nil }
        if size == 0 { return body }
        body += rest[start..<(start + size)]
        rest = rest[(start + size + 2)...]
    }
    return nil
}
