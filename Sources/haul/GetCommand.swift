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

    @Option(name: [.short, .long], help: "Save the (single) URL at this path; - writes it to standard output as it arrives (no part file, no resume).")
    var output: String?

    @Option(name: [.short, .customLong("dir")], help: "Save into this folder, under the server's or the URL's file name.")
    var directory: String = "."

    @Option(
        name: [.short, .customLong("input-file")],
        help:
            "Read URLs from this file ('-' for standard input): one a line, each optionally followed by indented aria2-style 'out=', 'dir=' and 'checksum=' lines; '#' starts a comment."
    )
    var inputFile: String?

    @Option(
        name: [.customShort("M"), .customLong("metalink-file")],
        help: ArgumentHelp(
            "A Metalink document (.meta4 or .metalink) to download (repeatable): a path, an http:// or https:// URL, or '-' for standard input. Each of its files is saved into --dir under its Metalink name, fetched from all of its URLs and checked against its digests.",
            valueName: "file"))
    var metalinkFile: [String] = []

    @Option(help: "Verify the finished file: sha-256=HEX, sha-1=HEX, sha-512=HEX or md5=HEX.")
    var checksum: String?

    @OptionGroup var checksums: ChecksumFileOptions

    @Option(
        help: ArgumentHelp(
            "Another URL of the same file (repeatable): the download spreads over the URL and its mirrors. Takes a single URL; in an input file, put a file's URLs on one line, separated by tabs.",
            valueName: "url"))
    var mirror: [String] = []

    @OptionGroup var transfer: TransferOptions

    @Option(help: "Seconds without receiving any byte before a try is abandoned and retried from where it was.")
    var timeout: Double = 30

    @Option(name: [.customShort("j"), .long], help: "Downloads running at once.")
    var maxConcurrentDownloads: Int = 5

    @Option(help: "Connections open to one host at once, across all downloads.")
    var maxConnectionsPerHost: Int = 16

    @Option(help: "Limit the total download rate of all connections, e.g. 2M (bytes per second; K, M, G suffixes; 0 for none).")
    var limitRate: String?

    @Option(help: ArgumentHelp("At the end, write every cookie (loaded and set by servers) to this file, Netscape format.", valueName: "file"))
    var saveCookies: String?

    @Flag(name: [.short, .long], help: "Print nothing but errors.")
    var quiet = false

    @Option(help: "Folder for the download records (default: $HAUL_STATE_DIR, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).")
    var stateDir: String?

    func validate() throws {
        if urls.isEmpty && inputFile == nil && metalinkFile.isEmpty {
            throw ValidationError("give at least one URL, or --input-file, or --metalink-file")
        }
        if output != nil && (urls.count > 1 || inputFile != nil) {
            throw ValidationError("--output takes a single URL; use --dir for several")
        }
        if output != nil && !metalinkFile.isEmpty {
            throw ValidationError("--output cannot be used with --metalink-file: each file of a Metalink is saved under its own name in --dir")
        }
        if metalinkFile.filter({ $0 == "-" }).count + (inputFile == "-" ? 1 : 0) > 1 {
            throw ValidationError("standard input ('-') can be read once: give it to one --input-file or --metalink-file")
        }
        if !mirror.isEmpty && (urls.count != 1 || inputFile != nil) {
            throw ValidationError("--mirror takes a single URL; in an input file, put a file's URLs on one line, separated by tabs")
        }
        if !mirror.isEmpty && output == "-" { throw ValidationError("--mirror cannot be used with --output -") }
        if !(1...1000).contains(maxConcurrentDownloads) { throw ValidationError("--max-concurrent-downloads must be between 1 and 1000") }
        if !(1...256).contains(maxConnectionsPerHost) { throw ValidationError("--max-connections-per-host must be between 1 and 256") }
        if let limitRate {
            switch ByteCount.rateLimit(limitRate) {
            case nil: throw ValidationError("--limit-rate must be a rate such as 2M (0 for no limit), not \(limitRate)")
            case let rate??: if rate < 1 << 10 { throw ValidationError("--limit-rate must be at least 1K, or 0 for no limit") }
            case .some(nil): break
            }
        }
        if !(timeout > 0 && timeout <= 86400) { throw ValidationError("--timeout must be between 0 and 86400 seconds") }
        if let checksum {
            do { _ = try Checksum(parsing: checksum) } catch { throw ValidationError("\(error)") }
        }
    }

    /// URLs read from the input file a batch at a time, at most this many: the first downloads
    /// start while the rest of a long list is still being read.
    static let batchSize = 5000
    /// The first batch: the downloads start once this many URLs are added, not 5,000 (adding
    /// those held a 10,000-file run's first request back 0.1-0.2 s); each next batch is four
    /// times the last.
    static let firstBatchSize = 64

    func run() async throws {
        let startedAt = ContinuousClock.now
        var configuration = Downloader.Configuration(stateDirectory: stateDir ?? Downloader.defaultStateDirectory)
        configuration.stallTimeout = .milliseconds(Int64(timeout * 1000))
        configuration.rateLimit = limitRate.flatMap { ByteCount.rateLimit($0) ?? nil }
        configuration.logger = Logger(label: "haul")
        configuration.logger.logLevel = ProcessInfo.processInfo.environment["HAUL_DEBUG"] != nil ? .debug : .critical
        configuration.saveCookies = saveCookies.map(DownloadRequest.absolutePath)
        if transfer.network.skipsCertificateCheck {
            Terminal.error("warning: TLS certificates are not checked: anyone on the way can read and change the downloads")
        }
        if output == "-" { return try await streamToStandardOutput(configuration) }

        // The options parsed once: every request shares them (one copy of the headers, not a million).
        // --dir made absolute once: a relative one would be resolved against the current
        // folder (a getcwd) four times a file of a long list.
        let root = FilePaths.absolute(directory)
        var template = DownloadRequest(url: "", directory: root)
        try transfer.apply(to: &template)
        var confined = template
        confined.confinement = root
        let templates = (open: template, confined: confined)
        let checksum = try self.checksum.map { text in
            do { return try Checksum(parsing: text) } catch { throw ValidationError("\(error)") }
        }
        var failures: [DownloadError] = []
        let downloader = try ExitStatus.openDownloader(configuration)
        let sums = try await checksums.load(template: template, downloader: downloader)
        // Each Metalink's files, read (or fetched) before anything starts.
        var fromMetalinks: [(InputEntry, DownloadRequest)] = []
        for document in metalinkFile {
            do throws(DownloadError) {
                fromMetalinks += try await metalinkRequests(document, template: template, downloader: downloader)
            } catch {
                Terminal.error("\(Self.shown(document)): \(error.message)")
                failures.append(error)
            }
        }
        let manager = DownloadManager(
            downloader: downloader,
            configuration: .init(
                maxConcurrentDownloads: maxConcurrentDownloads, maxConnectionsPerHost: maxConnectionsPerHost, queue: "haul-get"))
        let interrupts = InterruptHandler(manager: manager)
        let display = ProgressDisplay(quiet: quiet, manager: manager, startedAt: startedAt)
        let drawing = Task { await display.run() }
        var input = try inputFile.map(InputFile.init(path:))
        var pending = urls.map { InputEntry(url: $0, mirrors: mirror) }
        // Two URLs of this run for the same file: the second is an error, not a replacement.
        var urlOfFile: [String: String] = [:]
        // Downloads of URLs (not of a Metalink's files) whose answer may be a Metalink to follow.
        var followable: [DownloadManager.ID] = []
        var batchSize = Self.firstBatchSize
        while interrupts.exitStatus == nil {
            if pending.isEmpty, input != nil {
                pending = try input!.next(batchSize)
                batchSize = min(batchSize * 4, Self.batchSize)
            }
            if pending.isEmpty && fromMetalinks.isEmpty {
                // Every download so far is added: with --follow-metalink, the Metalinks among
                // their answers are read once they are in, and their files are the next batch.
                guard transfer.followMetalink, !followable.isEmpty else { break }
                await manager.waitUntilIdle()
                for id in followable {
                    guard let path = await manager.download(id)?.result?.path, Metalink.isDocument(atPath: path) else { continue }
                    do throws(DownloadError) {
                        fromMetalinks += try await metalinkRequests(path, template: template, downloader: downloader)
                    } catch {
                        Terminal.error("\(path): \(error.message)")
                        failures.append(error)
                    }
                }
                followable = []
                if fromMetalinks.isEmpty { break }
            }
            var batch: [(InputEntry, DownloadRequest)] = []
            // A Metalink's requests are made already; an entry's are made here.
            let work = fromMetalinks.map { ($0.0, Optional($0.1)) } + pending.map { ($0, DownloadRequest?.none) }
            fromMetalinks = []
            for (entry, made) in work {
                do {
                    var request = try made ?? request(for: entry, template: templates, checksum: checksum, root: root)
                    // A Metalink's file carries its own digests; a listed one checks the others.
                    if made == nil, let sums, request.checksum == nil { request.checksum = try listedChecksum(for: entry, in: sums) }
                    if case .file(let path) = request.destination {
                        let absolute = DownloadRequest.absolutePath(path)
                        if let other = urlOfFile.updateValue(entry.url, forKey: absolute), other != entry.url {
                            throw DownloadError.invalidRequest("\(other) is already saved as \(path) by this command")
                        }
                    }
                    batch.append((entry, request))
                } catch {
                    Terminal.error("\(URLRedaction.redact(entry.url)): \((error as? DownloadError)?.message ?? "\(error)")")
                    failures.append((error as? DownloadError) ?? .invalidRequest("\(error)"))
                }
            }
            pending = []
            do throws(DownloadError) {
                // A download this command left unfinished (killed, interrupted) continues; one it
                // finished is checked against the server again (one conditional request).
                let added = try await manager.add(contentsOf: batch.map(\.1), replacing: true, requeueExisting: true)
                for ((entry, _), result) in zip(batch, added) {
                    switch result {
                    case .success(let id):
                        display.track(id)
                        if transfer.followMetalink, !entry.fromMetalink { followable.append(id) }
                    case .failure(let error):
                        Terminal.error("\(URLRedaction.redact(entry.url)): \(error.message)")
                        failures.append(error)
                    }
                }
            } catch {
                // The store's failure is said once, at the end, however many batches meet it.
                if await manager.failure == nil { Terminal.error(error.description) }
                failures.append(error)
                break
            }
        }
        if display.isEmpty, failures.isEmpty {
            throw ValidationError("no URLs to download in \(inputFile ?? metalinkFile.first ?? "the arguments")")
        }
        await manager.waitUntilIdle()
        drawing.cancel()
        await drawing.value
        if let status = interrupts.exitStatus {
            // The manager is shutting down: wait until every download has saved its state.
            await manager.shutdown()
            Terminal.clearDisplay()
            do { try await downloader.shutdown() } catch {
                Terminal.error("interrupted, and the progress could not be saved: \(error)")
                throw ExitCode(ExitStatus.code(for: [error]))
            }
            Terminal.error("interrupted: progress saved; run the same command again to continue")
            throw ExitCode(status)
        }
        let finished = await display.finish()
        await manager.shutdown()
        if let failure = await manager.failure {
            // The store failed: one line says so, not one a download.
            Terminal.error(failure.description)
            // It cannot write what is left either; the failure is already said.
            do { try await downloader.shutdown() } catch {}
            throw ExitCode(ExitStatus.code(for: [failure]))
        }
        do { try await downloader.shutdown() } catch {
            Terminal.error("\(error)")
            failures.append(error)
        }
        failures += finished
        if !failures.isEmpty { throw ExitCode(ExitStatus.code(for: failures)) }
    }

    /// `-o -`: the body straight to standard output.
    private func streamToStandardOutput(_ configuration: Downloader.Configuration) async throws {
        guard let url = urls.first else { throw ValidationError("give at least one URL, or --input-file") }
        var request = DownloadRequest(url: url, file: "-")
        try transfer.apply(to: &request)
        request.checksum = try checksum.map { text in
            do { return try Checksum(parsing: text) } catch { throw ValidationError("\(error)") }
        }
        let downloader = try ExitStatus.openDownloader(configuration)
        let sums = request.checksum == nil ? try await checksums.load(template: request, downloader: downloader) : nil
        var failure: DownloadError?
        do throws(DownloadError) {
            if let sums { request.checksum = try listedChecksum(for: InputEntry(url: url), in: sums) }
            _ = try await downloader.stream(request) { bytes in try StandardOutput.write(bytes) }
        } catch {
            failure = error
        }
        do { try await downloader.shutdown() } catch { failure = failure ?? error }
        if let failure {
            Terminal.error(failure.description)
            throw ExitCode(ExitStatus.code(for: [failure]))
        }
    }

    /// The digest `--checksum-file` lists for an entry's file, matched by the name the file is
    /// known by before the download: `-o` or the entry's `out=`, else (or when that is not
    /// listed) the URL's last path segment — not a name the server suggests. An unlisted file
    /// is said in one line, or, with `--require-checksum`, fails.
    private func listedChecksum(for entry: InputEntry, in sums: ChecksumFile) throws(DownloadError) -> Checksum? {
        let given = output == "-" ? entry.out : output ?? entry.out
        let names = [given, ChecksumFile.fileName(ofURL: entry.url)].compactMap { $0 }
        for name in names { if let listed = sums.checksum(forPath: name) { return listed } }
        let name = names.first ?? URLRedaction.redact(entry.url)
        if checksums.requireChecksum { throw sums.notListed(name) }
        if !quiet { Terminal.error("\(name) is not in the checksum file \(sums.source): not verified") }
        return nil
    }

    /// The requests for every file of the Metalink document `document` (a path, an `http(s)`
    /// URL or `-`), each into its place inside `--dir` with the command's options; the files
    /// left out are said on standard error.
    private func metalinkRequests(
        _ document: String, template: DownloadRequest, downloader: Downloader
    ) async throws(DownloadError) -> [(InputEntry, DownloadRequest)] {
        let metalink = try Metalink(parsing: try await Self.read(document, template: template, downloader: downloader))
        if !quiet {
            for line in metalink.skipped { Terminal.error("\(Self.shown(document)): skipped \(line)") }
        }
        var made: [(InputEntry, DownloadRequest)] = []
        let root = FilePaths.absolute(directory)
        for file in metalink.files {
            let request = file.request(in: root, template: template)
            do throws(DownloadError) { try request.validate() } catch {
                throw .invalidRequest("\(file.name): \(error.message)")
            }
            made.append((InputEntry(url: file.sources[0].uri, fromMetalink: true), request))
        }
        return made
    }

    /// `document` as it may be shown: a URL without its credentials.
    private static func shown(_ document: String) -> String {
        document.contains("://") ? URLRedaction.redact(document) : document
    }

    /// The bytes of a Metalink document: a file, standard input (`-`), or an `http(s)` URL
    /// fetched with the command's network options; at most ``Metalink/maxDocumentBytes``.
    private static func read(_ document: String, template: DownloadRequest, downloader: Downloader) async throws(DownloadError) -> Data {
        let limit = Metalink.maxDocumentBytes
        let tooLarge = DownloadError.invalidRequest("the Metalink document is larger than \(limit) bytes")
        let lowered = document.lowercased()
        if lowered.hasPrefix("http://") || lowered.hasPrefix("https://") {
            var request = template
            request.sources = [DownloadRequest.Source(uri: document)]
            return Data(try await downloader.page(request, maxBytes: limit, what: "a Metalink document").body)
        }
        let handle: FileHandle
        if document == "-" {
            handle = FileHandle.standardInput
        } else {
            guard let opened = FileHandle(forReadingAtPath: document) else {
                throw .invalidRequest("cannot read the Metalink document: \(String(cString: strerror(errno)))")
            }
            handle = opened
        }
        defer { if document != "-" { try? handle.close() } }
        do {
            let data = try handle.read(upToCount: limit + 1) ?? Data()
            guard data.count <= limit else { throw tooLarge }
            return data
        } catch let error as DownloadError {
            throw error
        } catch {
            throw .invalidRequest("cannot read the Metalink document: \(error)")
        }
    }

    /// The request for one URL (and its mirrors) with the command's options; an entry's own `out=`, `dir=` and
    /// `checksum=` win.
    /// `root` is `--dir`, absolute; `template` is the command's options, open and confined to
    /// `root`, so the requests of a list share one copy of them, checked once.
    private func request(
        for entry: InputEntry, template: (open: DownloadRequest, confined: DownloadRequest), checksum: Checksum?, root: String
    ) throws -> DownloadRequest {
        let folder = entry.dir.map(FilePaths.absolute) ?? root
        let destination: DownloadRequest.Destination
        if let file = output ?? entry.out.map({ (folder as NSString).appendingPathComponent($0) }) {
            destination = .file(file)
        } else {
            destination = .directory(folder)
        }
        // A list's files stay inside --dir, whatever links are planted there while it runs.
        var inside = false
        if output == nil {
            let path = FilePaths.absolute(destination.path)
            inside = path == root || path.hasPrefix(root == "/" ? "/" : root + "/")
        }
        var request = inside ? template.confined : template.open
        request.sources = ([entry.url] + entry.mirrors).map { DownloadRequest.Source(uri: $0) }
        request.destination = destination
        do {
            request.checksum = try entry.checksum.map(Checksum.init(parsing:)) ?? checksum
        } catch {
            throw DownloadError.invalidRequest("\(error)")
        }
        try request.validate()
        return request
    }
}
