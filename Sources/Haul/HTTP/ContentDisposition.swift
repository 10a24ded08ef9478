import Foundation

/// The file name in a `Content-Disposition` header (RFC 6266, with RFC 8187 `filename*`).
struct ContentDisposition {
    /// The raw (unsanitised) suggested name: `filename*` wins over `filename`.
    static func filename(from value: String) -> String? {
        let parameters = Self.parameters(value)
        if let extended = parameters["filename*"], let decoded = decodeExtended(extended), !decoded.isEmpty {
            return decoded
        }
        if let plain = parameters["filename"], !plain.isEmpty { return plain }
        return nil
    }

    /// `name=value` pairs after the disposition type; names lowercased, quoted strings
    /// unescaped. Semicolons inside quotes do not split.
    static func parameters(_ value: String) -> [String: String] {
        var result: [String: String] = [:]
        var index = value.startIndex
        // Skip the disposition type.
        while index < value.endIndex, value[index] != ";" { index = value.index(after: index) }
        while index < value.endIndex {
            index = value.index(after: index)  // past ';'
            var name = ""
            while index < value.endIndex, value[index] != "=", value[index] != ";" {
                name.append(value[index])
                index = value.index(after: index)
            }
            guard index < value.endIndex, value[index] == "=" else { continue }
            index = value.index(after: index)
            while index < value.endIndex, value[index] == " " { index = value.index(after: index) }
            var parameterValue = ""
            if index < value.endIndex, value[index] == "\"" {
                index = value.index(after: index)
                while index < value.endIndex, value[index] != "\"" {
                    if value[index] == "\\", value.index(after: index) < value.endIndex { index = value.index(after: index) }
                    parameterValue.append(value[index])
                    index = value.index(after: index)
                }
                if index < value.endIndex { index = value.index(after: index) }
                while index < value.endIndex, value[index] != ";" { index = value.index(after: index) }
            } else {
                // A token, or (non-conforming but common) a bare name with spaces.
                while index < value.endIndex, value[index] != ";" {
                    parameterValue.append(value[index])
                    index = value.index(after: index)
                }
                parameterValue = parameterValue.trimmingCharacters(in: .whitespaces)
            }
            let key = name.trimmingCharacters(in: .whitespaces).lowercased()
            if !key.isEmpty, result[key] == nil { result[key] = parameterValue }
        }
        return result
    }

    /// RFC 8187 `charset'language'percent-encoded`, UTF-8 or ISO-8859-1.
    static func decodeExtended(_ value: String) -> String? {
        let parts = value.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        let charset = parts[0].lowercased()
        var bytes: [UInt8] = []
        var utf8 = parts[2].utf8.makeIterator()
        while let byte = utf8.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = utf8.next(), let low = utf8.next(),
                      let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16) else { return nil }
                bytes.append(value)
            } else {
                bytes.append(byte)
            }
        }
        switch charset {
        case "utf-8": return String(validating: bytes, as: UTF8.self)
        case "iso-8859-1": return String(bytes.map { Character(Unicode.Scalar($0)) })
        default: return nil
        }
    }
}
