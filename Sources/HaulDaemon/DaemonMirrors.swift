import Foundation
import Haul
import Logging
import ServiceLifecycle
import Synchronization

/// The daemon's mirrors: folder trees it keeps in sync, each run as a ``Mirror`` (a queue of
/// its own in the store, with the options it was added with), once or again every
/// ``Definition/every`` seconds after each run ends.
///
/// The definitions are kept in the store beside the daemon's saved settings, so a restart
/// keeps them, and a run that a stop, a crash or `kill -9` interrupted continues at the next
/// start. A run that is due while the daemon stops starts at the next start.
actor DaemonMirrors: Service {
    /// One mirror as added (`haul.addMirror`), with what its last run did.
    struct Definition: Codable, Sendable {
        var url: String
        var dir: String
        /// Seconds from the end of a run to the start of the next; nil runs it once.
        var every: Int?
        var deletesGone = false
        var include: [String] = []
        var exclude: [String] = []
        var level = 50
        var maxConcurrentDownloads: Int
        /// A checksum file read at the start of each run (an http(s) URL, or a path on the
        /// daemon's machine); optional, so that definitions saved before it still read.
        var checksumFile: String?
        /// With ``checksumFile``: a file it does not list fails.
        var requiresChecksum: Bool?
        /// The request its listings and files are fetched with (the daemon's options and the
        /// ones given at the add).
        var template: DownloadRequest
        var lastStarted: Date?
        var lastEnded: Date?
        var last: Counts?
        /// The last run's problems, one line each (the first ``maxProblems``).
        var problems: [String] = []

        /// The mirror as the library runs it, its files held to the daemon's
        /// `--max-connections-per-host` of the day.
        func configuration(maxConnectionsPerHost: Int = 16) -> Mirror.Configuration {
            var configuration = Mirror.Configuration(url: url, directory: dir, template: template)
            configuration.deletesGone = deletesGone
            configuration.include = include
            configuration.exclude = exclude
            configuration.maxDepth = level
            configuration.maxConcurrentDownloads = maxConcurrentDownloads
            configuration.maxConnectionsPerHost = maxConnectionsPerHost
            configuration.checksumFile = checksumFile
            configuration.requiresChecksum = requiresChecksum ?? false
            return configuration
        }

        /// When it is due: at once when it never ran or a run did not end, else `every` after
        /// the last end; nil when it ran once and is not repeated.
        var nextRun: Date? {
            guard let lastStarted, let lastEnded, lastEnded >= lastStarted, last?.interrupted != true else { return .distantPast }
            return every.map { lastEnded.addingTimeInterval(TimeInterval($0)) }
        }
    }

    /// What a run did (``Mirror/Summary`` without its errors).
    struct Counts: Codable, Sendable {
        var new = 0, updated = 0, unchanged = 0, deleted = 0, failed = 0, skipped = 0
        var bytesFetched: Int64 = 0
        var interrupted = false

        init(_ summary: Mirror.Summary) {
            (new, updated, unchanged, deleted, failed, skipped) = (
                summary.new, summary.updated, summary.unchanged, summary.deleted, summary.failed, summary.skipped
            )
            bytesFetched = summary.bytesFetched
            interrupted = summary.interrupted
        }
    }

    static let maxProblems = 20
    /// The prefix of a definition's name among the daemon's saved settings.
    static let settingPrefix = "mirror."
    /// How often due mirrors are looked for.
    static let tick: Duration = .seconds(1)

    let downloader: Downloader
    /// The daemon's manager, whose saved settings keep the definitions.
    let settings: DownloadManager
    let logger: Logger
    /// The daemon's `--max-connections-per-host`, which each mirror's files keep to.
    let maxConnectionsPerHost: Int
    private(set) var definitions: [String: Definition] = [:]
    private var running: [String: (mirror: Mirror, task: Task<Void, Never>)] = [:]
    /// Reading the kept definitions, once; every caller waits for it.
    private var loading: Task<Void, Never>?
    /// Set by ``stopAll()``: no run starts after it.
    private var stopping = false
    /// Ticks since the definitions were read, in a fleet (``rereadTicks``).
    private var ticksSinceRead = 0
    /// How many ticks apart the eldest daemon of a fleet reads the definitions again.
    static let rereadTicks = 5

    init(downloader: Downloader, settings: DownloadManager, logger: Logger, maxConnectionsPerHost: Int = 16) {
        self.downloader = downloader
        self.settings = settings
        self.logger = logger
        self.maxConnectionsPerHost = maxConnectionsPerHost
    }

    /// A mirror's id: the 16 hex digits of its queue's name (one per URL and folder).
    static func id(of configuration: Mirror.Configuration) -> String {
        String(configuration.queue.dropFirst("mirror-".count))
    }

    // MARK: The service

    /// Reads the kept definitions, then starts each mirror when it is due, until the daemon
    /// stops; then stops the runs (as a crash would: the next start continues them).
    func run() async throws {
        await load()
        try? await cancelWhenGracefulShutdown {
            while true {
                await self.startDue()
                try await Task.sleep(for: Self.tick)
            }
        }
        await stopAll()
    }

    /// Reads the definitions kept in the store (once; a second caller waits for the first).
    func load() async {
        if loading == nil { loading = Task { await self.read() } }
        await loading?.value
    }

    private func read() async {
        let saved: [String: String]
        do { saved = try await settings.savedSettings() } catch {
            logger.error("the daemon's mirrors could not be read, none runs: \(error.message)")
            return
        }
        for (name, json) in saved where name.hasPrefix(Self.settingPrefix) {
            let id = String(name.dropFirst(Self.settingPrefix.count))
            // A mirror added while they were read is newer than what was kept.
            guard definitions[id] == nil else { continue }
            guard let definition = try? JSONDecoder().decode(Definition.self, from: Data(json.utf8)) else {
                logger.error("the daemon's mirror \(id) is not a mirror this version can read, it does not run; add it again")
                continue
            }
            definitions[id] = definition
        }
    }

    func stopAll() async {
        stopping = true
        let runs = running.values
        for run in runs { await run.mirror.stop() }
        for run in runs { await run.task.value }
    }

    private func startDue() async {
        // In a fleet (a queue several daemons share), one daemon runs the mirrors: the eldest
        // live member. It reads the definitions again now and then, for those added through another.
        if settings.queueIsShared {
            guard await settings.isEldestOfFleet else { return }
            ticksSinceRead += 1
            if ticksSinceRead >= Self.rereadTicks {
                ticksSinceRead = 0
                await read()
            }
        }
        let now = Date()
        for (id, definition) in definitions where running[id] == nil {
            if let next = definition.nextRun, next <= now { await start(id) }
        }
    }

    // MARK: Changes

    /// Adds a mirror, or replaces the definition of the one of the same URL and folder (keeping
    /// what its last run did), and runs it now unless it runs already. Returns its id.
    func add(_ definition: Definition) async throws(DownloadError) -> String {
        await load()
        let id = Self.id(of: definition.configuration())
        var definition = definition
        let earlier = definitions[id]
        if let earlier {
            (definition.lastStarted, definition.lastEnded, definition.last, definition.problems) = (
                earlier.lastStarted, earlier.lastEnded, earlier.last, earlier.problems
            )
        }
        // In memory first: a run that ends while this is saved records what it did on it.
        definitions[id] = definition
        do { try await save(definition, id: id) } catch {
            definitions[id] = earlier
            throw error
        }
        if running[id] == nil { await start(id) }
        return id
    }

    /// Stops and forgets a mirror; its files and its records stay (adding it again continues).
    func remove(_ id: String) async throws(DownloadError) -> Bool {
        await load()
        guard let definition = definitions[id] else { return false }
        // Forgotten in memory first: a run that ends meanwhile does not save it again.
        definitions[id] = nil
        do { try await settings.removeSettings([Self.settingPrefix + id]) } catch {
            definitions[id] = definition
            throw error
        }
        if let run = running[id] {
            await run.mirror.stop()
            await run.task.value
        }
        return true
    }

    /// Runs a mirror now, unless it runs already; false when there is none of that id.
    func runNow(_ id: String) async -> Bool {
        await load()
        guard definitions[id] != nil else { return false }
        if running[id] == nil { await start(id) }
        return true
    }

    private func save(_ definition: Definition, id: String) async throws(DownloadError) {
        let json: String
        do { json = String(decoding: try JSONEncoder().encode(definition), as: UTF8.self) } catch {
            throw .io("the mirror of \(URLRedaction.redact(definition.url)) could not be saved: \(error)")
        }
        try await settings.saveSettings([Self.settingPrefix + id: json])
    }

    /// Starts a run, and keeps that it started: a run that has not ended at the next start of
    /// the daemon (a crash) runs again.
    private func start(_ id: String) async {
        guard !stopping, var definition = definitions[id], running[id] == nil else { return }
        guard await settings.isEldestOfFleet else {
            logger.notice("mirror \(id): saved; the eldest daemon of the fleet runs it")
            return
        }
        definition.lastStarted = Date()
        definition.problems = []
        definitions[id] = definition
        let mirror = Mirror(definition.configuration(maxConnectionsPerHost: maxConnectionsPerHost), downloader: downloader)
        let (logger, url) = (logger, URLRedaction.redact(definition.url))
        logger.notice("mirror \(id): \(url) → \(definition.dir) started")
        let task = Task {
            let problems = ProblemLog(limit: Self.maxProblems)
            let outcome: Result<Mirror.Summary, DownloadError>
            do throws(DownloadError) {
                outcome = .success(
                    try await mirror.run { event in
                        if case .problem(let message) = event {
                            logger.warning("mirror \(id): \(message)")
                            problems.append(message)
                        }
                    })
            } catch {
                outcome = .failure(error)
            }
            await self.finished(id, mirror: mirror, outcome, problems: problems.lines)
        }
        running[id] = (mirror, task)
        do { try await save(definition, id: id) } catch {
            logger.error("mirror \(id): that its run started could not be saved: \(error.message)")
        }
    }

    private func finished(_ id: String, mirror: Mirror, _ outcome: Result<Mirror.Summary, DownloadError>, problems: [String]) async {
        if running[id]?.mirror === mirror { running[id] = nil }
        guard var definition = definitions[id] else { return }
        definition.lastEnded = Date()
        definition.problems = problems
        switch outcome {
        case .success(let summary):
            definition.last = Counts(summary)
            logger.notice(
                "mirror \(id): \(summary.interrupted ? "stopped" : "done"): \(summary.new) new, \(summary.updated) updated, \(summary.unchanged) unchanged, \(summary.deleted) deleted, \(summary.failed) failed"
            )
        case .failure(let error):
            definition.last = nil
            definition.problems = [error.description] + problems
            logger.error("mirror \(id): \(error.description)")
        }
        definitions[id] = definition
        do { try await save(definition, id: id) } catch {
            logger.error("mirror \(id): what its run did could not be saved: \(error.message)")
        }
    }

    // MARK: Reading

    /// One mirror as `haul.tellMirrors` shows it: its definition, whether it runs, and the
    /// files of its current run.
    struct Status: Sendable {
        var id: String
        var definition: Definition
        var totals: DownloadManager.Totals?
    }

    func statuses() async -> [Status] {
        await load()
        var statuses: [Status] = []
        for (id, definition) in definitions.sorted(by: { $0.key < $1.key }) {
            var totals: DownloadManager.Totals?
            if let run = running[id] { totals = await run.mirror.manager.totals() }
            statuses.append(Status(id: id, definition: definition, totals: totals))
        }
        return statuses
    }
}

/// A run's problems as they happen, the first `limit` of them.
private final class ProblemLog: Sendable {
    private let state: Mutex<[String]>
    private let limit: Int

    init(limit: Int) {
        state = Mutex([])
        self.limit = limit
    }

    func append(_ line: String) { state.withLock { if $0.count < limit { $0.append(line) } } }
    var lines: [String] { state.withLock { $0 } }
}
