import ArgumentParser
import Foundation
import Haul
import HaulDaemon

struct AddCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Queue URLs on the running daemon and print each one's GID.",
        discussion: """
            One GID a line on stdout, in the order of the URLs, so gid=$(haul add URL) works. A URL \
            the daemon refuses is reported on stderr and the others are still added.

            Exit status: \(ClientExitStatus.summary)
            """)

    @Argument(help: "http:// or https:// URLs to download.")
    var urls: [String] = []

    @Option(name: [.short, .customLong("dir")], help: "Save into this folder (relative to the current folder); default: the daemon's -d folder.")
    var directory: String?

    @Option(name: [.short, .long], help: "Save the (single) URL under this name inside the folder, as aria2's --out; an absolute path gives the folder too.")
    var output: String?

    @Option(help: "Verify the finished file: sha-256=HEX, sha-1=HEX, sha-512=HEX or md5=HEX.")
    var checksum: String?

    @Option(
        help: ArgumentHelp(
            "Another URL of the same file (repeatable): the download spreads over the URL and its mirrors. Takes a single URL.", valueName: "url"))
    var mirror: [String] = []

    @Flag(help: "Add it paused: it waits until haul resume.")
    var pause = false

    @OptionGroup var transfer: TransferOptions

    @OptionGroup var daemon: DaemonOptions

    func validate() throws {
        if urls.isEmpty { throw ValidationError("give at least one URL") }
        if output != nil && urls.count > 1 { throw ValidationError("--output takes a single URL; use --dir for several") }
        if !mirror.isEmpty && urls.count != 1 { throw ValidationError("--mirror takes a single URL") }
        if let output, output.isEmpty || output.hasSuffix("/") { throw ValidationError("--output must name a file") }
        if let checksum {
            do { _ = try Checksum(parsing: checksum) } catch { throw ValidationError("\(error)") }
        }
    }

    func run() async throws {
        let client = try daemon.connect()
        let options = try self.options(currentDirectory: FileManager.default.currentDirectoryPath)
        try await client.addEach(urls, "aria2.addUri") { url in [.array(([url] + mirror).map { .string($0) }), .object(options)] }
    }

    /// The aria2 options of every URL. The daemon runs in another folder, so relative paths
    /// are made absolute here.
    func options(currentDirectory: String) throws -> [String: JSONValue] {
        var options = try transfer.aria2Options()
        let dir = directory.map { Self.absolute($0, in: currentDirectory) }
        if let dir { options["dir"] = .string(dir) }
        if let output {
            if output.hasPrefix("/") || (dir != nil && output.contains("/")) {
                // aria2's out is a name inside dir: split a path into both.
                let path = Self.absolute(output, in: dir ?? currentDirectory)
                options["dir"] = .string((path as NSString).deletingLastPathComponent)
                options["out"] = .string((path as NSString).lastPathComponent)
            } else {
                options["out"] = .string(output)
            }
        }
        if let checksum { options["checksum"] = .string(checksum) }
        if pause { options["pause"] = "true" }
        return options
    }

    static func absolute(_ path: String, in folder: String) -> String {
        let joined = path.hasPrefix("/") ? path : (folder as NSString).appendingPathComponent(path)
        return FilePaths.normalized(joined)
    }
}
