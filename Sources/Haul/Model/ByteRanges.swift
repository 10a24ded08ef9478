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
        // Read byte by byte (a store's every row holds one: split into substrings and parsed
        // as `Int64`s, 5,000 rows took 2 ms): parts between commas (empty ones skipped), each
        // two numbers (an optional `+`, digits) around one `-`.
        var found: [Range<Int64>] = []
        let parsed = text.utf8.withContiguousStorageIfAvailable { Self.parse($0, into: &found) } ?? Self.parse(Array(text.utf8), into: &found)
        guard parsed else { return nil }
        for range in found {
            // As ``description`` writes them: in order, apart, none empty.
            if !range.isEmpty, ranges.last.map({ $0.upperBound < range.lowerBound }) ?? true {
                ranges.append(range)
            } else {
                insert(range)
            }
        }
    }

    private static func parse(_ bytes: some Collection<UInt8>, into found: inout [Range<Int64>]) -> Bool {
        var lower: Int64?
        var number: Int64 = 0
        var digits = 0
        var signed = false
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                let (times10, overflow) = number.multipliedReportingOverflow(by: 10)
                let (sum, overflowAdding) = times10.addingReportingOverflow(Int64(byte - UInt8(ascii: "0")))
                guard !overflow, !overflowAdding else { return false }
                number = sum
                digits += 1
            case UInt8(ascii: "+"):
                guard digits == 0, !signed else { return false }
                signed = true
            case UInt8(ascii: "-"):
                guard lower == nil, digits > 0 else { return false }
                lower = number
                (number, digits, signed) = (0, 0, false)
            case UInt8(ascii: ","):
                guard close(lower, number, digits, signed, into: &found) else { return false }
                (lower, number, digits, signed) = (nil, 0, 0, false)
            default:
                return false
            }
        }
        return close(lower, number, digits, signed, into: &found)
    }

    /// Ends a part: nothing (an empty part), or `lower-upper` with `upper` the number just read.
    private static func close(_ lower: Int64?, _ upper: Int64, _ digits: Int, _ signed: Bool, into found: inout [Range<Int64>]) -> Bool {
        guard let lower else { return digits == 0 && !signed }
        guard digits > 0, upper >= lower else { return false }
        found.append(lower..<upper)
        return true
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
