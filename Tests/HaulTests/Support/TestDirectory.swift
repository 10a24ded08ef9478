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
            try FileManager.default.createDirectory(atPath: (file(name) as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true)
        }
        try Data(bytes).write(to: URL(fileURLWithPath: file(name)))
    }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// Deterministic pseudo-random bytes, so a failure can be reproduced.
func testBytes(_ count: Int, seed: UInt64 = 42) -> [UInt8] {
    var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
    return (0..<count).map { _ in
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return UInt8(truncatingIfNeeded: state)
    }
}
