import Foundation
import PackagePlugin

/// Compiles the files in a target's `WebAssets` folder into the target as Swift source
/// (`WebAssets+Embedded.swift`), so the binary serves them without a resource bundle: a
/// `haul` copied on its own to another folder still has its web page.
@main
struct EmbedWebAssets: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        guard let target = target as? SourceModuleTarget else { return [] }
        // Sorted, so the generated file does not change with the order the files were found in.
        let assets = target.sourceFiles
            .map(\.url)
            .filter { $0.deletingLastPathComponent().lastPathComponent == "WebAssets" }
            .sorted { $0.path < $1.path }
        let output = context.pluginWorkDirectoryURL.appending(path: "WebAssets+Embedded.swift")
        return [
            .buildCommand(
                displayName: "Embedding \(assets.count) web assets into \(target.name)",
                executable: try context.tool(named: "WebAssetEmbedder").url,
                arguments: [output.path] + assets.map(\.path),
                inputFiles: assets,
                outputFiles: [output])
        ]
    }
}
