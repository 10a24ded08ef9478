/// What a Range header asks for, resolved against a representation length (RFC 9110 §14.1.2).
///
/// Only the first range of a multi-range request is considered: the server never sends
/// multipart/byteranges.
enum ByteRangeRequest: Equatable {
    /// Serve these bytes with 206.
    case satisfiable(ClosedRange<Int>)
    /// Answer 416.
    case unsatisfiable
    /// Not a valid bytes range: ignore the header and serve 200.
    case ignored

    /// Parses `bytes=a-b`, `bytes=a-` and `bytes=-n` against `length`.
    init(header: String, length: Int) {
        let value = header.trimmingSpaces
        guard value.lowercased().hasPrefix("bytes="),
            let first = value.dropFirst("bytes=".count).split(separator: ",").first
        else { self = .ignored; return }
        let spec = String(first).trimmingSpaces
        guard let dash = spec.firstIndex(of: "-") else { self = .ignored; return }
        let startText = spec[..<dash]
        let endText = spec[spec.index(after: dash)...]
        if startText.isEmpty {
            guard let suffix = Self.number(endText) else { self = .ignored; return }
            guard suffix > 0, length > 0 else { self = .unsatisfiable; return }
            self = .satisfiable(max(0, length - suffix)...(length - 1))
            return
        }
        guard let start = Self.number(startText) else { self = .ignored; return }
        var end: Int?
        if !endText.isEmpty {
            guard let last = Self.number(endText), last >= start else { self = .ignored; return }
            end = last
        }
        guard start < length else { self = .unsatisfiable; return }
        self = .satisfiable(start...min(end ?? length - 1, length - 1))
    }

    private static func number(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int(text) ?? Int.max  // absurdly large positions still parse, as RFC 9110 asks
    }
}
