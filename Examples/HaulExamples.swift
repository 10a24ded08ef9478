import Foundation
import Haul

/// The documentation's examples, one function each: built with the package and checked line by
/// line against README.md and the DocC articles (DocumentationExamplesTests). Run one by name;
/// they reach the hosts they name.
@main
struct HaulExamples {
    static let examples: [String: @Sendable () async throws -> Void] = [
        "library": library,
        "overview": overview,
        "pause": pauseAndSaveToken,
        "resume": resumeFromToken,
        "errors": errors,
        "manager": managingDownloads,
        "networks": networks,
        "progress": watchProgress,
        "mirrors": mirrors,
        "upload": uploadAFile,
    ]

    static func main() async throws {
        let name = CommandLine.arguments.dropFirst().first
        guard let name, let example = examples[name] else {
            print("usage: HaulExamples \(examples.keys.sorted().joined(separator: "|"))")
            return
        }
        try await example()
    }
}
