import Foundation
import Crypto
import NIOCore

/// A digest the finished file must match, e.g. `sha-256=9f86d0…`.
public struct Checksum: Sendable, Hashable, Codable, CustomStringConvertible {
    /// A supported digest algorithm.
    public enum Algorithm: String, Sendable, Hashable, Codable, CaseIterable {
        /// MD5 (`md5`): catches damage, not tampering.
        case md5 = "md5"
        /// SHA-1 (`sha-1`).
        case sha1 = "sha-1"
        /// SHA-256 (`sha-256`).
        case sha256 = "sha-256"
        /// SHA-512 (`sha-512`).
        case sha512 = "sha-512"

        /// The algorithm a Metalink (`sha-256`, v4), Metalink 3 (`sha256`) or RFC 3230 (`SHA`,
        /// `SHA-256`) digest type names, or nil for one Haul does not check.
        static func named(_ name: String) -> Checksum.Algorithm? {
            switch name.lowercased().replacingOccurrences(of: "-", with: "") {
            case "md5": .md5
            case "sha1", "sha": .sha1
            case "sha256": .sha256
            case "sha512": .sha512
            default: nil
            }
        }

        /// How strong a digest is: a higher number is stronger.
        static func strength(_ algorithm: Checksum.Algorithm) -> Int {
            switch algorithm {
            case .md5: 0
            case .sha1: 1
            case .sha256: 2
            case .sha512: 3
            }
        }

        var hexLength: Int {
            switch self {
            case .md5: 32
            case .sha1: 40
            case .sha256: 64
            case .sha512: 128
            }
        }
    }

    /// The algorithm.
    public let algorithm: Algorithm
    /// The expected digest, lowercase hex.
    public let hex: String

    /// Parses aria2's form `ALGO=HEX` (`sha-256`, `sha256`, `sha-1`, `sha1`, `sha-512`, `md5`).
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/invalidRequest`` naming what is wrong.
    public init(parsing text: String) throws(DownloadError) {
        guard let equals = text.firstIndex(of: "=") else {
            throw .invalidRequest("bad checksum \"\(text)\": expected ALGORITHM=HEX, e.g. sha-256=…")
        }
        let name = text[..<equals].lowercased()
        let hex = text[text.index(after: equals)...].lowercased()
        let normalised = name.replacingOccurrences(of: "sha", with: "sha-").replacingOccurrences(of: "--", with: "-")
        guard let algorithm = Algorithm(rawValue: name) ?? Algorithm(rawValue: normalised) else {
            let names = Algorithm.allCases.map(\.rawValue).joined(separator: ", ")
            throw .invalidRequest("unknown checksum algorithm \"\(name)\": use one of \(names)")
        }
        guard hex.count == algorithm.hexLength, hex.allSatisfy(\.isHexDigit) else {
            throw .invalidRequest("bad \(algorithm.rawValue) checksum: expected \(algorithm.hexLength) hex digits")
        }
        self.algorithm = algorithm
        self.hex = hex
    }

    /// A digest already known to be `algorithm`'s length in lowercase hex.
    init(algorithm: Algorithm, validHex hex: String) {
        self.algorithm = algorithm
        self.hex = hex
    }

    /// `sha-256=…`
    public var description: String { "\(algorithm.rawValue)=\(hex)" }
}

/// A running digest fed with the body bytes in file order.
struct StreamingDigest {
    private enum State {
        case md5(Insecure.MD5)
        case sha1(Insecure.SHA1)
        case sha256(SHA256)
        case sha512(SHA512)
    }
    private var state: State

    init(_ algorithm: Checksum.Algorithm) {
        switch algorithm {
        case .md5: state = .md5(Insecure.MD5())
        case .sha1: state = .sha1(Insecure.SHA1())
        case .sha256: state = .sha256(SHA256())
        case .sha512: state = .sha512(SHA512())
        }
    }

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        switch state {
        case .md5(var h): h.update(bufferPointer: bytes); state = .md5(h)
        case .sha1(var h): h.update(bufferPointer: bytes); state = .sha1(h)
        case .sha256(var h): h.update(bufferPointer: bytes); state = .sha256(h)
        case .sha512(var h): h.update(bufferPointer: bytes); state = .sha512(h)
        }
    }

    mutating func update(_ buffer: ByteBuffer) {
        buffer.withUnsafeReadableBytes { update($0) }
    }

    func finalizeHex() -> String {
        let bytes: [UInt8] =
            switch state {
            case .md5(let h): Array(h.finalize())
            case .sha1(let h): Array(h.finalize())
            case .sha256(let h): Array(h.finalize())
            case .sha512(let h): Array(h.finalize())
            }
        return bytes.map { String(format: "%02x", $0) }.joined()
    }
}

