import Foundation
import Haul
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import ServiceLifecycle

/// `haul daemon`: a ``DownloadManager`` on the shared store, driven over aria2's JSON-RPC
/// (HTTP POST and WebSocket on `/jsonrpc`), with a web page at `/` and Prometheus' metrics at
/// `/metrics`.
///
/// SIGTERM, SIGINT and the `shutdown` method stop every transfer, save its ranges, and make
/// ``run(_:logger:onRunning:)`` return; the downloads that were running continue at the next
/// start, as after `kill -9`.
public enum Daemon {
    /// The queue in the store that the daemon's downloads live in.
    public static let queue = "daemon"

    /// Runs until SIGTERM, SIGINT or aria2's `shutdown` method. Calls `onRunning` once it listens.
    ///
    /// - Throws: ``Failure`` when it cannot start: a non-loopback address without a secret,
    ///   another daemon on the state folder, a store that cannot be opened, a port in use.
    public static func run(
        _ configuration: Configuration, logger: Logger,
        onRunning: @escaping @Sendable (DaemonEndpoint) -> Void = { _ in }
    ) async throws {
        if !configuration.isLoopback, !configuration.hasSecret {
            throw Failure(
                description:
                    "refusing to listen on \(configuration.address) without --rpc-secret: anyone who can reach it could make this machine download and write files; set a secret or listen on 127.0.0.1"
            )
        }
        let lock = try StateLock(stateDirectory: configuration.stateDirectory)
        defer { lock.release() }

        let metrics = DaemonMetrics()
        let downloader: Downloader
        var engine = engineConfiguration(configuration, logger: logger)
        engine.observer = metrics.observer
        do { downloader = try Downloader(engine) } catch {
            throw Failure(description: error.description)
        }
        let manager = DownloadManager(
            downloader: downloader,
            configuration: .init(
                maxConcurrentDownloads: configuration.maxConcurrentDownloads,
                maxConnectionsPerHost: configuration.maxConnectionsPerHost, queue: queue))
        let notifier = await Notifier(
            manager: manager,
            hooks: .init(
                onComplete: configuration.onDownloadComplete,
                onError: configuration.onDownloadError), metrics: metrics, logger: logger)
        do { try await manager.restore() } catch {
            await manager.shutdown()
            do { try await downloader.shutdown() } catch {
                logger.error("\(error)")
            }
            throw Failure(description: error.description)
        }

        let shutdownRequests = ShutdownRequests()
        let mirrors = DaemonMirrors(
            downloader: downloader, settings: manager, logger: logger, maxConnectionsPerHost: configuration.maxConnectionsPerHost)
        let rpc = Aria2RPC(
            manager: manager, downloader: downloader, secret: configuration.secret,
            globals: globalOptions(configuration), logger: logger, mirrors: mirrors,
            requestShutdown: { shutdownRequests.request() })
        await rpc.restoreSavedOptions(except: configuration.explicitOptions)
        // A fleet's daemons carry calls and notifications to one another.
        let fleet = manager.queueIsShared ? await FleetLink(manager: manager, secret: configuration.secret, logger: logger) : nil
        if let fleet {
            await rpc.link(fleet)
            notifier.link(fleet)
        }
        let listener = Listener(
            configuration: configuration, rpc: rpc, notifier: notifier, metrics: metrics, logger: logger, onRunning: onRunning)
        // Started first to last, shut down last to first: the mirrors stop their runs first,
        // the manager saves every download, its events end (so the notifier lets WebSocket
        // clients go), the fleet's link stops (calls carried here are answered until then),
        // then the listener stops.
        var services = ServiceGroupConfiguration(
            services: [.init(service: listener, successTerminationBehavior: .gracefullyShutdownGroup)]
                + (fleet.map { [.init(service: $0, successTerminationBehavior: .ignore)] } ?? []) + [
                    .init(service: shutdownRequests, successTerminationBehavior: .gracefullyShutdownGroup),
                    // Ends by itself once the manager's events end.
                    .init(service: notifier, successTerminationBehavior: .ignore),
                    .init(
                        service: ManagerService(manager: manager, downloader: downloader),
                        successTerminationBehavior: .gracefullyShutdownGroup),
                    .init(service: mirrors, successTerminationBehavior: .ignore),
                ],
            gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        services.maximumGracefulShutdownDuration = .seconds(20)
        defer { DaemonEndpoint.remove(stateDirectory: configuration.stateDirectory) }
        do {
            try await ServiceGroup(configuration: services).run()
        } catch {
            guard listener.isListening else {
                throw Failure(
                    description:
                        "cannot listen on \(configuration.address):\(configuration.port): \(Self.reason(error)); is another daemon running? Choose another --rpc-listen-port"
                )
            }
            logger.debug("stopped: \(error)")
        }
        // The store failed on the way (a full disk, a database gone): what came after is not saved.
        if let failure = await manager.failure { throw Failure(description: "stopped without saving everything: \(failure.message)") }
    }

    static func engineConfiguration(_ configuration: Configuration, logger: Logger) -> Downloader.Configuration {
        var engine = Downloader.Configuration(stateDirectory: configuration.stateDirectory)
        engine.store = configuration.store
        engine.rateLimit = configuration.rateLimit
        engine.stallTimeout = configuration.stallTimeout
        engine.saveCookies = configuration.saveCookies
        engine.logger = logger
        return engine
    }

    static func globalOptions(_ configuration: Configuration) -> GlobalOptions {
        let root = Aria2Options.absolute(configuration.directory)
        var globals = GlobalOptions(dir: root, folders: FolderPolicy(root: root, confined: !configuration.hasSecret))
        let defaults = configuration.defaults
        globals.split = configuration.connections
        globals.maxConnectionPerServer = configuration.connections
        globals.minSplitSize = defaults.minimumSplitSize
        globals.maxDownloadLimit = defaults.rateLimit ?? 0
        globals.maxTries = defaults.maxTries
        globals.retryWait = Int(defaults.retryWait.components.seconds)
        globals.headers = defaults.headers
        globals.allowOverwrite = defaults.overwrite
        globals.network = defaults.network
        return globals
    }

    static func reason(_ error: any Error) -> String {
        if let error = error as? IOError { return String(cString: strerror(error.errnoCode)) }
        return "\(error)"
    }
}
