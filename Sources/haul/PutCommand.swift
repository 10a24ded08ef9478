import ArgumentParser
import Foundation
import Haul
import Logging
import Synchronization

struct PutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "put",
        abstract: "Upload files: resumable to a tus or IETF-draft server, a plain PUT elsewhere.",
        usage: "haul put [<options>] <file> ... <url>",
        discussion: """
            To a tus server (tus.io) or one of the IETF draft "Resumable Uploads for HTTP", \
            rerunning the same command after Ctrl-C, a crash or kill -9 asks the server what it \
            holds and sends only the rest (an upload of the draft in the interop version it began \
            with); a file changed since starts a new upload, and haul says why. A plain PUT (WebDAV, presigned URLs) starts over, as \
            curl -T does; to a URL ending with / (a folder) it stores the file under its own name. The upload is complete only \
            once the server holds every byte. Several files go one after another, each to a tus or IETF-draft endpoint \
            (--protocol tus or ietf) or into a folder URL ending with /. With \
            --daemon the running daemon queues each upload with its downloads (the same -j and host limits) \
            and continues it after a restart; haul ls lists it, haul pause and haul resume take its GID.

            Exit status: \(ExitStatus.summary)
            """)

    @Flag(name: [.short, .long], help: "Print nothing but errors.")
    var quiet = false

    @Option(help: "Folder for the upload records (default: $HAUL_STATE_DIR, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).")
    var stateDir: String?

    @Option(help: "Limit the upload rate, e.g. 2M (bytes per second; K, M, G suffixes; 0 for none).")
    var limitRate: String?

    @Option(
        name: .customLong("protocol"),
        help: ArgumentHelp(
            "auto (ask the server: tus or the IETF draft if it speaks one, else PUT), tus, ietf or put.",
            valueName: "auto|tus|ietf|put"))
    var uploadProtocol: UploadProtocol = .auto

    @Option(
        name: .customLong("ietf-version"),
        help: ArgumentHelp(
            "Interop version of the IETF draft to speak: 3, 5 or 6 (default: 6, or the one the server names).", valueName: "3|5|6"))
    var ietfVersion: Int?

    @Option(name: [.customShort("H"), .long], help: "Extra request header 'Name: value' (repeatable).")
    var header: [String] = []

    @Option(help: "Give up after this many failed tries in a row; a try that made progress resets the count (default 5).")
    var maxTries: Int = 5

    @Option(help: "Seconds to wait before the first retry; doubles each time, with jitter (default 1).")
    var retryWait: Double = 1

    @Option(help: "Seconds without the server taking or sending any byte before a try is abandoned and retried.")
    var timeout: Double = 30

    @Flag(
        help:
            "Queue the upload on the running daemon (of --state-dir) and print its GID, instead of sending it here; the daemon must have an --rpc-secret, and its own --timeout applies. haul ls lists it."
    )
    var daemon = false

    @Option(help: "With --daemon: higher starts first, among the daemon's uploads and downloads (default 0).")
    var priority: Int?

    @OptionGroup(title: "Network") var network: NetworkFlags

    @Argument(
        help: ArgumentHelp(
            "The files to upload, then the URL: a tus creation endpoint, the IETF draft's upload target, or the http(s):// URL a PUT stores the file at (a URL ending with / is a folder: each file goes in under its own name).",
            valueName: "file-or-url"))
    var operands: [String] = []

    /// The files to upload: every operand but the last.
    var files: [String] { Array(operands.dropLast()) }

    /// Where they go: the last operand.
    var url: String { operands.last ?? "" }

    /// Whether the URL names a folder (its path ends with `/` or is empty): a PUT stores each
    /// file in it under the file's name.
    var urlIsFolder: Bool { UploadRequest(file: "f", url: url).putTarget != url }

    func validate() throws {
        guard operands.count >= 2 else {
            throw ValidationError(operands.isEmpty ? "give the file to upload, then the URL" : "give the URL to upload \(operands[0]) to after it")
        }
        // A plain PUT of several files to one URL would leave only the last there. (A URL that
        // is not one is said by the upload, as for one file.)
        if files.count > 1, uploadProtocol != .tus, uploadProtocol != .ietf, !urlIsFolder,
            (try? UploadRequest(file: files[0], url: url).validate()) != nil
        {
            throw ValidationError(
                "several files go into a folder URL ending with / (each under its own name), or to a tus or IETF-draft endpoint named with --protocol tus or ietf"
            )
        }
        if let limitRate {
            switch ByteCount.rateLimit(limitRate) {
            case nil: throw ValidationError("--limit-rate must be a rate such as 2M (0 for no limit), not \(limitRate)")
            case let rate??: if rate < 1 << 10 { throw ValidationError("--limit-rate must be at least 1K, or 0 for no limit") }
            case .some(nil): break
            }
        }
        if !(timeout > 0 && timeout <= 86400) { throw ValidationError("--timeout must be between 0 and 86400 seconds") }
        if !(0...3600).contains(retryWait) { throw ValidationError("--retry-wait must be between 0 and 3600 seconds") }
        if let ietfVersion, !UploadRequest.ietfInteropVersions.contains(ietfVersion) {
            throw ValidationError("--ietf-version must be 3, 5 or 6, not \(ietfVersion)")
        }
        if priority != nil, !daemon { throw ValidationError("--priority is for --daemon: here the upload starts at once") }
    }

    func run() async throws {
        if daemon { return try await handToDaemon() }
        var configuration = Downloader.Configuration(stateDirectory: stateDir ?? Downloader.defaultStateDirectory)
        configuration.stallTimeout = .milliseconds(Int64(timeout * 1000))
        configuration.rateLimit = limitRate.flatMap { ByteCount.rateLimit($0) ?? nil }
        configuration.logger = Logger(label: "haul")
        configuration.logger.logLevel = ProcessInfo.processInfo.environment["HAUL_DEBUG"] != nil ? .debug : .critical
        if network.skipsCertificateCheck {
            Terminal.error("warning: TLS certificates are not checked: anyone on the way can read and change the upload")
        }
        var template = UploadRequest(file: "", url: url)
        template.protocol = uploadProtocol
        template.ietfInteropVersion = ietfVersion
        template.headers = try TransferOptions.headers(header)
        template.maxTries = maxTries
        template.retryWait = .milliseconds(Int64(retryWait * 1000))
        try network.apply(to: &template.network)

        let downloader = try ExitStatus.openDownloader(configuration)
        // Ctrl-C stops the upload under way; the files after it are not started.
        let current = Mutex<UploadTask?>(nil)
        let interrupts = InterruptHandler { current.withLock { $0 }?.cancel() }
        var failures: [DownloadError] = []
        for file in files {
            if interrupts.exitStatus != nil { break }
            var request = template
            request.file = file
            let startedAt = ContinuousClock.now
            let outcome: Result<UploadResult, DownloadError>
            do throws(DownloadError) {
                let task = try await downloader.upload(request)
                current.withLock { $0 = task }
                if interrupts.exitStatus != nil { task.cancel() }
                let display = UploadDisplay(quiet: quiet, name: (file as NSString).lastPathComponent)
                await display.run(task.progress)
                outcome = .success(try await task.result())
            } catch {
                outcome = .failure(error)
            }
            current.withLock { $0 = nil }
            Terminal.clearDisplay()
            switch outcome {
            case .success(let result):
                if !quiet { Terminal.write(UploadDisplay.doneLine(result, elapsed: .now - startedAt) + "\n") }
            case .failure(let error):
                if interrupts.exitStatus != nil { break }
                // Among several files, a line names its file when the error does not.
                let named = files.count > 1 && !error.description.contains(file)
                Terminal.error(named ? "\(file): \(error.description)" : error.description)
                failures.append(error)
            }
        }
        do { try await downloader.shutdown() } catch {
            Terminal.error(error.description)
            failures.append(error)
        }
        if let status = interrupts.exitStatus {
            Terminal.error("interrupted: run the same command again to continue (a resumable upload goes on from what the server holds)")
            throw ExitCode(status)
        }
        if !failures.isEmpty { throw ExitCode(ExitStatus.code(for: failures)) }
    }
}

extension PutCommand {
    /// `--daemon`: `haul.addUpload` on the daemon for each file; prints each upload's GID.
    func handToDaemon() async throws {
        var daemon = DaemonOptions()
        daemon.stateDir = stateDir
        let client = try daemon.connect()
        var options = network.aria2Options
        options["protocol"] = .string(uploadProtocol.rawValue)
        if let ietfVersion { options["ietf-version"] = .string(String(ietfVersion)) }
        if let limitRate { options["max-upload-limit"] = .string(limitRate) }
        if !header.isEmpty { options["header"] = .array(header.map { .string($0) }) }
        options["max-tries"] = .string(String(maxTries))
        options["retry-wait"] = .string(String(Int(retryWait.rounded(.up))))
        if let priority { options["priority"] = .string(String(priority)) }
        try await client.addEach(files, "haul.addUpload") { file in [.string(FilePaths.absolute(file)), .string(url), .object(options)] }
    }
}

extension UploadProtocol: ExpressibleByArgument {}
