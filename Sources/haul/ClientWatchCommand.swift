import ArgumentParser
import Dispatch
import Foundation
import HaulDaemon

struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Show the daemon's downloads live until Ctrl-C.",
        discussion: """
            On a terminal, one line per active or waiting download and a total line, redrawn in place \
            on stderr like haul get; otherwise those lines every --interval seconds. A line GID complete \
            PATH, GID error: MESSAGE or GID removed is printed as each download ends. Ctrl-C exits 0.

            Exit status: \(ClientExitStatus.summary)
            """)

    @Option(help: "Seconds between updates (default: 0.5 on a terminal, 5 otherwise, where each update is printed as plain lines).")
    var interval: Double?

    @Flag(help: "Return once no download is active or waiting (paused ones do not count), e.g. in scripts.")
    var exitWhenIdle = false

    @OptionGroup var daemon: DaemonOptions

    func validate() throws {
        if let interval, !(interval >= 0.05 && interval <= 3600) {
            throw ValidationError("--interval must be between 0.05 and 3600 seconds")
        }
    }

    func run() async throws {
        let interactive = Terminal.isInteractive
        let watcher = Watcher(
            client: try daemon.connect(), interactive: interactive,
            interval: .milliseconds(Int64((interval ?? (interactive ? 0.5 : 5)) * 1000)),
            exitWhenIdle: exitWhenIdle)
        let watching = Task { try await watcher.run() }
        // Ctrl-C ends the watch, not the process: the last frame stays and the status is 0.
        signal(SIGINT, SIG_IGN)
        let interrupt = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        interrupt.setEventHandler { watching.cancel() }
        interrupt.resume()
        defer { interrupt.cancel() }
        do {
            try await watching.value
        } catch let failure as ClientFailure {
            Terminal.clearDisplay()
            throw failure.report()
        }
    }
}

/// Polls the daemon and draws what it answers.
struct Watcher: Sendable {
    let client: DaemonClient
    let interactive: Bool
    /// Between redraws on a terminal, between printed updates otherwise.
    let interval: Duration
    let exitWhenIdle: Bool

    /// Waiting and stopped downloads fetched per update: more than a terminal shows.
    static let listed: JSONValue = 200

    /// Endings are noticed this promptly even when plain updates are rare.
    static let endingPoll: Duration = .milliseconds(500)

    /// Draws until cancelled, or until idle with `exitWhenIdle`.
    func run() async throws(ClientFailure) {
        let poll = interactive ? interval : min(interval, Self.endingPoll)
        let keys = JSONValue.array(RemoteDownload.keys.map { .string($0) })
        var stoppedBefore: Set<String>?
        var lastPrinted: ContinuousClock.Instant?
        while !Task.isCancelled {
            let results: [Result<JSONValue, RPCError>]
            do throws(ClientFailure) {
                results = try await client.multicall([
                    ("aria2.tellActive", [keys]),
                    ("aria2.tellWaiting", [0, Self.listed, keys]),
                    // Newest first, so the newly stopped ones are in the page however many there are.
                    ("aria2.tellStopped", [-1, Self.listed, keys]),
                    ("aria2.getGlobalStat", []),
                ])
            } catch {
                // Ctrl-C during a call fails the call; that is no error.
                if Task.isCancelled { return }
                throw error
            }
            let unfinished =
                try client.downloads(results[0], of: "aria2.tellActive")
                + client.downloads(results[1], of: "aria2.tellWaiting")
            let stopped = try client.downloads(results[2], of: "aria2.tellStopped")
            let stat = (try? results[3].get()) ?? [:]

            if let stoppedBefore {
                let ended = stopped.reversed().filter { !stoppedBefore.contains($0.gid) }.compactMap(\.endingLine)
                if !ended.isEmpty {
                    Terminal.clearDisplay()
                    Terminal.write(ended.map { $0 + "\n" }.joined())
                }
            }
            stoppedBefore = Set(stopped.map(\.gid))

            let lines = liveLines(unfinished, stat: stat)
            if interactive {
                Terminal.redraw(lines)
            } else if lastPrinted.map({ ContinuousClock.now - $0 >= interval }) ?? true {
                lastPrinted = .now
                Terminal.write(lines.map { $0 + "\n" }.joined())
            }
            if exitWhenIdle && !unfinished.contains(where: { $0.status != "paused" }) { return }
            do { try await Task.sleep(for: poll) } catch { return }
        }
    }

    /// As `haul get` draws: a line per download (as many as the terminal has room for) and a total line.
    func liveLines(_ downloads: [RemoteDownload], stat: JSONValue) -> [String] {
        let room = interactive ? max(1, min(10, Terminal.height - 3)) : 10
        let bar = interactive ? (Terminal.width >= 100 ? 20 : 10) : nil
        let shown = downloads.prefix(room)
        let nameWidth = min(40, shown.map(\.name.count).max() ?? 0)
        var lines = shown.map { $0.liveLine(nameWidth: nameWidth, bar: bar) }
        if downloads.count > room { lines.append("… and \(downloads.count - room) more") }
        lines.append(totalLine(downloads, stat: stat))
        return lines
    }

    func totalLine(_ downloads: [RemoteDownload], stat: JSONValue) -> String {
        var parts = ["total"]
        let paused = downloads.count { $0.status == "paused" }
        let counts = [
            ("active", stat["numActive"]?.integer ?? Int64(downloads.count { $0.status == "active" })),
            ("waiting", (stat["numWaiting"]?.integer ?? Int64(downloads.count - paused)) - Int64(paused)),
            ("paused", Int64(paused)),
            ("stopped", stat["numStopped"]?.integer ?? 0),
        ]
        for (word, count) in counts where count > 0 { parts.append("\(count) \(word)") }
        if parts.count == 1 { parts.append("nothing to do") }
        let done = downloads.reduce(Int64(0)) { $0 + $1.completedLength }
        let total = downloads.reduce(Int64(0)) { $0 + $1.totalLength }
        if done > 0 || total > 0 {
            parts.append(total > 0 ? "\(Format.bytes(done)) / \(Format.bytes(total))" : Format.bytes(done))
        }
        let speed = stat["downloadSpeed"]?.integer ?? 0
        if speed > 0 {
            parts.append(Format.rate(Double(speed)))
            if total > done { parts.append("ETA \(Format.duration(.seconds((total - done + speed - 1) / speed)))") }
        }
        return parts.joined(separator: "  ")
    }
}
