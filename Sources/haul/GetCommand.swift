import ArgumentParser
import Foundation
import Haul
import Logging

struct GetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Download URLs, continuing any earlier interrupted download of the same destination.",
        discussion: """
            Rerunning the same command after Ctrl-C, a crash, kill -9 or a reboot continues where \
            it stopped. A file at its final name is always complete (and verified, with --checksum).

            Exit status: \(ExitStatus.summary)
            """)

    @Argument(help: "http:// or https:// URLs to download, several at once (see -j).")
    var urls: [String] = []

    @Option(name: [.short, .long], help: "Save the (single) URL at this path.")
    var output: String?

    @Option(name: [.short, .customLong("dir")], help: "Save into this folder, under the server's or the URL's file name.")
    var directory: String = "."

    @Option(name: [.short, .customLong("input-file")], help: "Read URLs from this file ('-' for standard input): one a line, each optionally followed by indented aria2-style 'out=', 'dir=' and 'checksum=' lines; '#' starts a comment.")
    var inputFile: String?

    @Option(help: "Verify the finished file: sha-256=HEX, sha-1=HEX, sha-512=HEX or md5=HEX.")
    var checksum: String?

    @Option(help: "Give up after this many failed tries in a row (a try that made progress resets the count).")
    var maxTries: Int = 5

    @Option(help: "Seconds to wait before the first retry; doubles each time, with jitter. A server's Retry-After wins.")
    var retryWait: Double = 1

    @Option(help: "Seconds without receiving any byte before a try is abandoned and retried from where it was.")
    var timeout: Double = 30

    @Option(name: [.customShort("H"), .long], help: "Extra request header 'Name: value' (repeatable).")
    var header: [String] = []

    @Option(name: [.customShort("j"), .long], help: "Downloads running at once.")
    var maxConcurrentDownloads: Int = 5

    @Option(name: [.customShort("x"), .long], help: "Connections per download when the server serves ranges of a file of known length (1 disables segmenting).")
    var connections: Int = 4

    @Option(help: "Connections open to one host at once, across all downloads.")
    var maxConnectionsPerHost: Int = 16

    @Option(help: "Never split a segment below this size: bytes, or with K, M or G (binary) suffix.")
    var minSplitSize: String = "1M"

    @Option(help: "Limit the total download rate of all connections, e.g. 2M (bytes per second; K, M, G suffixes).")
    var limitRate: String?

    @Option(help: "Limit each download's rate, e.g. 500K (bytes per second; K, M, G suffixes).")
    var maxDownloadLimit: String?

    @Flag(help: "Replace a different file already at the destination instead of saving as name.1.ext.")
    var overwrite = false

    @Flag(name: [.short, .long], help: "Print nothing but errors.")
    var quiet = false

    @Option(help: "Folder for the download records (default: $HAUL_STATE_DIR, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).")
    var stateDir: String?

    func validate() throws {
        if urls.isEmpty && inputFile == nil { throw ValidationError("give at least one URL, or --input-file") }
        if output != nil && (urls.count > 1 || inputFile != nil) {
            throw ValidationError("--output takes a single URL; use --dir for several")
        }
        if maxTries < 1 { throw ValidationError("--max-tries must be at least 1") }
        if !(1...16).contains(connections) { throw ValidationError("--connections must be between 1 and 16") }
        if !(1...100).contains(maxConcurrentDownloads) { throw ValidationError("--max-concurrent-downloads must be between 1 and 100") }
        if !(1...256).contains(maxConnectionsPerHost) { throw ValidationError("--max-connections-per-host must be between 1 and 256") }
        guard let split = ByteCount.parse(minSplitSize), split >= 1 << 10 else {
            throw ValidationError("--min-split-size must be a size of at least 1K, e.g. 1M")
        }
        _ = split
        for (flag, value) in [("--limit-rate", limitRate), ("--max-download-limit", maxDownloadLimit)] {
            if let value, (ByteCount.parse(value) ?? 0) < 1 << 10 {
                throw ValidationError("\(flag) must be a rate of at least 1K, e.g. 2M")
            }
        }
        if !(retryWait >= 0 && retryWait <= 3600) { throw ValidationError("--retry-wait must be between 0 and 3600 seconds") }
        if !(timeout > 0 && timeout <= 86400) { throw ValidationError("--timeout must be between 0 and 86400 seconds") }
        if let checksum {
            do { _ = try Checksum(parsing: checksum) } catch { throw ValidationError("\(error)") }
        }
        for value in header { _ = try Self.parseHeader(value) }
    }

    /// `Name: value`, refusing anything that could smuggle a second header or request line.
    static func parseHeader(_ text: String) throws -> (name: String, value: String) {
        guard let colon = text.firstIndex(of: ":") else { throw ValidationError("bad header \"\(text)\": expected 'Name: value'") }
        let name = text[..<colon].trimmingCharacters(in: .whitespaces)
        let value = text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        let tokenCharacters = CharacterSet(charactersIn: "!#$%&'*+-.^_`|~").union(.alphanumerics)
        guard !name.isEmpty, name.unicodeScalars.allSatisfy({ $0.isASCII && tokenCharacters.contains($0) }) else {
            throw ValidationError("bad header name \"\(name)\"")
        }
        guard !value.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" || $0.value == 0x7F }) else {
            throw ValidationError("header \(name) contains control characters")
        }
        return (name, value)
    }

    func run() async throws {
        let entries = try urls.map { InputEntry(url: $0) } + (inputFile.map(InputFile.entries(from:)) ?? [])
        if entries.isEmpty { throw ValidationError("no URLs to download in \(inputFile ?? "the arguments")") }
        let requests = try entries.map(request(for:))
        var urlOfFile: [String: String] = [:]
        for request in requests {
            guard case .file(let path) = request.destination else { continue }
            let absolute = (path as NSString).standardizingPath
            if let other = urlOfFile.updateValue(request.url, forKey: absolute), other != request.url {
                throw ValidationError("\(other) and \(request.url) would both be saved as \(path)")
            }
        }
        var configuration = Downloader.Configuration(stateDirectory: stateDir ?? Downloader.defaultStateDirectory)
        configuration.stallTimeout = .milliseconds(Int64(timeout * 1000))
        configuration.rateLimit = limitRate.flatMap(ByteCount.parse)
        configuration.logger = Logger(label: "haul")
        configuration.logger.logLevel = ProcessInfo.processInfo.environment["HAUL_DEBUG"] != nil ? .debug : .critical

        let downloader: Downloader
        do { downloader = try Downloader(configuration) } catch {
            Terminal.error("\(error)")
            throw ExitCode(ExitStatus.code(for: [error]))
        }
        let manager = DownloadManager(downloader: downloader, configuration: .init(
            maxConcurrentDownloads: maxConcurrentDownloads, maxConnectionsPerHost: maxConnectionsPerHost, queue: "haul-get"))
        let interrupts = InterruptHandler(manager: manager)
        var ids: [DownloadManager.ID] = []
        var failures: [DownloadError] = []
        for (entry, request) in zip(entries, requests) where interrupts.exitStatus == nil {
            do throws(DownloadError) {
                // A download this command left unfinished (killed, interrupted) continues; one
                // it finished is checked against the server again (one HEAD).
                let id = try await manager.add(request, replacing: true)
                await manager.requeue(id)
                if !ids.contains(id) { ids.append(id) }
            } catch {
                Terminal.error("\(entry.url): \(error.message)")
                failures.append(error)
            }
        }
        let display = ProgressDisplay(quiet: quiet, manager: manager, ids: ids)
        let drawing = Task { await display.run() }
        await manager.waitUntilIdle()
        drawing.cancel()
        await drawing.value
        if let status = interrupts.exitStatus {
            // The manager is shutting down: wait until every download has saved its state.
            await manager.shutdown()
            Terminal.clearDisplay()
            Terminal.error("interrupted: progress saved; run the same command again to continue")
            try? await downloader.shutdown()
            throw ExitCode(status)
        }
        let finished = await display.finish()
        await manager.shutdown()
        try? await downloader.shutdown()
        failures += finished.compactMap(\.error)
        if !failures.isEmpty { throw ExitCode(ExitStatus.code(for: failures)) }
    }

    /// The request for one URL with the command's options; an entry's own `out=`, `dir=` and
    /// `checksum=` win.
    private func request(for entry: InputEntry) throws -> DownloadRequest {
        let folder = entry.dir ?? directory
        var request = (output ?? entry.out.map { (folder as NSString).appendingPathComponent($0) })
            .map { DownloadRequest(url: entry.url, file: $0) } ?? DownloadRequest(url: entry.url, directory: folder)
        request.headers = try header.map(Self.parseHeader)
        do {
            request.checksum = try (entry.checksum ?? checksum).map(Checksum.init(parsing:))
        } catch {
            throw ValidationError("\(entry.url): \(error)")
        }
        request.maxTries = maxTries
        request.retryWait = .milliseconds(Int64(retryWait * 1000))
        request.overwrite = overwrite
        request.connections = connections
        request.minimumSplitSize = ByteCount.parse(minSplitSize) ?? 1 << 20
        request.rateLimit = maxDownloadLimit.flatMap(ByteCount.parse)
        return request
    }
}
