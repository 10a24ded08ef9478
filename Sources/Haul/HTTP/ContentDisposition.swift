/// Reads the file name a server suggests in `Content-Disposition` (RFC 6266).
///
/// ```
/// content-disposition = disposition-type *( OWS ";" OWS disposition-parm )
/// filename-parm       = "filename" "=" value / "filename*" "=" ext-value
/// ```
/// The disposition type is not checked: `attachment`, `inline` and unknown types all carry
/// a usable name. Parameter names are case-insensitive (RFC 6266 §4.1).
struct ContentDisposition {
    /// The suggested file name, raw and unsanitised, or nil when there is none.
    ///
    /// `filename*` wins when it decodes, as RFC 6266 §4.3 asks of recipients that
    /// understand it; otherwise `filename`, quoted or as a token. The result may hold
    /// `/`, `..` or control characters: pass it through ``FileNameSanitizer`` before use.
    ///
    ///     ContentDisposition.filename(from: #"attachment; filename="a.txt""#)  // "a.txt"
    static func filename(from value: String) -> String? {
        let parameters = Self.parameters(in: value)
        // The first instance of a parameter counts; RFC 6266 §4.1 makes repeats invalid.
        if let ext = parameters.first(where: { $0.name == "filename*" }),
            let decoded = RFC8187.decode(ext.value), !decoded.isEmpty
        {
            return decoded
        }
        if let plain = parameters.first(where: { $0.name == "filename" }), !plain.value.isEmpty {
            return plain.value
        }
        return nil
    }

    /// The `name=value` parameters, names lowercased, values unquoted.
    ///
    /// A `;` inside a quoted-string does not end the parameter. An unquoted value runs to
    /// the next `;`, which also takes the common non-conforming `filename=my file.pdf`.
    static func parameters(in value: String) -> [(name: String, value: String)] {
        var result: [(name: String, value: String)] = []
        var rest = Substring(value)
        while !rest.isEmpty {
            let nameEnd = rest.firstIndex { $0 == "=" || $0 == ";" } ?? rest.endIndex
            let name = HTTPSyntax.trimmingOWS(rest[..<nameEnd]).lowercased()
            rest = rest[nameEnd...]
            guard rest.first == "=" else {
                // The disposition type, or a parameter without a value: nothing to keep.
                rest = rest.dropFirst()
                continue
            }
            rest = rest.dropFirst().drop(while: HTTPSyntax.isOWS)
            let parameterValue: String
            if rest.first == "\"" {
                (parameterValue, rest) = quotedString(rest.dropFirst())
                // Anything between the closing quote and the next `;` is junk.
                rest = rest.drop { $0 != ";" }
            } else {
                let valueEnd = rest.firstIndex(of: ";") ?? rest.endIndex
                parameterValue = String(HTTPSyntax.trimmingOWS(rest[..<valueEnd]))
                rest = rest[valueEnd...]
            }
            result.append((name, parameterValue))
            rest = rest.dropFirst()
        }
        return result
    }

    /// Reads a quoted-string body after its opening quote (RFC 9110 §5.6.4): `\x` stands for
    /// `x`, and `"` ends it. Returns the text and what follows the closing quote. An
    /// unterminated string runs to the end, the most useful reading of a broken header.
    private static func quotedString(_ s: Substring) -> (String, Substring) {
        var text = ""
        var index = s.startIndex
        while index < s.endIndex {
            let c = s[index]
            index = s.index(after: index)
            switch c {
            case "\"":
                return (text, s[index...])
            case "\\" where index < s.endIndex:
                text.append(s[index])
                index = s.index(after: index)
            default:
                text.append(c)
            }
        }
        return (text, s[s.endIndex...])
    }
}
