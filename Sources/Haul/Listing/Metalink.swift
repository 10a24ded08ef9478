import Foundation

#if canImport(FoundationXML)
import FoundationXML
#endif

/// A Metalink document: files, each with the URLs it can be fetched from and the digests it
/// must match — Metalink 4 (RFC 5854, `.meta4`) or Metalink 3 (`.metalink`).
///
/// Each file becomes one download from all of its `http`/`https` URLs:
///
/// ```swift
/// let metalink = try Metalink(parsing: Data(contentsOf: URL(fileURLWithPath: "f.meta4")))
/// for file in metalink.files {
///     _ = try await downloader.download(file.request(in: "/tmp/downloads"))
/// }
/// ```
///
/// The document may come from anyone, so it is read defensively: a document type declaration
/// (where entities would be declared: billion laughs, external entities) is refused before the
/// XML parser sees the document, a document is at most ``maxDocumentBytes`` and lists at most
/// ``maxFiles`` files of at most ``PieceChecksums/maxPieces`` pieces each, a digest of a known
/// type must be well-formed hex of its length, and a file name must be a relative path that
/// stays inside the download folder. Anything else is an error of one line.
public struct Metalink: Sendable, Hashable {
    /// One file of the document.
    public struct File: Sendable, Hashable {
        /// Where the file goes, relative to the download folder: a name, or folders and a name
        /// separated by `/` (each part made safe the way a server's name is).
        public var name: String
        /// The file's length in bytes, when the document gives it.
        public var size: Int64?
        /// Its `http`/`https` URLs, the most preferred first: no URL twice, at most
        /// ``DownloadRequest/maxSources``.
        public var sources: [DownloadRequest.Source]
        /// The strongest whole-file digest the document gives (SHA-512, then SHA-256, SHA-1,
        /// MD5); nil when it gives none of these.
        public var checksum: Checksum?
        /// The digests of the file's pieces, the strongest kind the document gives, when it
        /// gives some.
        public var pieces: PieceChecksums?

        /// A file at `name` fetched from `sources`.
        public init(
            name: String, size: Int64? = nil, sources: [DownloadRequest.Source], checksum: Checksum? = nil,
            pieces: PieceChecksums? = nil
        ) {
            self.name = name
            self.size = size
            self.sources = sources
            self.checksum = checksum
            self.pieces = pieces
        }

        /// The request that downloads this file to ``name`` inside `directory`, with the
        /// options of `template` (connections, headers, network, …): its sources, its digest and
        /// its pieces replace the template's.
        ///
        /// The file stays inside `directory` (its ``DownloadRequest/confinement``) unless the
        /// template already confines it to a folder of its own.
        public func request(in directory: String, template: DownloadRequest? = nil) -> DownloadRequest {
            var request = template ?? DownloadRequest(url: "", directory: directory)
            request.sources = sources
            request.destination = .file((directory as NSString).appendingPathComponent(name))
            request.checksum = checksum
            request.pieces = pieces
            if request.confinement == nil { request.confinement = FilePaths.absolute(directory) }
            return request
        }
    }

    /// The files, in the document's order, that have at least one usable URL.
    public var files: [File]
    /// One line for each file left out because it has no `http`/`https` URL.
    public var skipped: [String]

    /// The largest document read: 32 MiB.
    public static let maxDocumentBytes = 32 << 20
    /// The most files one document may list.
    public static let maxFiles = 100_000
    /// The namespace of Metalink 4 (RFC 5854).
    static let namespace4 = "urn:ietf:params:xml:ns:metalink"
    /// The namespace of Metalink 3.
    static let namespace3 = "http://www.metalinker.org/"

