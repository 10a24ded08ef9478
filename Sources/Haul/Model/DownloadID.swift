import Synchronization

/// A download's id: 64 bits, written as 16 lowercase hex digits like aria2's GID.
///
/// Eight bytes instead of a 16-character string (which Swift keeps on the heap): a queue of a
/// million downloads holds a million of these in several indexes.
public struct DownloadID: Hashable, Comparable, Sendable, Codable, CustomStringConvertible, LosslessStringConvertible {
    public let rawValue: UInt64

    public init(rawValue: UInt64) {
        self.rawValue = rawValue
    }

    /// Exactly 16 hex digits, either case.
    public init?(_ description: String) {
        guard description.utf8.count == 16, let value = UInt64(description, radix: 16) else { return nil }
        rawValue = value
    }

    public var description: String {
        let digits = String(rawValue, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// A random id, never 0: SplitMix64 over a counter from a random start, so a list of a
    /// million ids costs one call to the system's random source, not a million.
    static func random() -> DownloadID {
        while true {
            var z = sequence.wrappingAdd(0x9E37_79B9_7F4A_7C15, ordering: .relaxed).newValue
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            if z != 0 { return DownloadID(rawValue: z) }
        }
    }

    private static let sequence = Atomic<UInt64>(UInt64.random(in: 0...UInt64.max))

    public static func < (a: DownloadID, b: DownloadID) -> Bool { a.rawValue < b.rawValue }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let id = DownloadID(text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a download id: \(text)"))
        }
        self = id
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }

    /// The id as SQLite stores it (the same 64 bits, signed).
    var storedValue: Int64 { Int64(bitPattern: rawValue) }

    init(stored value: Int64) {
        rawValue = UInt64(bitPattern: value)
    }
}
