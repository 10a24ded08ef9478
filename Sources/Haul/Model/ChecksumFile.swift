import Foundation

/// A published list of digests by file name — a `SHA256SUMS` file — read into
/// ``Checksum``s to check downloads against.
///
/// Both formats the usual tools write are read, mixed freely:
///
/// - GNU coreutils (`sha256sum`, `md5sum`, …): `HEX  NAME`, or `HEX *NAME` (the binary
///   marker). The algorithm follows from the digest's length: 32 hex digits are MD5, 40
///   SHA-1, 64 SHA-256 and 128 SHA-512. A line starting with `\` has an escaped name:
///   `\\` is a backslash, `\n` a newline, `\r` a carriage return.
/// - BSD and `--tag`: `SHA256 (NAME) = HEX`, with `MD5`, `SHA1`, `SHA256` and `SHA512`, also
///   spelt `SHA-1`, `SHA-256`, `SHA-512` or `SHA2-256`, `SHA2-512`.
///
/// Blank lines and lines starting with `#` are skipped; a leading `./` of a name is dropped.
/// Anything else is an error naming the file and line: a line in neither format, a digest of
/// the wrong length, a NUL byte, a line longer than ``maxLineBytes``, a file larger than
/// ``maxBytes``, or one name listed twice with different digests of one algorithm. A name
/// listed with several algorithms keeps its strongest digest.
///
/// ```swift
/// let sums = try ChecksumFile(contentsOfFile: "SHA256SUMS")
/// request.checksum = sums.checksum(forPath: "haul-1.0.tar.gz")
/// ```
public struct ChecksumFile: Sendable {
    /// Where the list came from (a path or URL), as errors name it.
    public let source: String
    /// Each listed name (without a leading `./`) and its digest.
    public private(set) var checksums: [String: Checksum] = [:]
    /// How many listed names end with each base name: a name alone matches only when one does.
    private var baseNameCounts: [String: Int] = [:]

    /// The largest list read: 64 MiB.
    public static let maxBytes = 64 << 20
    /// The longest line read: 16 KiB (a name is at most a few KiB on any file system).
    public static let maxLineBytes = 16 << 10

    /// Reads the list in `bytes`; `source` names it in errors.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/invalidRequest``, naming
    ///   `source` and the line, when a line cannot be read or contradicts an earlier one.
    public init(parsing bytes: [UInt8], source: String) throws(DownloadError) {
        self.source = source
        guard bytes.count <= Self.maxBytes else {
            throw .invalidRequest("checksum file \(source) is larger than \(Self.maxBytes >> 20) MiB")
        }
        // The line each digest came from, to name both lines of a contradiction.
        var lineOf: [String: [Checksum.Algorithm: Int]] = [:]
        var listed: [String: [Checksum.Algorithm: Checksum]] = [:]
        var start = 0
        var number = 0
        while start < bytes.count {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
            number += 1
            let line = bytes[start..<end]
            start = end + 1
            let entry: (name: String, checksum: Checksum)?
            do throws(LineError) {
                entry = try Self.entry(line)
            } catch {
                throw .invalidRequest("\(source):\(number): \(error.message)")
            }
            guard let entry else { continue }
            let (name, checksum) = entry
            if let earlier = listed[name]?[checksum.algorithm] {
                guard earlier == checksum else {
                    let first = lineOf[name]?[checksum.algorithm] ?? 0
                    throw .invalidRequest(
                        "\(source):\(number): \(name) is listed twice with different \(checksum.algorithm.rawValue) digests (first on line \(first))")
                }
                continue
            }
            listed[name, default: [:]][checksum.algorithm] = checksum
            lineOf[name, default: [:]][checksum.algorithm] = number
        }
        for (name, digests) in listed {
            // The strongest of a name's digests: the algorithms are listed weakest first.
            guard let strongest = Checksum.Algorithm.allCases.reversed().lazy.compactMap({ digests[$0] }).first else { continue }
            checksums[name] = strongest
            baseNameCounts[Self.baseName(name), default: 0] += 1
        }
    }