    /// Whether the file at `path` is to be read as a Metalink document when followed (aria2's
    /// `--follow-metalink`): its name ends in `.meta4` or `.metalink`, or its first 4 KiB name
    /// a Metalink namespace. (The file's content type is not kept; these are what aria2 also
    /// goes by.) A file larger than ``maxDocumentBytes`` is not one.
    public static func isDocument(atPath path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        guard let size = try? handle.seekToEnd(), size > 0, size <= UInt64(maxDocumentBytes) else { return false }
        let name = path.lowercased()
        if name.hasSuffix(".meta4") || name.hasSuffix(".metalink") { return true }
        guard (try? handle.seek(toOffset: 0)) != nil, let head = try? handle.read(upToCount: 4096) else { return false }
        let text = String(decoding: head, as: UTF8.self)
        return text.contains("<") && (text.contains(namespace4) || text.contains(namespace3))
    }

    /// Reads a Metalink 4 or Metalink 3 document.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/invalidRequest`` naming what is
    ///   wrong: a document that is not Metalink, not well-formed (with its line), too large,
    ///   carries a document type declaration, a bad name or digest, or no file with a usable URL.
    public init(parsing data: Data) throws(DownloadError) {
        guard data.count <= Self.maxDocumentBytes else {
            throw .invalidRequest("the Metalink document is \(data.count) bytes; at most \(Self.maxDocumentBytes) are read")
        }
        guard !data.isEmpty else { throw .invalidRequest("the Metalink document is empty") }
        try Self.refuseDocumentType(data)
        let parser = XMLParser(data: data)
        let reader = MetalinkReader()
        parser.delegate = reader
        parser.shouldProcessNamespaces = true
        parser.shouldResolveExternalEntities = false
        _ = parser.parse()
        if let failure = reader.failure { throw failure }
        // libxml2 may call a cut document's end a success: the root's end tag must have been read.
        guard reader.ended else { throw .invalidRequest("the Metalink document ends before its root element does") }
        guard !reader.files.isEmpty else {
            if reader.skipped.isEmpty { throw .invalidRequest("the Metalink document lists no files") }
            throw .invalidRequest(
                "no file of the Metalink document has an http:// or https:// URL (\(reader.skipped.count) skipped)")
        }
        files = reader.files
        skipped = reader.skipped
    }

