import ArgumentParser
import Foundation
import Haul
import HaulDaemon

/// `GID...` or `--all`.
struct GIDSelection: ParsableArguments {
    @Argument(help: "GIDs, as haul add or haul ls printed them.")
    var gids: [String] = []

    @Flag(help: "Every download of the daemon instead.")
    var all = false

    func validate() throws {
        if gids.isEmpty == !all { throw ValidationError("give GIDs or --all (not both)") }
        try GID.validate(gids)
    }

    /// Calls `method` with each GID, or `allMethod` once for `--all`.
    func apply(_ method: String, all allMethod: String, on daemon: DaemonOptions) async throws {
        let client = try daemon.connect()
        if all {
            do throws(ClientFailure) { _ = try await client.call(allMethod) } catch { throw error.report() }
            return
        }
        try await client.each(gids) { gid throws(ClientFailure) in _ = try await client.call(method, [.string(gid)]) }
    }
}

extension DaemonClient {
    /// Calls `method` with each GID; a GID the daemon refuses is reported and the others are
    /// still done. Throws the exit owed once all are done, or at once when the daemon is gone.
    func each(_ gids: [String], _ body: (String) async throws(ClientFailure) -> Void) async throws {
        var refused = false
        for gid in gids {
            do throws(ClientFailure) {
                try await body(gid)
            } catch  where error.isRefusal {
                Terminal.error(error.description)
                refused = true
            } catch {
                throw error.report()
            }
        }
        if refused { throw ExitCode(ClientExitStatus.refused) }
    }
}

struct PauseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pause",
        abstract: "Pause downloads of the daemon; their progress is kept for haul resume.",
        discussion: "Exit status: \(ClientExitStatus.summary)")

    @OptionGroup var selection: GIDSelection
    @OptionGroup var daemon: DaemonOptions

    func run() async throws {
        try await selection.apply("aria2.pause", all: "aria2.pauseAll", on: daemon)
    }
}

struct ResumeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume",
        abstract: "Resume paused downloads of the daemon where they stopped.",
        discussion: "Exit status: \(ClientExitStatus.summary)")

    @OptionGroup var selection: GIDSelection
    @OptionGroup var daemon: DaemonOptions

    func run() async throws {
        try await selection.apply("aria2.unpause", all: "aria2.unpauseAll", on: daemon)
    }
}

struct RemoveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Remove downloads from the daemon: stop unfinished ones, deleting their partial files, and forget finished ones, keeping their files.",
        discussion: """
            A stopped unfinished download stays listed as removed until removed again (as in aria2); \
            --all removes every unfinished download and then forgets every stopped one.

            Exit status: \(ClientExitStatus.summary)
            """,
        aliases: ["rm"])

    @OptionGroup var selection: GIDSelection
    @OptionGroup var daemon: DaemonOptions

    func run() async throws {
        let client = try daemon.connect()
        if selection.all {
            do throws(ClientFailure) { try await Self.removeAll(client) } catch { throw error.report() }
            return
        }
        try await client.each(selection.gids) { gid throws(ClientFailure) in try await Self.remove(gid, client) }
    }

    static func remove(_ gid: String, _ client: DaemonClient) async throws(ClientFailure) {
        let download = try await client.status(gid, keys: ["gid", "status"])
        if download.isUnfinished {
            do throws(ClientFailure) {
                _ = try await client.call("aria2.remove", [.string(gid)])
                return
            } catch  where error.isRefusal {
                // It finished between the two calls: forget its result instead.
            }
        }
        _ = try await client.call("aria2.removeDownloadResult", [.string(gid)])
    }

    /// Removes every unfinished download, page by page, then forgets every stopped one.
    static func removeAll(_ client: DaemonClient) async throws(ClientFailure) {
        // A few rounds: downloads added while removing are removed too, up to a point.
        for _ in 0..<5 {
            let unfinished = try await client.everyDownload(keys: ["gid"], stopped: false).downloads
            if unfinished.isEmpty { break }
            // A refusal means that download finished meanwhile; the purge below takes it.
            _ = try await client.each("aria2.remove", unfinished.map(\.gid))
        }
        // Unfinished uploads too; the purge forgets them with the downloads.
        if let uploads = try await client.uploads() {
            _ = try await client.each("aria2.remove", uploads.map(RemoteDownload.init).filter(\.isUnfinished).map(\.gid))
        }
        _ = try await client.call("aria2.purgeDownloadResult")
        let stat = try await client.call("aria2.getGlobalStat")
        let left = (stat["numActive"]?.integer ?? 0) + (stat["numWaiting"]?.integer ?? 0) + (stat["numStopped"]?.integer ?? 0)
        if left > 0 {
            throw .refused("\(left) downloads are still there: downloads kept being added while removing; run haul remove --all again")
        }
    }
}

struct ShutdownCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "shutdown",
        abstract: "Stop the daemon: it saves every download's progress and exits; the next haul daemon continues.",
        discussion: """
            Returns once the daemon has exited (at most \(Int(Self.patience.components.seconds)) s), so \
            haul shutdown && haul daemon & restarts it cleanly.

            Exit status: \(ClientExitStatus.summary)
            """)

    @OptionGroup var daemon: DaemonOptions

    /// How long saving the state of every download may take.
    static let patience: Duration = .seconds(60)

    func run() async throws {
        let client = try daemon.connect()
        do throws(ClientFailure) { _ = try await client.call("aria2.shutdown") } catch { throw error.report() }
        let stateDirectory = daemon.stateDir ?? Downloader.defaultStateDirectory
        let deadline = ContinuousClock.now + Self.patience
        while Self.isRunning(client.endpoint, stateDirectory: stateDirectory) {
            guard ContinuousClock.now < deadline else {
                Terminal.error(
                    "the daemon (pid \(client.endpoint.pid)) asked to shut down is still running after \(Int(Self.patience.components.seconds)) s; see its log")
                throw ExitCode(ClientExitStatus.unavailable)
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// The daemon removes its daemon.json as it exits; its pid being gone covers a daemon
    /// killed on the way out.
    static func isRunning(_ endpoint: DaemonEndpoint, stateDirectory: String) -> Bool {
        guard let current = try? DaemonEndpoint.read(stateDirectory: stateDirectory), current.pid == endpoint.pid else {
            return false
        }
        return kill(endpoint.pid, 0) == 0 || errno == EPERM
    }
}