    /// Reads the list at `path`.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/io`` when the file cannot be
    ///   read, ``DownloadError/Kind/invalidRequest`` when it is too large or a line is bad.
    public init(contentsOfFile path: String) throws(DownloadError) {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw .io("cannot read checksum file \(path): \(String(cString: strerror(errno)))")
        }
        defer { try? handle.close() }
        let data: Data?
        // One byte more than allowed tells a file that is too large, without reading all of it.
        do { data = try handle.read(upToCount: Self.maxBytes + 1) } catch {
            throw .io("cannot read checksum file \(path): \(error.localizedDescription)")
        }
        try self.init(parsing: data.map { Array($0) } ?? [], source: path)
    }

    /// How many names are listed.
    public var count: Int { checksums.count }

    /// The digest listed for the file at `path` (relative, `/`-separated; a leading `./` is
    /// ignored): the one listed under `path` itself, else the one listed under its base name
    /// alone, when no other listed name has that base name. Nil when it is not listed.
    public func checksum(forPath path: String) -> Checksum? {
        let name = Self.normalized(path)
        if let exact = checksums[name] { return exact }
        let base = Self.baseName(name)
        guard base != name, baseNameCounts[base] == 1 else { return nil }
        return checksums[base]
    }

    /// Whether ``checksum(forPath:)`` finds `path` only under its base name.
    public func matchesByBaseNameOnly(_ path: String) -> Bool {
        let name = Self.normalized(path)
        return checksums[name] == nil && checksum(forPath: name) != nil
    }

    /// The digest listed for the file at `path`, which must be listed.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/checksum`` when it is not.
    public func requiredChecksum(forPath path: String) throws(DownloadError) -> Checksum {
        guard let checksum = checksum(forPath: path) else { throw notListed(path) }
        return checksum
    }

    /// The error of a file that must be listed and is not: of kind ``DownloadError/Kind/checksum``.
    public func notListed(_ path: String) -> DownloadError {
        DownloadError(kind: .checksum, message: "\(path) is not in the checksum file \(source): not downloaded (--require-checksum)")
    }

    /// `name` without leading `./`.
    static func normalized(_ name: String) -> String {
        var name = Substring(name)
        while name.hasPrefix("./") {
            name = name.dropFirst(2)
            while name.hasPrefix("/") { name = name.dropFirst() }
        }
        return String(name)
    }

    /// What follows the last `/` of `name` (all of it without one).
    package static func baseName(_ name: String) -> String {
        guard let slash = name.lastIndex(of: "/") else { return name }
        return String(name[name.index(after: slash)...])
    }

    private struct LineError: Error {
        var message: String
        init(_ message: String) { self.message = message }
    }

    /// One line's name and digest; nil for a blank line or a comment.
    private static func entry(_ raw: ArraySlice<UInt8>) throws(LineError) -> (String, Checksum)? {
        guard raw.count <= maxLineBytes else { throw LineError("the line is longer than \(maxLineBytes) bytes") }
        guard !raw.contains(0) else { throw LineError("the line holds a NUL byte") }
        var bytes = raw
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw LineError("the line is not UTF-8") }
        var line = Substring(text)
        while let first = line.first, first == " " || first == "\t" { line.removeFirst() }
        if line.isEmpty || line.hasPrefix("#") { return nil }
        let escaped = line.hasPrefix("\\")
        if escaped { line.removeFirst() }
        let (name, checksum): (Substring, Checksum)
        if let tagged = try tagged(line) { (name, checksum) = tagged } else { (name, checksum) = try gnu(line) }
        let unescaped = escaped ? try unescape(name) : String(name)
        let normalizedName = normalized(unescaped)
        guard !normalizedName.isEmpty else { throw LineError("the file name is empty") }
        return (normalizedName, checksum)
    }

    /// `HEX  NAME` or `HEX *NAME`.
    private static func gnu(_ line: Substring) throws(LineError) -> (Substring, Checksum) {
        let expected = "expected 'HEX  NAME', 'HEX *NAME' or 'ALGORITHM (NAME) = HEX'"
        guard let space = line.firstIndex(of: " ") else { throw LineError(expected) }
        let hex = line[..<space]
        guard !hex.isEmpty, hex.allSatisfy(\.isHexDigit) else { throw LineError(expected) }
        let marker = line.index(after: space)
        guard marker < line.endIndex, line[marker] == " " || line[marker] == "*" else { throw LineError(expected) }
        let name = line[line.index(after: marker)...]
        guard let algorithm = Checksum.Algorithm.allCases.first(where: { $0.hexLength == hex.count }) else {
            throw LineError("a digest of \(hex.count) hex digits: expected 32 (md5), 40 (sha-1), 64 (sha-256) or 128 (sha-512)")
        }
        return (name, Checksum(algorithm: algorithm, validHex: hex.lowercased()))
    }

    /// The BSD and `--tag` names of each algorithm, uppercase.
    private static let tags: [String: Checksum.Algorithm] = [
        "MD5": .md5, "SHA1": .sha1, "SHA-1": .sha1, "SHA256": .sha256, "SHA-256": .sha256, "SHA2-256": .sha256,
        "SHA512": .sha512, "SHA-512": .sha512, "SHA2-512": .sha512,
    ]

    /// `ALGORITHM (NAME) = HEX`; nil when the line is not in that form.
    private static func tagged(_ line: Substring) throws(LineError) -> (Substring, Checksum)? {
        // A GNU line starts with hex digits and a space; a tag line with a name and " (".
        guard let open = line.firstIndex(of: "("), open > line.startIndex, line[line.index(before: open)] == " " else { return nil }
        let tag = line[..<line.index(before: open)]
        guard !tag.isEmpty, !tag.contains(" ") else { return nil }
        guard let close = line.range(of: ") = ", options: .backwards), close.lowerBound > open else {
            throw LineError("expected 'ALGORITHM (NAME) = HEX'")
        }
        guard let algorithm = tags[tag.uppercased()] else {
            throw LineError("unsupported algorithm \(tag): use MD5, SHA1, SHA256 or SHA512")
        }
        let hex = line[close.upperBound...]
        guard hex.count == algorithm.hexLength, hex.allSatisfy(\.isHexDigit) else {
            throw LineError("bad \(tag) digest: expected \(algorithm.hexLength) hex digits")
        }
        return (line[line.index(after: open)..<close.lowerBound], Checksum(algorithm: algorithm, validHex: hex.lowercased()))
    }

    /// An escaped name: `\\` and `\n` (and `\r`).
    private static func unescape(_ name: Substring) throws(LineError) -> String {
        var result = ""
        var iterator = name.makeIterator()
        while let character = iterator.next() {
            guard character == "\\" else {
                result.append(character)
                continue
            }
            switch iterator.next() {
            case "\\": result.append("\\")
            case "n": result.append("\n")
            case "r": result.append("\r")
            case let other?: throw LineError("unknown escape \\\(other) in the file name")
            case nil: throw LineError("the file name ends with a lone \\")
            }
        }
        return result
    }
}
