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

/// Reads a document's elements into files, failing on the first thing wrong. Used on one
/// thread, by one parse, then read.
private final class MetalinkReader: NSObject, XMLParserDelegate {
    enum Version { case v3, v4 }

    /// A `<url>` as read.
    struct URLElement {
        var text = ""
        var attributes: [String: String]
    }

    /// A `<pieces>` element as read.
    struct PiecesElement {
        var type: String
        var length: String
        var hashes: [(index: String?, hex: String)] = []
    }

    /// A `<file>` as read, checked when it ends.
    struct FileElement {
        var name: String
        var size: String?
        var hashes: [(type: String, hex: String)] = []
        var pieces: [PiecesElement] = []
        var urls: [URLElement] = []
        var pieceCount = 0
    }

    /// What the text being collected belongs to.
    enum Target {
        case size, hash(String), pieceHash(String?), url([String: String])
    }

    var files: [Metalink.File] = []
    var skipped: [String] = []
    var failure: DownloadError?
    /// The root element's end tag was read.
    var ended = false

    private var version: Version?
    /// The open elements: local names in the document's namespace, nil for foreign ones.
    private var stack: [String?] = []
    private var file: FileElement?
    private var names = Set<String>()
    private var fileCount = 0
    private var text: (target: Target, value: String)?

    /// The longest text an element of interest may have.
    private static let maxText = 64 << 10

    private func fail(_ parser: XMLParser, _ error: DownloadError) {
        guard failure == nil else { return }
        failure = error
        parser.abortParsing()
    }

    func parser(
        _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
        attributes: [String: String] = [:]
    ) {
        guard failure == nil else { return }
        guard let version else {
            // The root.
            let namespace = namespaceURI ?? ""
            switch (elementName, namespace) {
            case ("metalink", Metalink.namespace4): self.version = .v4
            case ("metalink", Metalink.namespace3): self.version = .v3
            case ("metalink", "") where attributes["version"]?.hasPrefix("3") == true: self.version = .v3
            default:
                let shown = namespace.isEmpty ? "no namespace" : "namespace \(namespace)"
                return fail(parser, .invalidRequest("not a Metalink document: its root is <\(elementName)> in \(shown)"))
            }
            stack.append(elementName)
            return
        }
        let expected = version == .v4 ? Metalink.namespace4 : Metalink.namespace3
        let ours = (namespaceURI ?? "") == expected || (version == .v3 && (namespaceURI ?? "").isEmpty)
        guard ours, let parent = stack.last ?? nil else {
            stack.append(nil)
            return
        }
        stack.append(elementName)
        switch (elementName, parent, version) {
        case ("file", "metalink", .v4), ("file", "files", .v3):
            fileCount += 1
            guard fileCount <= Metalink.maxFiles else {
                return fail(parser, .invalidRequest("the Metalink document lists more than \(Metalink.maxFiles) files"))
            }
            file = FileElement(name: attributes["name"] ?? "")
        case ("size", "file", _) where file != nil:
            text = (.size, "")
        case ("hash", "file", .v4), ("hash", "verification", .v3):
            if file != nil { text = (.hash(attributes["type"] ?? ""), "") }
        case ("pieces", "file", .v4), ("pieces", "verification", .v3):
            file?.pieces.append(PiecesElement(type: attributes["type"] ?? "", length: attributes["length"] ?? ""))
        case ("hash", "pieces", _) where file != nil:
            file!.pieceCount += 1
            guard file!.pieceCount <= PieceChecksums.maxPieces else {
                return fail(
                    parser,
                    .invalidRequest(
                        "\(file!.name.debugDescription) has more than \(PieceChecksums.maxPieces) piece digests in the Metalink document"))
            }
            text = (.pieceHash(attributes["piece"]), "")
        case ("url", "file", .v4), ("url", "resources", .v3):
            if file != nil { text = (.url(attributes), "") }
        default:
            break
        }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        append(parser, string)
    }

