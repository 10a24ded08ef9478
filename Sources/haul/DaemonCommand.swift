import ArgumentParser
import Foundation
import Haul
import HaulDaemon
import Logging

struct DaemonCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "daemon",
        abstract: "Run the background download service: aria2 JSON-RPC on /jsonrpc and a web page at /.",
        discussion: """
            Any aria2 client (aria2p, AriaNg, …) can drive it; haul add, haul ls, haul wait and the \
            other client commands find it through the state folder. SIGTERM or Ctrl-C stops every \
            transfer, saves its state and exits 0; the next start continues the queue, also after kill -9.
            """)

    @Option(help: "Port to listen on (0 picks a free one; it is written to daemon.json in the state folder).")
    var rpcListenPort: Int = 6800

    @Option(help: "Address to listen on. Anything but loopback needs --rpc-secret.")
    var rpcListenAddress: String = "127.0.0.1"

    @Flag(help: "Listen on every interface (0.0.0.0, like aria2's --rpc-listen-all); needs --rpc-secret.")
    var rpcListenAll = false

    @Option(help: "Secret every call must carry as its first parameter, token:SECRET (default: $HAUL_RPC_SECRET).")
    var rpcSecret: String?

    @Flag(
        help: ArgumentHelp(
            "Print the web page's address with the secret in it (#token=SECRET), which opens the page signed in.",
            discussion:
                "Without it the daemon never prints the secret: what it prints often ends up in logs (journald, a terminal's scrollback, CI output). daemon.json in the state folder holds it, readable by you only."
        ))
    var printToken = false

    @Flag(help: "Answer web pages from any origin (for web front ends served elsewhere, like aria2's option).")
    var rpcAllowOriginAll = false

    @Option(
        help: ArgumentHelp(
            "Another name clients reach the daemon by, HOST or HOST:PORT (a tunnel's, a proxy's); repeatable.",
            discussion:
                "Requests are answered only when their Host is one of the daemon's names: 127.0.0.1, localhost and [::1] with its port, the listen address, and these. That is what keeps a web page from reaching it by DNS rebinding."
        ))
    var rpcAllowHost: [String] = []

    // Optional (with their defaults in run()): a flag given here wins over the setting saved
    // by changeGlobalOption, and only a given flag should.
    @Option(name: [.short, .customLong("dir")], help: "Where downloads go unless a call gives a dir (default: the current folder).")
    var directory: String?

    @Option(name: [.customShort("j"), .long], help: "Downloads running at once (default 5).")
    var maxConcurrentDownloads: Int?

    @OptionGroup(title: "Defaults for every download (a call's own options win)")
    var transfer: TransferOptions

    @Option(help: "Connections open to one host at once, across all downloads.")
    var maxConnectionsPerHost: Int = 16

    @Option(help: "Limit the total download rate, e.g. 2M (bytes per second; K, M, G suffixes; 0 for none).")
    var limitRate: String?

    @Option(help: ArgumentHelp("When the daemon stops, write every cookie (loaded and set by servers) to this file, Netscape format.", valueName: "file"))
    var saveCookies: String?

    @Option(help: "Seconds without receiving any byte before a try is abandoned and retried from where it was.")
    var timeout: Double = 30

    @Option(help: "Run this command with GID, 1 and the file's path when a download completes.")
    var onDownloadComplete: String?

    @Option(help: "Run this command with GID, 1 and the file's path when a download fails.")
    var onDownloadError: String?

    @Flag(name: [.short, .long], help: "Print nothing but errors.")
    var quiet = false

    @Option(help: "Folder for the download records (default: $HAUL_STATE_DIR, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).")
    var stateDir: String?

    @Option(
        help: ArgumentHelp(
            "Keep the queue on a PostgreSQL server instead of in the state folder, shared with every daemon given the same (default: $HAUL_STORE, else SQLite there).",
            valueName: "postgresql://USER@HOST[:PORT]/DATABASE"))
    var store: String?

    /// `--store`, else `$HAUL_STORE`, else SQLite in the state folder.
    var storeLocation: StoreLocation {
        get throws {
            guard let text = store ?? ProcessInfo.processInfo.environment["HAUL_STORE"].flatMap({ $0.isEmpty ? nil : $0 }) else {
                return .stateDirectory
            }
            do { return try StoreLocation(parsing: text) } catch { throw ValidationError(error.message) }
        }
    }

    func validate() throws {
        _ = try storeLocation
        if !(0...65535).contains(rpcListenPort) { throw ValidationError("--rpc-listen-port must be between 0 and 65535") }
        if let maxConcurrentDownloads, !(1...1000).contains(maxConcurrentDownloads) {
            throw ValidationError("--max-concurrent-downloads must be between 1 and 1000")
        }
        if !(1...256).contains(maxConnectionsPerHost) { throw ValidationError("--max-connections-per-host must be between 1 and 256") }
        if let limitRate {
            switch ByteCount.rateLimit(limitRate) {
            case nil: throw ValidationError("--limit-rate must be a rate such as 2M (0 for no limit), not \(limitRate)")
            case let rate??: if rate < 1 << 10 { throw ValidationError("--limit-rate must be at least 1K, or 0 for no limit") }
            case .some(nil): break
            }
        }
        if !(timeout > 0 && timeout <= 86400) { throw ValidationError("--timeout must be between 0 and 86400 seconds") }
    }

    func run() async throws {
        var configuration = Daemon.Configuration(
            stateDirectory: stateDir ?? Downloader.defaultStateDirectory,
            directory: directory ?? ".")
        configuration.store = try storeLocation
        configuration.address = rpcListenAll ? "0.0.0.0" : rpcListenAddress
        configuration.port = rpcListenPort
        configuration.secret = rpcSecret ?? ProcessInfo.processInfo.environment["HAUL_RPC_SECRET"].flatMap { $0.isEmpty ? nil : $0 }
        configuration.allowOriginAll = rpcAllowOriginAll
        configuration.allowedHosts = rpcAllowHost
        configuration.maxConcurrentDownloads = maxConcurrentDownloads ?? 5
        configuration.maxConnectionsPerHost = maxConnectionsPerHost
        configuration.connections = transfer.connections ?? TransferOptions.defaultConnections
        try transfer.apply(to: &configuration.defaults)
        configuration.rateLimit = limitRate.flatMap { ByteCount.rateLimit($0) ?? nil }
        configuration.stallTimeout = .milliseconds(Int64(timeout * 1000))
        configuration.saveCookies = saveCookies.map(DownloadRequest.absolutePath)
        configuration.onDownloadComplete = onDownloadComplete
        configuration.onDownloadError = onDownloadError
        var explicit = Set(try transfer.aria2Options().keys)
        if directory != nil { explicit.insert("dir") }
        if maxConcurrentDownloads != nil { explicit.insert("max-concurrent-downloads") }
        if limitRate != nil { explicit.insert("max-overall-download-limit") }
        configuration.explicitOptions = explicit

        let quiet = quiet
        let level: Logger.Level = ProcessInfo.processInfo.environment["HAUL_DEBUG"] != nil ? .debug : (quiet ? .error : .notice)
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let records = configuration.store == .stateDirectory ? "state: \(configuration.stateDirectory)" : "store: \(configuration.store)"
        let printToken = printToken
        do {
            try await Daemon.run(configuration, logger: Logger(label: "haul-daemon")) { endpoint in
                guard !quiet else { return }
                let page = printToken ? endpoint.pageURL : endpoint.pageBaseURL
                let asks = endpoint.secret != nil && !printToken ? " (it asks for the secret; --print-token prints an address that carries it)" : ""
                Terminal.error("daemon listening on \(endpoint.rpcURL) (\(records)); web page: \(page)\(asks)")
            }
        } catch let failure as Daemon.Failure {
            Terminal.error(failure.description)
            throw ExitCode(ExitStatus.unusable)
        }
        if !quiet { Terminal.error("daemon stopped; every download's progress is saved") }
    }
}
