import Foundation

/// Metalink/HTTP (RFC 6249) and `Digest` (RFC 3230) headers read: the parsing behind
/// ``Metalink``'s public functions, here where the engine can use it (``DownloadRequest/followMetalink``).
enum MetalinkHTTP {
    /// The mirrors `Link: rel=duplicate` headers name: ``Metalink/duplicates(inLinkHeaders:base:)``.
    static func duplicates(inLinkHeaders values: [String], base: String? = nil) -> [DownloadRequest.Source] {
        var sources: [DownloadRequest.Source] = []
        for link in links(in: values) where link.relations.contains("duplicate") {
            guard let uri = resolve(link.target, against: base) else { continue }
            let priority = link.parameters["pri"].flatMap { Int($0) }.flatMap { (1...999_999).contains($0) ? $0 : nil }
            let location = link.parameters["geo"].flatMap { $0.isEmpty ? nil : $0.lowercased() }
            sources.append(DownloadRequest.Source(uri: uri, priority: priority, location: location))
        }
        let ordered = sources.enumerated().sorted { a, b in
            let (pa, pb) = (a.element.priority ?? .max, b.element.priority ?? .max)
            return pa != pb ? pa < pb : a.offset < b.offset
        }
        var seen = Set<String>()
        return ordered.map(\.element).filter { seen.insert($0.uri).inserted }.prefix(DownloadRequest.maxSources).map { $0 }
    }

    /// The Metalink document a response points to: ``Metalink/documentURL(inLinkHeaders:base:)``.
    static func documentURL(inLinkHeaders values: [String], base: String? = nil) -> String? {
        let types: Set<String> = ["application/metalink4+xml", "application/metalink+xml"]
        for link in links(in: values) where link.relations.contains("describedby") {
            let type = link.parameters["type"].map { $0.split(separator: ";").first.map(String.init) ?? $0 }
            guard let type, types.contains(type.trimmingCharacters(in: .whitespaces).lowercased()) else { continue }
            if let uri = resolve(link.target, against: base) { return uri }
        }
        return nil
    }

    /// The strongest digest of `Digest` headers: ``Metalink/checksum(inDigestHeaders:)``.
    static func checksum(inDigestHeaders values: [String]) -> Checksum? {
        var best: Checksum?
        for value in values {
            for item in value.split(separator: ",") {
                let item = HTTPSyntax.trimmingOWS(item)
                guard let equals = item.firstIndex(of: "="), let algorithm = Checksum.Algorithm.named(String(item[..<equals])) else {
                    continue
                }
                let encoded = String(HTTPSyntax.trimmingOWS(item[item.index(after: equals)...]))
                guard let bytes = Data(base64Encoded: encoded), bytes.count * 2 == algorithm.hexLength else { continue }
                let hex = bytes.map { String(format: "%02x", $0) }.joined()
                guard best.map({ Checksum.Algorithm.strength($0.algorithm) < Checksum.Algorithm.strength(algorithm) }) ?? true else { continue }
                best = try? Checksum(parsing: "\(algorithm.rawValue)=\(hex)")
            }
        }
        return best
    }

    /// One link of a `Link` header (RFC 8288): its target and parameters, names lowercased.
    struct Link: Equatable {
        var target: String
        var parameters: [String: String]

        /// The `rel` parameter's relation types, lowercased.
        var relations: [String] {
            (parameters["rel"] ?? "").lowercased().split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        }
    }

    /// Every link of `values`: `<uri>; name=token; name="quoted"`, links separated by commas.
    /// A link that does not start with `<…>` is skipped up to the next comma; the first of a
    /// parameter given twice counts.
    static func links(in values: [String]) -> [Link] {
        var links: [Link] = []
        for value in values {
            let characters = Array(value)
            var index = 0
            func skipWhitespace() {
                while index < characters.count, HTTPSyntax.isOWS(characters[index]) { index += 1 }
            }
            func skipToNextLink() {
                var quoted = false
                while index < characters.count {
                    let c = characters[index]
                    if c == "\"" { quoted.toggle() } else if c == "\\" && quoted { index += 1 } else if c == "," && !quoted { break }
                    index += 1
                }
                index += 1
            }
            while index < characters.count {
                skipWhitespace()
                guard index < characters.count, characters[index] == "<",
                    let close = characters[index...].firstIndex(of: ">")
                else {
                    skipToNextLink()
                    continue
                }
                var link = Link(target: String(characters[(index + 1)..<close]), parameters: [:])
                index = close + 1
                while true {
                    skipWhitespace()
                    guard index < characters.count, characters[index] == ";" else { break }
                    index += 1
                    skipWhitespace()
                    var name = ""
                    while index < characters.count, !"=;, \t".contains(characters[index]) {
                        name.append(characters[index])
                        index += 1
                    }
                    skipWhitespace()
                    var parameter = ""
                    if index < characters.count, characters[index] == "=" {
                        index += 1
                        skipWhitespace()
                        if index < characters.count, characters[index] == "\"" {
                            index += 1
                            while index < characters.count, characters[index] != "\"" {
                                if characters[index] == "\\", index + 1 < characters.count { index += 1 }
                                parameter.append(characters[index])
                                index += 1
                            }
                            index += 1
                        } else {
                            while index < characters.count, !";, \t".contains(characters[index]) {
                                parameter.append(characters[index])
                                index += 1
                            }
                        }
                    }
                    let key = name.lowercased()
                    if !key.isEmpty, link.parameters[key] == nil { link.parameters[key] = parameter }
                }
                links.append(link)
                skipToNextLink()
            }
        }
        return links
    }

    /// `target` as an absolute `http`/`https` URL: as it is, or resolved against `base`.
    private static func resolve(_ target: String, against base: String?) -> String? {
        let trimmed = target.trimmingCharacters(in: .whitespaces)
        if let parsed = HTTPURL(trimmed), parsed.scheme == "http" || parsed.scheme == "https" { return trimmed }
        guard let base, let baseURL = URL(string: base), let resolved = URL(string: trimmed, relativeTo: baseURL)?.absoluteString,
            let parsed = HTTPURL(resolved), parsed.scheme == "http" || parsed.scheme == "https"
        else { return nil }
        return resolved
    }
}
