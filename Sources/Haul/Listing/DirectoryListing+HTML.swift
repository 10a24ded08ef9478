extension DirectoryListing {
    /// Every `<a href>` of an HTML page, in order.
    static func readHTML(_ body: [UInt8], into builder: inout Builder) {
        var scanner = HTMLAnchorScanner(body)
        while let href = scanner.nextHref() { builder.add(href: href) }
    }
}

/// Finds the `href` of each `<a>` tag in an HTML page: a tokenizer of tags and attributes
/// (quoted, unquoted, any case), that skips comments and the insides of `<script>` and
/// `<style>`, and decodes character references in the value. It reads anything without
/// failing: a page cut short ends the links.
struct HTMLAnchorScanner {
    private let bytes: [UInt8]
    private var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// The next link's target, its character references decoded; bytes outside printable
    /// ASCII are written as `%XX` (which decoding the link's escapes turns back into them).
    mutating func nextHref() -> String? {
        while let open = find(UInt8(ascii: "<"), from: index) {
            index = open + 1
            if matches("!--") {
                index = find("-->", from: index + 3).map { $0 + 3 } ?? bytes.count
                continue
            }
            let start = index
            while index < bytes.count, Self.isNameByte(bytes[index]) { index += 1 }
            guard index > start else {
                // `</a>`, `<!DOCTYPE>`, `<?xml?>` or a lone `<`: nothing to read.
                continue
            }
            let name = String(decoding: bytes[start..<index].map(Self.lowercased), as: UTF8.self)
            let href = readAttributes(wanted: name == "a" ? "href" : nil)
            if name == "script" || name == "style" {
                index = find("</" + name, from: index, caseInsensitive: true) ?? bytes.count
            }
            if let href { return href }
        }
        index = bytes.count
        return nil
    }

    /// Reads a tag's attributes up to its `>`; returns the value of `wanted`, if present and
    /// the tag is complete (a page cut inside a tag has no link there).
    private mutating func readAttributes(wanted: String?) -> String? {
        var found: String?
        while index < bytes.count {
            while index < bytes.count, Self.isBlank(bytes[index]) || bytes[index] == UInt8(ascii: "/") { index += 1 }
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: ">") { break }
            let nameStart = index
            while index < bytes.count, !Self.isBlank(bytes[index]), !"=>/".utf8.contains(bytes[index]) { index += 1 }
            let name = bytes[nameStart..<index].map(Self.lowercased)
            while index < bytes.count, Self.isBlank(bytes[index]) { index += 1 }
            guard index < bytes.count, bytes[index] == UInt8(ascii: "=") else {
                // An attribute without a value; also steps over a stray byte.
                if index == nameStart { index += 1 }
                continue
            }
            index += 1
            while index < bytes.count, Self.isBlank(bytes[index]) { index += 1 }
            let value: ArraySlice<UInt8>
            if index < bytes.count, bytes[index] == UInt8(ascii: "\"") || bytes[index] == UInt8(ascii: "'") {
                let quote = bytes[index]
                guard let end = find(quote, from: index + 1) else { return nil }
                value = bytes[(index + 1)..<end]
                index = end + 1
            } else {
                let start = index
                while index < bytes.count, !Self.isBlank(bytes[index]), bytes[index] != UInt8(ascii: ">") { index += 1 }
                value = bytes[start..<index]
            }
            if found == nil, let wanted, name.elementsEqual(wanted.utf8) { found = Self.text(HTMLEntities.decode(value)) }
        }
        guard index < bytes.count else { return nil }
        index += 1
        return found
    }

    private func find(_ byte: UInt8, from start: Int) -> Int? {
        guard start < bytes.count else { return nil }
        return bytes[start...].firstIndex(of: byte)
    }

    private func find(_ text: String, from start: Int, caseInsensitive: Bool = false) -> Int? {
        let needle = Array(text.utf8)
        var at = start
        while at + needle.count <= bytes.count {
            guard let first = find(needle[0], from: at) else { break }
            if first + needle.count > bytes.count { break }
            let candidate = bytes[first..<(first + needle.count)]
            let same = caseInsensitive ? candidate.map(Self.lowercased).elementsEqual(needle) : candidate.elementsEqual(needle)
            if same { return first }
            at = first + 1
        }
        return nil
    }

    private func matches(_ text: String) -> Bool {
        let needle = Array(text.utf8)
        return index + needle.count <= bytes.count && bytes[index..<(index + needle.count)].elementsEqual(needle)
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    private static func isBlank(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0C || byte == 0x0D
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
    }

    private static func text(_ bytes: [UInt8]) -> String {
        var text = ""
        text.reserveCapacity(bytes.count)
        for byte in bytes {
            if byte < 0x20 || byte >= 0x7F {
                text += "%" + PercentEncoding.hex(byte)
            } else {
                text.unicodeScalars.append(Unicode.Scalar(byte))
            }
        }
        return text
    }
}

/// HTML character references: `&amp;`, the few other named ones a listing uses, and
/// numeric ones (`&#38;`, `&#x26;`). An unknown or broken one is kept as written.
enum HTMLEntities {
    private static let named: [String: Unicode.Scalar] = [
        "amp": "&", "lt": "<", "gt": ">", "quot": "\"", "apos": "'", "nbsp": "\u{A0}",
    ]

    static func decode(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        guard bytes.contains(UInt8(ascii: "&")) else { return Array(bytes) }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            guard bytes[index] == UInt8(ascii: "&"),
                let semicolon = bytes[index...].prefix(12).firstIndex(of: UInt8(ascii: ";")),
                let scalar = scalar(String(decoding: bytes[(index + 1)..<semicolon], as: UTF8.self))
            else {
                out.append(bytes[index])
                index += 1
                continue
            }
            out += Array(String(Character(scalar)).utf8)
            index = semicolon + 1
        }
        return out
    }

    private static func scalar(_ reference: String) -> Unicode.Scalar? {
        if reference.hasPrefix("#x") || reference.hasPrefix("#X") {
            return UInt32(reference.dropFirst(2), radix: 16).flatMap(Unicode.Scalar.init)
        }
        if reference.hasPrefix("#") { return UInt32(reference.dropFirst()).flatMap(Unicode.Scalar.init) }
        return named[reference]
    }
}