    func parser(_ parser: XMLParser, foundCDATA CDATABlock: Data) {
        append(parser, String(decoding: CDATABlock, as: UTF8.self))
    }

    private func append(_ parser: XMLParser, _ string: String) {
        guard failure == nil, text != nil else { return }
        text!.value += string
        if text!.value.utf8.count > Self.maxText {
            fail(parser, .invalidRequest("an element of the Metalink document has more than \(Self.maxText) bytes of text"))
        }
    }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
        guard failure == nil else { return }
        let name = stack.popLast() ?? nil
        if stack.isEmpty {
            ended = true
            return
        }
        guard let name else { return }
        if let collected = text, ["size", "hash", "url"].contains(name) {
            text = nil
            let value = collected.value
            switch collected.target {
            case .size: file?.size = value
            case .hash(let type): file?.hashes.append((type, value))
            case .pieceHash(let index):
                if !(file?.pieces.isEmpty ?? true) { file!.pieces[file!.pieces.count - 1].hashes.append((index, value)) }
            case .url(let attributes): file?.urls.append(URLElement(text: value, attributes: attributes))
            }
        }
        if name == "file", let element = file {
            file = nil
            do throws(DownloadError) {
                if let finished = try finish(element) { files.append(finished) }
            } catch {
                fail(parser, error)
            }
        }
    }

    func parser(_ parser: XMLParser, parseErrorOccurred parseError: any Error) {
        let code = (parseError as NSError).code
        let kind = XMLParser.ErrorCode(rawValue: code).map { "\($0)" } ?? "error \(code)"
        fail(parser, .invalidRequest("the Metalink document is not well-formed XML: line \(parser.lineNumber): \(kind)"))
    }

    // Where FoundationXML reports declarations (Darwin), they are refused too.

    func parser(_ parser: XMLParser, foundInternalEntityDeclarationWithName name: String, value: String?) {
        fail(parser, .invalidRequest("the Metalink document declares entities; such documents are refused"))
    }

    func parser(_ parser: XMLParser, foundExternalEntityDeclarationWithName name: String, publicID: String?, systemID: String?) {
        fail(parser, .invalidRequest("the Metalink document declares entities; such documents are refused"))
    }

    func parser(_ parser: XMLParser, resolveExternalEntityName name: String, systemID: String?) -> Data? {
        // Without a document type declaration, only XML's own five entities exist.
        fail(parser, .invalidRequest("the Metalink document refers to the entity &\(name); which it cannot declare"))
        return nil
    }

    /// The file an element describes, nil (and a line in ``skipped``) when it has no usable URL.
    private func finish(_ element: FileElement) throws(DownloadError) -> Metalink.File? {
        let name = try Metalink.relativePath(element.name)
        guard names.insert(name).inserted else {
            throw .invalidRequest("the Metalink document lists \(name.debugDescription) twice")
        }
        var size: Int64?
        if let text = element.size {
            let digits = text.trimmingCharacters(in: .whitespacesAndNewlines)
            guard let value = Int64(digits), value >= 0, digits.allSatisfy(\.isASCII) else {
                throw .invalidRequest("the size of \(name.debugDescription) in the Metalink document is not a number of bytes: \(digits.debugDescription)")
            }
            size = value
        }
        var checksum: Checksum?
        for (type, text) in element.hashes {
            guard let algorithm = Checksum.Algorithm.named(type) else { continue }
            let hex = try Metalink.digest(text, algorithm, of: name)
            if checksum.map({ Checksum.Algorithm.strength($0.algorithm) < Checksum.Algorithm.strength(algorithm) }) ?? true {
                checksum = try Checksum(parsing: "\(algorithm.rawValue)=\(hex)")
            }
        }
        let pieces = try self.pieces(of: element, name: name, size: size)
        let sources = self.sources(of: element)
        guard !sources.isEmpty else {
            skipped.append("\(name): no http:// or https:// URL")
            return nil
        }
        return Metalink.File(name: name, size: size, sources: sources, checksum: checksum, pieces: pieces)
    }

    /// The strongest `<pieces>` of a known type, checked against the size.
    private func pieces(of element: FileElement, name: String, size: Int64?) throws(DownloadError) -> PieceChecksums? {
        let known = element.pieces.compactMap { pieces in Checksum.Algorithm.named(pieces.type).map { ($0, pieces) } }
        guard let chosen = known.max(by: { Checksum.Algorithm.strength($0.0) < Checksum.Algorithm.strength($1.0) }) else { return nil }
        let (algorithm, best) = chosen
        let shown = name.debugDescription
        guard let length = Int64(best.length.trimmingCharacters(in: .whitespaces)), (1...PieceChecksums.maxLength).contains(length) else {
            throw .invalidRequest("the piece length of \(shown) in the Metalink document is not a positive number: \(best.length.debugDescription)")
        }
        guard !best.hashes.isEmpty else { throw .invalidRequest("the pieces of \(shown) in the Metalink document list no digest") }
        var hashes = [String?](repeating: nil, count: best.hashes.count)
        for (offset, entry) in best.hashes.enumerated() {
            let hex = try Metalink.digest(entry.hex, algorithm, of: name, piece: true)
            // Metalink 3 numbers its pieces; each number once, from 0.
            var index = offset
            if let number = entry.index {
                guard let value = Int(number.trimmingCharacters(in: .whitespaces)), hashes.indices.contains(value), hashes[value] == nil else {
                    throw .invalidRequest("the pieces of \(shown) in the Metalink document are not numbered 0 to \(hashes.count - 1)")
                }
                index = value
            }
            guard hashes[index] == nil else {
                throw .invalidRequest("the pieces of \(shown) in the Metalink document are not numbered 0 to \(hashes.count - 1)")
            }
            hashes[index] = hex
        }
        let pieces = PieceChecksums(algorithm: algorithm, length: length, hashes: hashes.compactMap { $0 })
        if let size, !pieces.fits(total: size) {
            throw .invalidRequest(
                "\(shown) has \(pieces.hashes.count) piece digests of \(length) bytes in the Metalink document, which do not cover its \(size) bytes"
            )
        }
        return pieces
    }

    /// The `http`/`https` URLs, most preferred first, each once, at most
    /// ``DownloadRequest/maxSources``.
    private func sources(of element: FileElement) -> [DownloadRequest.Source] {
        var sources: [DownloadRequest.Source] = []
        for url in element.urls {
            let uri = url.text.trimmingCharacters(in: .whitespacesAndNewlines)
            if version == .v3, let type = url.attributes["type"]?.lowercased(), type != "http", type != "https" { continue }
            guard let parsed = HTTPURL(uri), parsed.scheme == "http" || parsed.scheme == "https" else { continue }
            var priority: Int?
            if version == .v4 {
                // 1 (most preferred) to 999999.
                priority = url.attributes["priority"].flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }.flatMap {
                    (1...999_999).contains($0) ? $0 : nil
                }
            } else if let preference = url.attributes["preference"].flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) }) {
                // Metalink 3: 100 is the most preferred, 0 the least.
                priority = 101 - min(max(preference, 0), 100)
            }
            let location = url.attributes["location"]?.trimmingCharacters(in: .whitespaces)
            sources.append(DownloadRequest.Source(uri: uri, priority: priority, location: location?.isEmpty == false ? location : nil))
        }
        // A stable sort: URLs of one priority (or none) keep the document's order, after those with one.
        let ordered = sources.enumerated().sorted { a, b in
            let (pa, pb) = (a.element.priority ?? .max, b.element.priority ?? .max)
            return pa != pb ? pa < pb : a.offset < b.offset
        }
        var seen = Set<String>()
        return ordered.map(\.element).filter { seen.insert($0.uri).inserted }.prefix(DownloadRequest.maxSources).map { $0 }
    }
}
