import ArgumentParser
import Foundation

/// `-i FILE`: aria2's input-file format, the subset Haul understands. A line with a URL starts
/// an entry; lines indented by whitespace under it set that entry's options (`out=`, `dir=`,
/// `checksum=`). Blank lines and `#` comments are skipped. With several tab-separated URLs on a
/// line (aria2's mirrors), the first one is used.
struct InputEntry: Equatable {
    var url: String
    var out: String?
    var dir: String?
    var checksum: String?
}

enum InputFile {
    static func entries(from path: String) throws -> [InputEntry] {
        let text: String
        if path == "-" {
            text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        } else {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ValidationError("cannot read input file \(path): \(String(cString: strerror(errno)))")
            }
            text = String(decoding: data, as: UTF8.self)
        }
        return try parse(text, name: path)
    }

    static func parse(_ text: String, name: String) throws -> [InputEntry] {
        var entries: [InputEntry] = []
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.hasSuffix("\r") ? rawLine.dropLast() : rawLine
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            guard line.first == " " || line.first == "\t" else {
                let url = trimmed.split(separator: "\t").first.map(String.init) ?? trimmed
                entries.append(InputEntry(url: url))
                continue
            }
            guard !entries.isEmpty, let equals = trimmed.firstIndex(of: "=") else {
                throw ValidationError("\(name):\(index + 1): expected an indented 'option=value' under a URL line")
            }
            let value = String(trimmed[trimmed.index(after: equals)...])
            switch trimmed[..<equals] {
            case "out": entries[entries.count - 1].out = value
            case "dir": entries[entries.count - 1].dir = value
            case "checksum": entries[entries.count - 1].checksum = value
            case let option:
                throw ValidationError("\(name):\(index + 1): option '\(option)' is not supported (out, dir, checksum are)")
            }
        }
        return entries
    }
}