    /// Refuses a document type declaration: that is where entities are declared (billion
    /// laughs, external entities), and the Linux `XMLParser` reports none of them to its delegate.
    ///
    /// Only the prolog is read — the byte order mark, the XML declaration, comments, processing
    /// instructions and white space — up to the root element's `<`; a `<!` that is not a
    /// comment is refused. So that these bytes mean to the parser what they mean here, the
    /// document must be UTF-8: no NUL byte (UTF-16 and UTF-32 have them), nothing but markup
    /// and white space before the root (EBCDIC), and no other encoding declared (UTF-7 would
    /// hide a `<!DOCTYPE` as `+ADw-!DOCTYPE`).
    static func refuseDocumentType(_ data: Data) throws(DownloadError) {
        let bytes = [UInt8](data)
        guard !bytes.contains(0) else {
            throw .invalidRequest("the Metalink document is not UTF-8 (it holds NUL bytes, as UTF-16 and UTF-32 do)")
        }
        func starts(_ prefix: String, at offset: Int) -> Bool {
            bytes[offset...].starts(with: prefix.utf8)
        }
        func end(of terminator: String, after offset: Int) -> Int? {
            let pattern = Array(terminator.utf8)
            var at = offset
            while at + pattern.count <= bytes.count {
                if bytes[at..<at + pattern.count].elementsEqual(pattern) { return at + pattern.count }
                at += 1
            }
            return nil
        }
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }
        var index = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        if starts("<?xml", at: index), index + 5 < bytes.count, isSpace(bytes[index + 5]) || bytes[index + 5] == UInt8(ascii: "?") {
            guard let next = end(of: "?>", after: index + 5) else {
                throw .invalidRequest("the XML declaration of the Metalink document does not end")
            }
            let declaration = String(decoding: bytes[(index + 5)..<(next - 2)], as: UTF8.self)
            if let encoding = Self.pseudoAttribute("encoding", in: declaration),
                !["utf-8", "utf8", "us-ascii", "ascii"].contains(encoding.lowercased())
            {
                throw .invalidRequest("the Metalink document is encoded in \(encoding.debugDescription); only UTF-8 is read")
            }
            index = next
        }
        while index < bytes.count {
            if isSpace(bytes[index]) {
                index += 1
            } else if starts("<!--", at: index) {
                guard let next = end(of: "-->", after: index + 4) else {
                    throw .invalidRequest("a comment of the Metalink document does not end")
                }
                index = next
            } else if starts("<?", at: index) {
                guard let next = end(of: "?>", after: index + 2) else {
                    throw .invalidRequest("a processing instruction of the Metalink document does not end")
                }
                index = next
            } else if starts("<!", at: index) {
                throw .invalidRequest(
                    "the Metalink document has a document type declaration (<!DOCTYPE>); documents that declare entities are refused")
            } else if bytes[index] == UInt8(ascii: "<") {
                return
            } else {
                throw .invalidRequest("the Metalink document is not UTF-8 XML: it has text before its root element")
            }
        }
    }

    /// The value of the pseudo-attribute `name` (`encoding="UTF-8"`) of an XML declaration.
    private static func pseudoAttribute(_ name: String, in declaration: String) -> String? {
        guard let found = declaration.range(of: name) else { return nil }
        var rest = declaration[found.upperBound...].drop { $0.isWhitespace }
        guard rest.first == "=" else { return nil }
        rest = rest.dropFirst().drop { $0.isWhitespace }
        guard let quote = rest.first, quote == "\"" || quote == "'" else { return nil }
        rest = rest.dropFirst()
        return String(rest.prefix { $0 != quote })
    }

    /// `name` as a path relative to the download folder: no absolute path, no `..`, no control
    /// characters or backslashes; empty and `.` parts dropped, each part made safe as a
    /// server's file name is (no leading dots, no bidi controls, not too long).
    static func relativePath(_ name: String) throws(DownloadError) -> String {
        let shown = name.debugDescription
        guard !name.isEmpty else { throw .invalidRequest("a file of the Metalink document has no name") }
        guard name.utf8.count <= 4000 else {
            throw .invalidRequest("a file name of the Metalink document is \(name.utf8.count) bytes long")
        }
        guard !name.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }) else {
            throw .invalidRequest("the Metalink file name \(shown) contains control characters")
        }
        guard !name.hasPrefix("/") else { throw .invalidRequest("the Metalink file name \(shown) is absolute") }
        guard !name.contains("\\") else { throw .invalidRequest("the Metalink file name \(shown) contains a backslash") }
        let parts = name.split(separator: "/").filter { $0 != "." }
        guard !parts.contains("..") else {
            throw .invalidRequest("the Metalink file name \(shown) leads out of the download folder (..)")
        }
        var kept: [String] = []
        for part in parts {
            guard let safe = FileNameSanitizer.sanitize(String(part)) else {
                throw .invalidRequest("the Metalink file name \(shown) has a part that is no usable name")
            }
            kept.append(safe)
        }
        guard !kept.isEmpty else { throw .invalidRequest("the Metalink file name \(shown) is no usable name") }
        return kept.joined(separator: "/")
    }

    /// A lowercase hex digest of `algorithm` from `text` (white space around it ignored).
    static func digest(
        _ text: String, _ algorithm: Checksum.Algorithm, of file: String, piece: Bool = false
    )
        throws(DownloadError) -> String
    {
        let hex = text.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        guard hex.utf8.count == algorithm.hexLength, hex.allSatisfy(\.isHexDigit) else {
            let what = piece ? "a \(algorithm.rawValue) piece digest" : "the \(algorithm.rawValue) digest"
            throw .invalidRequest("\(what) of \(file.debugDescription) in the Metalink document is not \(algorithm.hexLength) hex digits")
        }
        return hex
    }
}
