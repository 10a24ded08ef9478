/// Carries bytes that are not UTF-8 through a JSON or XML parser, which refuse them.
///
/// nginx writes a file name's bytes into its JSON and XML listings as they are on disk, so a
/// Latin-1 name makes the page invalid UTF-8. Each such byte `b` becomes the private-use
/// scalar U+F700 + `b` before parsing, and back into `b` in the names the parser returns: the
/// name's bytes, and so its URL, come out as the server has them.
enum RawBytesEscape {
    static let base: UInt32 = 0xF700

    /// `bytes` with every byte that is not part of a well-formed UTF-8 sequence escaped; the
    /// same array when there is none.
    static func escape(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var index = 0
        var escaped = false
        while index < bytes.count {
            let length = sequenceLength(bytes, at: index)
            if length > 0 {
                if escaped { out += bytes[index..<(index + length)] }
                index += length
                continue
            }
            if !escaped {
                escaped = true
                out.reserveCapacity(bytes.count + 16)
                out += bytes[..<index]
            }
            out += Array(String(Character(Unicode.Scalar(base + UInt32(bytes[index]))!)).utf8)
            index += 1
        }
        return escaped ? out : bytes
    }

    /// The bytes of a parsed name, escaped bytes restored.
    static func bytes(of name: String) -> [UInt8] {
        var bytes: [UInt8] = []
        for scalar in name.unicodeScalars {
            if scalar.value >= base + 0x80, scalar.value <= base + 0xFF {
                bytes.append(UInt8(scalar.value - base))
            } else {
                bytes += Array(String(Character(scalar)).utf8)
            }
        }
        return bytes
    }

    /// The length of the well-formed UTF-8 sequence at `index`, or 0 (RFC 3629's table).
    private static func sequenceLength(_ bytes: [UInt8], at index: Int) -> Int {
        let lead = bytes[index]
        let (length, low, high): (Int, UInt8, UInt8)
        switch lead {
        case 0x00...0x7F: return 1
        case 0xC2...0xDF: (length, low, high) = (2, 0x80, 0xBF)
        case 0xE0: (length, low, high) = (3, 0xA0, 0xBF)
        case 0xED: (length, low, high) = (3, 0x80, 0x9F)
        case 0xE1...0xEC, 0xEE...0xEF: (length, low, high) = (3, 0x80, 0xBF)
        case 0xF0: (length, low, high) = (4, 0x90, 0xBF)
        case 0xF1...0xF3: (length, low, high) = (4, 0x80, 0xBF)
        case 0xF4: (length, low, high) = (4, 0x80, 0x8F)
        default: return 0
        }
        guard index + length <= bytes.count, (low...high).contains(bytes[index + 1]) else { return 0 }
        for next in (index + 2)..<(index + length) where !(0x80...0xBF).contains(bytes[next]) { return 0 }
        return length
    }
}