/// The digests of a file's pieces, in order: each piece is `length` bytes but the last, which
/// holds the rest. A piece is checked as soon as its bytes are in, so a bad source is found
/// and dropped after one piece rather than after the whole file (Metalink's `<pieces>`).
public struct PieceChecksums: Sendable, Hashable, Codable {
    /// The algorithm of every piece's digest.
    public var algorithm: Checksum.Algorithm
    /// Bytes per piece (the last may be shorter).
    public var length: Int64
    /// One digest per piece, lowercase hex.
    public var hashes: [String]

    /// Pieces of `length` bytes with these digests.
    public init(algorithm: Checksum.Algorithm, length: Int64, hashes: [String]) {
        self.algorithm = algorithm
        self.length = length
        self.hashes = hashes.map { $0.lowercased() }
    }

    /// The most pieces one file may list: 1 MiB pieces of a 1 TiB file.
    public static let maxPieces = 1 << 20
    /// The longest piece: 1 TiB (no offset arithmetic on it can overflow).
    public static let maxLength: Int64 = 1 << 40

    /// A positive length, at least one piece and not too many, every digest as long as its
    /// algorithm's.
    func validate() throws(DownloadError) {
        guard (1...Self.maxLength).contains(length) else {
            throw .invalidRequest("the piece length must be between 1 and \(Self.maxLength) bytes, not \(length)")
        }
        guard !hashes.isEmpty, hashes.count <= Self.maxPieces else {
            throw .invalidRequest("\(hashes.count) piece digests: expected 1 to \(Self.maxPieces)")
        }
        for hash in hashes where hash.count != algorithm.hexLength || !hash.allSatisfy(\.isHexDigit) {
            throw .invalidRequest("bad \(algorithm.rawValue) piece digest: expected \(algorithm.hexLength) hex digits")
        }
    }

    /// The byte range of piece `index` in a file of `total` bytes.
    func range(of index: Int, total: Int64) -> Range<Int64> {
        let start = Int64(index) * length
        return start..<min(total, start + length)
    }

    /// Whether the pieces describe a file of `total` bytes: as many as it takes, no more.
    func fits(total: Int64) -> Bool {
        guard total > 0, length > 0 else { return false }
        let (whole, rest) = total.quotientAndRemainder(dividingBy: length)
        return Int64(hashes.count) == whole + (rest > 0 ? 1 : 0)
    }

    /// The pieces that `range` touches.
    func indices(overlapping range: Range<Int64>) -> Range<Int> {
        guard !range.isEmpty else { return 0..<0 }
        let first = Int(range.lowerBound / length)
        let last = Int((range.upperBound - 1) / length)
        return first..<min(hashes.count, last + 1)
    }

    /// The pieces wholly inside `ranges`, as byte ranges: what of a part file counts as
    /// verified (the rest of a piece is fetched again with it).
    func wholePieces(of ranges: ByteRanges, total: Int64) -> ByteRanges {
        var whole = ByteRanges()
        for range in ranges.ranges {
            let (before, into) = range.lowerBound.quotientAndRemainder(dividingBy: length)
            let first = before + (into > 0 ? 1 : 0)
            // A range that reaches the end of the file holds the short last piece too.
            let end = range.upperBound >= total ? Int64(hashes.count) : range.upperBound / length
            if end > first { whole.insert(first * length..<min(total, end * length)) }
        }
        return whole
    }

    /// `piece 3 (bytes 3145728–4194303)`, for messages.
    func describe(_ index: Int, total: Int64) -> String {
        let range = range(of: index, total: total)
        return "piece \(index) (bytes \(range.lowerBound)–\(range.upperBound - 1))"
    }
}
