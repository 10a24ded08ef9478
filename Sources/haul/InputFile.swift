import ArgumentParser
import Foundation

/// `-i FILE`: one URL a line; blank lines and `#` comments are skipped.
enum InputFile {
    static func urls(from path: String) throws -> [String] {
        let text: String
        if path == "-" {
            text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        } else {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ValidationError("cannot read input file \(path): \(String(cString: strerror(errno)))")
            }
            text = String(decoding: data, as: UTF8.self)
        }
        return text.split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
    }
}
