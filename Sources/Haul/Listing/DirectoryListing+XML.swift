import Foundation

#if canImport(FoundationXML)
import FoundationXML
#endif

extension DirectoryListing {
    /// nginx's `autoindex_format xml`: `<list><directory>sub</directory><file>a.txt</file></list>`,
    /// names as element text. Read with `XMLParser`, external entities not resolved; a page
    /// that is not well-formed is unreadable (the entries read before the error are kept).
    static func readXML(_ body: [UInt8], into builder: inout Builder) {
        let parser = XMLParser(data: Data(RawBytesEscape.escape(body)))
        let reader = XMLListingReader()
        parser.delegate = reader
        parser.shouldResolveExternalEntities = false
        // libxml2 may call a cut page's end a success: the root's end tag must have been read.
        if !parser.parse() || reader.failed || !reader.ended { builder.listing.unreadable = true }
        for (name, isDirectory) in reader.entries { builder.add(name: name, isDirectory: isDirectory) }
        builder.listing.leftOut += reader.leftOut
    }
}

/// Collects the text of each `<file>` and `<directory>` element. Used on one thread, by one
/// parse, then read.
private final class XMLListingReader: NSObject, XMLParserDelegate {
    var entries: [(String, Bool)] = []
    var leftOut = 0
    var failed = false
    /// The root element's end tag was read.
    var ended = false
    private var depth = 0
    private var current: (text: String, isDirectory: Bool)?

    func parser(
        _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
        attributes: [String: String] = [:]
    ) {
        depth += 1
        switch elementName {
        case "file": current = ("", false)
        case "directory": current = ("", true)
        default: if current != nil { leftOut += 1 }
        }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        current?.text += string
    }

    func parser(_ parser: XMLParser, parseErrorOccurred parseError: any Error) {
        failed = true
    }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
        depth -= 1
        if depth == 0 { ended = true }
        guard elementName == "file" || elementName == "directory", let entry = current else { return }
        entries.append((entry.text, entry.isDirectory))
        current = nil
    }
}
