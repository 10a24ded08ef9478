import Foundation

/// Makes a name from a server safe as one path component inside the target folder.
enum FileNameSanitizer {
    /// Longest name most file systems take, in UTF-8 bytes.
    static let maxBytes = 255

    /// The last component, without control characters, leading dots, trailing dots and
    /// spaces, at most 255 bytes; nil when nothing usable remains.
    static func sanitize(_ name: String) -> String? {
        let component = name.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init) ?? ""
        var cleaned = String(String.UnicodeScalarView(component.unicodeScalars.filter {
            !($0.value < 0x20 || (0x7F...0x9F).contains($0.value))
        }))
        cleaned = cleaned.trimmingCharacters(in: .whitespaces)
        while cleaned.hasPrefix(".") { cleaned.removeFirst() }
        while let last = cleaned.last, last == "." || last == " " { cleaned.removeLast() }
        cleaned = cleaned.trimmingCharacters(in: .whitespaces)
        guard !cleaned.isEmpty else { return nil }
        return truncated(cleaned)
    }

    /// The last non-empty segment of a URL path, percent-decoded, then sanitised.
    static func name(fromURLPath path: String) -> String? {
        guard let segment = path.split(separator: "/").last else { return nil }
        let decoded = String(segment).removingPercentEncoding ?? String(segment)
        return sanitize(decoded)
    }

    /// Cuts on a character boundary, keeping a short extension.
    private static func truncated(_ name: String) -> String {
        guard name.utf8.count > maxBytes else { return name }
        let ext = (name as NSString).pathExtension
        let keep = ext.isEmpty || ext.utf8.count > 16 ? "" : "." + ext
        var stem = keep.isEmpty ? name : String(name.dropLast(keep.count))
        while stem.utf8.count + keep.utf8.count > maxBytes { stem.removeLast() }
        return stem + keep
    }
}
