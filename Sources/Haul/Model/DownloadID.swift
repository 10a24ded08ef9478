import Synchronization

/// A download's id: 64 bits, written as 16 lowercase hex digits like aria2's GID.
///
/// Eight bytes instead of a 16-character string (which Swift keeps on the heap): a queue of a
/// million downloads holds a million of these in several indexes.
public struct DownloadID: Hashable, Comparable, Sendable, Codable, CustomStringConvertible, LosslessStringConvertible {
    /// The id's 64 bits.
    public let rawValue: UInt64

    /// The id with these 64 bits.
    public init(rawValue: UInt64) {
        self.rawValue = rawValue
    }

    /// Exactly 16 hex digits, either case.
    public init?(_ description: String) {
        guard description.utf8.count == 16, let value = UInt64(description, radix: 16) else { return nil }
        rawValue = value
    }

    /// The 16 lowercase hex digits (`5f1c02a000000001`).
    public var description: String {
        let digits = String(rawValue, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// A new id: a random 32-bit prefix drawn once per process, then a count. Ids of
    /// different processes differ by their prefix; the ids of one process follow each other,
    /// so the rows of downloads added together sit together in the store's table, and a
    /// transaction that records a hundred of them running or finished rewrites a few pages,
    /// not a hundred scattered ones. A million ids cost one call to the system's random source.
    static func next() -> DownloadID {
        while true {
            let next = sequence.wrappingAdd(1, ordering: .relaxed).newValue
            // Never 0, and never the all-zero count (after 2^32 ids the prefix moves on by one).
            if next >> 32 != 0, next & 0xFFFF_FFFF != 0 { return DownloadID(rawValue: next) }
        }
    }

    private static let sequence = Atomic<UInt64>(UInt64(UInt32.random(in: 1...UInt32.max)) << 32)

    /// Ids compare by their bits: the ids one process makes follow each other.
    public static func < (a: DownloadID, b: DownloadID) -> Bool { a.rawValue < b.rawValue }

    /// Reads the 16 hex digits of ``description``.
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let id = DownloadID(text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a download id: \(text)"))
        }
        self = id
    }

    /// Writes the 16 hex digits of ``description``.
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
