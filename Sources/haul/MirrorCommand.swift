import ArgumentParser
import Foundation
import Haul
import HaulDaemon
import Logging
import Synchronization

struct MirrorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mirror",
        abstract: "Copy a folder tree served over HTTP (its directory listings) into DIR, and keep it in sync.",
        discussion: """
            Reads the listings of nginx autoindex (HTML, JSON, XML), Apache, lighttpd, Caddy and \
            Python's http.server, never above URL nor to another host. A rerun asks the server about \
            every file it copied with one conditional request and fetches only what changed; an \
            interrupted run continues. --delete removes files this mirror copied that are gone from \
            the server, and nothing else. With --checksum-file, each file fetched is verified \
            against the digest listed under its path below URL (or its name alone, when that is \
            listed once) before it gets its name; files not fetched again (unchanged on the \
            server) are not hashed again.

            Exit status: \(ExitStatus.summary)
            """)

    @Argument(help: "The http:// or https:// URL of the folder to copy.")
    var url: String

    @Argument(help: "The local folder to copy it into (made if missing).")
    var directory: String

    @Option(name: [.customShort("j"), .long], help: "Downloads running at once.")
    var maxConcurrentDownloads: Int = 16

    @Option(help: "Listings read at once.")
    var parallelListings: Int = 8

    @Option(help: "Connections open to one host at once, across all downloads.")
    var maxConnectionsPerHost: Int = 16

    @Option(help: "Folder levels below URL to copy (0: only URL's own files).")
    var level: Int = 50

    @Option(help: ArgumentHelp("Copy only files whose path below URL (or name) matches this glob (repeatable).", valueName: "glob"))
    var include: [String] = []

    @Option(help: ArgumentHelp("Leave out files and folders whose path below URL (or name) matches this glob (repeatable).", valueName: "glob"))
    var exclude: [String] = []

    @Flag(help: "Remove files this mirror copied earlier that are no longer on the server, and the folders that leaves empty (never any other file).")
    var delete = false

    @Flag(help: "Print what would be fetched and deleted; change nothing.")
    var dryRun = false

    @Flag(help: "Print the summary as JSON on standard output.")
    var json = false

    @OptionGroup var checksums: ChecksumFileOptions

    @OptionGroup var transfer: TransferOptions

    @Option(help: "Seconds without receiving any byte before a try is abandoned and retried from where it was.")
    var timeout: Double = 30

    @Flag(name: [.short, .long], help: "Print nothing but errors.")
    var quiet = false

    @Option(
        help: ArgumentHelp(
            "Hand the mirror to the running daemon (of --state-dir), which runs it now and again this long after each run ends: 90s, 30m, 1h, 1d; the daemon's own --timeout and --max-connections-per-host apply. Prints its id; haul ls shows it.",
            valueName: "time"))
    var every: String?

    @Option(help: "Folder for the download records (default: $HAUL_STATE_DIR, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).")
    var stateDir: String?

    func validate() throws {
        guard Mirror.Configuration.isFolderURL(url) else { throw ValidationError("the URL must be an http:// or https:// URL, not \(url)") }
        if !(1...1000).contains(maxConcurrentDownloads) { throw ValidationError("--max-concurrent-downloads must be between 1 and 1000") }
        if !(1...64).contains(parallelListings) { throw ValidationError("--parallel-listings must be between 1 and 64") }
        if !(1...256).contains(maxConnectionsPerHost) { throw ValidationError("--max-connections-per-host must be between 1 and 256") }
        if !(0...1000).contains(level) { throw ValidationError("--level must be between 0 and 1000") }
        if !(timeout > 0 && timeout <= 86400) { throw ValidationError("--timeout must be between 0 and 86400 seconds") }
        if every != nil {
            if dryRun || json { throw ValidationError("--every hands the mirror to the daemon: --dry-run and --json are for a run here") }
        }
    }

    func run() async throws {
        if let every { return try await handToDaemon(every: every) }
        var engine = Downloader.Configuration(stateDirectory: stateDir ?? Downloader.defaultStateDirectory)
        engine.stallTimeout = .milliseconds(Int64(timeout * 1000))
        engine.logger = Logger(label: "haul")
        engine.logger.logLevel = ProcessInfo.processInfo.environment["HAUL_DEBUG"] != nil ? .debug : .critical
        if transfer.network.skipsCertificateCheck {
            Terminal.error("warning: TLS certificates are not checked: anyone on the way can read and change the downloads")
        }
        var configuration = Mirror.Configuration(url: url, directory: directory)
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: configuration.directory, isDirectory: &isFolder), !isFolder.boolValue {
            Terminal.error("\(directory) is not a folder: give the folder to copy the tree into")
            throw ExitCode(ExitStatus.unusable)
        }
        try transfer.apply(to: &configuration.template)
        configuration.maxDepth = level
        configuration.include = include
        configuration.exclude = exclude
        configuration.deletesGone = delete
        configuration.dryRun = dryRun
        configuration.parallelListings = parallelListings
        configuration.maxConcurrentDownloads = maxConcurrentDownloads
        configuration.maxConnectionsPerHost = maxConnectionsPerHost
        let downloader = try ExitStatus.openDownloader(engine)
        configuration.checksums = try await checksums.load(template: configuration.template, downloader: downloader)
        configuration.requiresChecksum = checksums.requireChecksum
        let mirror = Mirror(configuration, downloader: downloader)
        let interrupts = InterruptHandler { Task { await mirror.stop() } }
        let (quiet, json) = (quiet, json)
        // The store's failure, told by the run, is not told again when closing the store fails alike.
        let problems = Mutex(Set<String>())
        var summary: Mirror.Summary
        do throws(DownloadError) {
            summary = try await mirror.run { event in
                switch event {
                case .wouldFetch, .wouldDelete: if !json { StandardOutput.line(event.description) }
                case .deleted: if !quiet { Terminal.write("\(event)\n") }
                case .skipped: if !quiet { Terminal.error(event.description) }
                case .problem(let message):
                    problems.withLock { _ = $0.insert(message) }
                    Terminal.error(message)
                }
            }
        } catch {
            Terminal.error(error.description)
            do { try await downloader.shutdown() } catch {}
            throw ExitCode(ExitStatus.code(for: [error]))
        }
        var saveFailure: DownloadError?
        do throws(DownloadError) { try await downloader.shutdown() } catch { saveFailure = error }
        if summary.interrupted, let status = interrupts.exitStatus {
            if let saveFailure {
                Terminal.error("interrupted, and the progress could not be saved: \(saveFailure)")
                throw ExitCode(ExitStatus.code(for: [saveFailure]))
            }
            Terminal.error("interrupted: progress saved; run the same command again to continue")
            throw ExitCode(status)
        }
        if let saveFailure {
            if !problems.withLock({ $0.contains(saveFailure.description) }) { Terminal.error("\(saveFailure)") }
            summary.errors.append(saveFailure)
        }
        if json {
            StandardOutput.line(summary.json)
        } else if !quiet, summary.listingsRead > 0 {
            Terminal.write(summary.table(dryRun: dryRun, checksFiles: configuration.checksums != nil))
        }
        if !summary.errors.isEmpty { throw ExitCode(ExitStatus.code(for: summary.errors)) }
    }

    /// `--every`: `haul.addMirror` on the daemon; prints the mirror's id.
    func handToDaemon(every: String) async throws {
        var daemon = DaemonOptions()
        daemon.stateDir = stateDir
        let client = try daemon.connect()
        var options = try transfer.aria2Options()
        options["dir"] = .string(FilePaths.absolute(directory))
        options["every"] = .string(every)
        options["level"] = .string(String(level))
        options["max-concurrent-downloads"] = .string(String(maxConcurrentDownloads))
        if delete { options["delete"] = "true" }
        if !include.isEmpty { options["include"] = .array(include.map { .string($0) }) }
        if !exclude.isEmpty { options["exclude"] = .array(exclude.map { .string($0) }) }
        if let list = checksums.checksumFile {
            options["checksum-file"] = .string(ChecksumFile.isURL(list) ? list : FilePaths.absolute(list))
            if checksums.requireChecksum { options["require-checksum"] = "true" }
        }
        do throws(ClientFailure) {
            let answer = try await client.call("haul.addMirror", [.string(url), .object(options)])
            guard let id = answer.string else { throw .unexpected("haul.addMirror", answer) }
            StandardOutput.line(id)
        } catch  where error.isRefusal {
            Terminal.error("\(url): \(error.description)")
            throw ExitCode(ClientExitStatus.refused)
        } catch {
            throw error.report()
        }
    }
}
