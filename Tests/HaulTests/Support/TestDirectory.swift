import Foundation

/// A fresh folder under the system temp dir, removed by `remove()` (call it in `defer`).
struct TestDirectory: Sendable {
    let path: String

    init() throws {
        path = (NSTemporaryDirectory() as NSString).appendingPathComponent("haul-test-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> String { (path as NSString).appendingPathComponent(name) }

    func contents(_ name: String) -> [UInt8]? {
        FileManager.default.contents(atPath: file(name)).map { Array($0) }
    }

    func exists(_ name: String) -> Bool { FileManager.default.fileExists(atPath: file(name)) }

    func write(_ name: String, _ bytes: [UInt8], creatingFolders: Bool = false) throws {
        if creatingFolders {
            try FileManager.default.createDirectory(
                atPath: (file(name) as NSString).deletingLastPathComponent,
                withIntermediateDirectories: true)
        }
        try Data(bytes).write(to: URL(fileURLWithPath: file(name)))
    }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// Deterministic pseudo-random bytes, so a failure can be reproduced.
func testBytes(_ count: Int, seed: UInt64 = 42) -> [UInt8] {
    // Eight bytes a step through raw memory: tests make tens of megabytes of these, and an
    // unoptimised build spends seconds of a shared thread on a byte-at-a-time `map`.
    var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
    return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
        guard count > 0, let base = buffer.baseAddress else { initialized = 0; return }
        var offset = 0
        while offset < count {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            var word = state
            let length = min(8, count - offset)
            withUnsafeBytes(of: &word) { (base + offset).update(from: $0.baseAddress!.assumingMemoryBound(to: UInt8.self), count: length) }
            offset += length
        }
        initialized = count
    }
}
