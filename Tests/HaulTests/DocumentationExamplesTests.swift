import Foundation
import Testing

/// Every Swift snippet of README.md and the DocC articles is code the package compiles: its
/// lines stand, in order and together, in a file of `Examples/` (the HaulExamples target).
/// Indentation and `import` lines aside, a snippet that drifts from the examples fails here, and
/// an example that no longer compiles fails the build.
@Suite struct DocumentationExamplesTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The fenced ```swift blocks of a Markdown file, each as its trimmed lines.
    static func snippets(in path: String) throws -> [[String]] {
        let text = try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
        var snippets: [[String]] = []
        var current: [String]?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if current == nil, trimmed == "```swift" {
                current = []
            } else if let lines = current, trimmed == "```" {
                snippets.append(lines)
                current = nil
            } else if !trimmed.isEmpty, !trimmed.hasPrefix("import ") {
                current?.append(trimmed)
            }
        }
        return snippets
    }

    static var documents: [String] {
        let catalog = root.appendingPathComponent("Sources/Haul/Haul.docc")
        let articles = (try? FileManager.default.contentsOfDirectory(atPath: catalog.path)) ?? []
        return ["README.md"] + articles.filter { $0.hasSuffix(".md") }.sorted().map { "Sources/Haul/Haul.docc/" + $0 }
    }

    @Test(arguments: documents)
    func everySnippetIsCompiledInExamples(document: String) throws {
        let folder = Self.root.appendingPathComponent("Examples")
        let examples = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".swift") }.map { name in
            try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)
                .split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        let snippets = try Self.snippets(in: document)
        for snippet in snippets {
            let found = examples.contains { lines in
                lines.count >= snippet.count && (0...(lines.count - snippet.count)).contains { Array(lines[$0..<$0 + snippet.count]) == snippet }
            }
            #expect(found, "\(document): a snippet not in Examples/:\n\(snippet.joined(separator: "\n"))")
        }
    }

    @Test func theReadmeAndTheArticlesHaveSnippets() throws {
        #expect(try Self.snippets(in: "README.md").count >= 2)
        #expect(try Self.snippets(in: "Sources/Haul/Haul.docc/APIAtAGlance.md").count >= 4)
    }
}
