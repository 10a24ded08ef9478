/// A set of disjoint, sorted, half-open byte ranges: the parts of a file known to be on disk.
///
/// Progress is modelled as ranges from the first schema on, so segmented downloads can
/// record several holes without a new store layout. Adjacent ranges are merged.
public struct ByteRanges: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The ranges, sorted by their lower bound, never empty, never touching.
    public private(set) var ranges: [Range<Int64>]

    /// An empty set.
    public init() { self.ranges = [] }

    /// Whether no byte is in the set.
    public var isEmpty: Bool { ranges.isEmpty }

    /// A set holding the given ranges, normalised (sorted and merged).
    public init(_ ranges: [Range<Int64>]) {
        self.ranges = []
        for range in ranges { insert(range) }
    }

    /// Adds a range, merging it with any range it overlaps or touches.
    public mutating func insert(_ range: Range<Int64>) {
        guard !range.isEmpty else { return }
        var merged = range
        var result: [Range<Int64>] = []
        result.reserveCapacity(ranges.count + 1)
        for existing in ranges {
            if existing.upperBound < merged.lowerBound || merged.upperBound < existing.lowerBound {
                result.append(existing)
            } else {
                merged = min(existing.lowerBound, merged.lowerBound)..<max(existing.upperBound, merged.upperBound)
            }
        }
        result.append(merged)
        result.sort { $0.lowerBound < $1.lowerBound }
        ranges = result
    }

    /// Takes a range out, splitting a range it falls inside.
    public mutating func remove(_ range: Range<Int64>) {
        guard !range.isEmpty else { return }
        var result: [Range<Int64>] = []
        result.reserveCapacity(ranges.count + 1)
        for existing in ranges {
            if existing.upperBound <= range.lowerBound || range.upperBound <= existing.lowerBound {
                result.append(existing)
                continue
            }
            if existing.lowerBound < range.lowerBound { result.append(existing.lowerBound..<range.lowerBound) }
            if range.upperBound < existing.upperBound { result.append(range.upperBound..<existing.upperBound) }
        }
        ranges = result
    }

    /// Whether every byte of `range` is in the set.
    public func contains(_ range: Range<Int64>) -> Bool {
        range.isEmpty || ranges.contains { $0.lowerBound <= range.lowerBound && range.upperBound <= $0.upperBound }
    }

    /// Total number of bytes covered.
    public var byteCount: Int64 { ranges.reduce(0) { $0 + ($1.upperBound - $1.lowerBound) } }

    /// Where the run of bytes that starts at offset 0 ends (0 when byte 0 is missing).
    public var contiguousPrefix: Int64 {
        guard let first = ranges.first, first.lowerBound == 0 else { return 0 }
        return first.upperBound
    }

    /// This set limited to `0..<limit`.
    public func clamped(to limit: Int64) -> ByteRanges {
        ByteRanges(
            ranges.compactMap { range in
                let upper = min(range.upperBound, limit)
                return upper > range.lowerBound ? range.lowerBound..<upper : nil
            })
    }

    /// `"0-1048576,2097152-3145728"`: half-open ranges (`start-end`, the end not included: the
    /// first range is bytes 0 through 1048575), the form kept in the store.
    public var description: String {
        ranges.map { "\($0.lowerBound)-\($0.upperBound)" }.joined(separator: ",")
    }

    /// Parses the form written by ``description``; nil on anything else.
    public init?(parsing text: String) {
        self.init()
        guard !text.isEmpty else { return }
        for part in text.split(separator: ",") {
            let bounds = part.split(separator: "-", omittingEmptySubsequences: false)
            guard bounds.count == 2, let lower = Int64(bounds[0]), let upper = Int64(bounds[1]),
                lower >= 0, upper >= lower
            else { return nil }
            insert(lower..<upper)
        }
    }

    /// One range as JSON writes it: where it starts and how many bytes it holds, so that
    /// no reader has to guess whether an end is inclusive (HTTP's `Range`) or not (Swift's `..<`).
    private struct Span: Codable {
        var offset: Int64
        var length: Int64
    }

    /// Reads `[{"offset": 0, "length": 1048576}, …]`, or the text form of ``description``
    /// (`"0-1048576"`, half-open) that resume tokens of version 1 hold.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let text = try? container.decode(String.self) {
            guard let parsed = ByteRanges(parsing: text) else {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "bad byte ranges \(text)"))
            }
            self = parsed
            return
        }
        let spans = try container.decode([Span].self)
        guard spans.allSatisfy({ $0.offset >= 0 && $0.length >= 0 && $0.offset <= Int64.max - $0.length }) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "a byte range with a negative offset or length"))
        }
        self.init(spans.map { $0.offset..<($0.offset + $0.length) })
    }

    /// Writes `[{"offset": 0, "length": 1048576}, …]`: each range's first byte and its size.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(ranges.map { Span(offset: $0.lowerBound, length: $0.upperBound - $0.lowerBound) })
    }
}
