import Foundation
import Testing

/// `docs/ARCHITECTURE.md`'s order of the library's folders, read off the sources: Model uses
/// nothing, HTTP and Storage use Model, Engine uses those, Manager and Listing use Engine, Mirror uses Manager and Listing. A type named in
/// a folder must be declared in that folder or one before it.
@Suite struct ArchitectureTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources/Haul")
    static let rank = ["Model": 0, "HTTP": 1, "Storage": 1, "Engine": 2, "Manager": 3, "Listing": 3, "Mirror": 4]

    /// The Swift files of a folder, with their text (comments taken out).
    func sources(_ folder: String) throws -> [(name: String, text: String)] {
        let url = Self.root.appendingPathComponent(folder)
        return try FileManager.default.contentsOfDirectory(atPath: url.path).filter { $0.hasSuffix(".swift") }.sorted().map { name in
            let text = try String(contentsOf: url.appendingPathComponent(name), encoding: .utf8)
            let code = text.split(separator: "\n", omittingEmptySubsequences: false)
                .map { line in line.range(of: "//").map { String(line[..<$0.lowerBound]) } ?? String(line) }
            return (name, code.joined(separator: "\n"))
        }
    }

    @Test func noFolderUsesOneAfterIt() throws {
        var declared: [String: String] = [:]
        let declaration = /^(?:public |package |final |private |fileprivate |indirect )*(?:struct|class|enum|actor|protocol)\s+(\w+)/.anchorsMatchLineEndings()
        for folder in Self.rank.keys {
            for (_, text) in try sources(folder) {
                for match in text.matches(of: declaration) { declared[String(match.output.1)] = folder }
            }
        }
        #expect(declared.count > 50, "the declarations were found: \(declared.count)")
        var crossings: [String] = []
        for (folder, rank) in Self.rank {
            for (file, text) in try sources(folder) {
                let words = Set(text.split { !($0.isLetter || $0.isNumber || $0 == "_") }.map(String.init))
                for (name, home) in declared where home != folder && Self.rank[home]! >= rank && words.contains(name) {
                    crossings.append("\(folder)/\(file) uses \(name) of \(home)")
                }
            }
        }
        #expect(crossings.isEmpty, "\(crossings.sorted())")
    }
}
