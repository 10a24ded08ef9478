import Foundation

#if canImport(FoundationXML)
import FoundationXML
#endif

/// Reads a document's elements into files, failing on the first thing wrong. Used on one
/// thread, by one parse, then read.
final class MetalinkReader: NSObject, XMLParserDelegate {
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
