import Foundation
import Haul
import Synchronization

/// What a person sees on stderr while `haul get` runs: on a terminal, one line per running
/// download plus a total line, redrawn in place; otherwise a plain line every few seconds.
/// Errors are printed when they happen; a summary table ends a run of several downloads.
/// With `-q`, only errors.
final class ProgressDisplay: Sendable {
    /// A terminal is redrawn this often.
    static let drawInterval: Duration = .milliseconds(200)
    /// Plain-line mode (not a terminal) prints at most this often.
    static let plainInterval: Duration = .seconds(5)

    private let quiet: Bool
    private let manager: DownloadManager
    private let startedAt: ContinuousClock.Instant
    private struct State {
        /// This command's downloads, in the order given.
        var ids: [DownloadManager.ID] = []
        var known = Set<DownloadManager.ID>()
        /// How many stopped downloads have been looked at for failures to print.
        var stoppedSeen = 0
        /// How many had failed then.
        var failedSeen = 0
        /// Failures seen among the stopped downloads that are not (yet) known as this command's:
        /// an earlier run's in the same folder, or one of this run's that failed before its add
        /// returned. Looked at again each frame; printed once tracked.
        var unclaimed: [DownloadManager.Download] = []
        /// The sources said to be dropped, as "id uri".
        var droppedSaid = Set<String>()
        /// Failures that fail every file alike (a full disk): a few told, the rest counted and
        /// said in one line at the end.
        var tally = DownloadError.Reason.Tally()
    }
    private let state = Mutex(State())

    init(quiet: Bool, manager: DownloadManager, startedAt: ContinuousClock.Instant) {
        self.quiet = quiet
        self.manager = manager
        self.startedAt = startedAt
    }

    /// One more download of this command (once, however often it is given).
    func track(_ id: DownloadManager.ID) {
        state.withLock { state in
            if state.known.insert(id).inserted { state.ids.append(id) }
        }
    }

    var isEmpty: Bool { state.withLock { $0.ids.isEmpty } }

    private var count: Int { state.withLock { $0.ids.count } }

    /// Draws until cancelled. Each frame costs the running downloads and the ones that ended
    /// since the last, never the whole list.
    func run() async {
        var lastPlain = ContinuousClock.now
        while !Task.isCancelled {
            let running = await manager.active()
            // The manager holds only this command's downloads.
            let totals = await manager.totals()
            await reportNewFailures()
            if !quiet {
                reportDroppedSources(running)
                if Terminal.isInteractive {
                    Terminal.redraw(liveLines(running, totals: totals))
                } else if ContinuousClock.now - lastPlain >= Self.plainInterval {
                    lastPlain = .now
                    let lines = count == 1 ? running.map(line(for:)) : [totalLine(totals)]
                    for line in lines { Terminal.write(line + "\n") }
                }
            }
            try? await Task.sleep(for: Self.drawInterval)
        }
    }

    /// Clears the live lines, prints what is left to say, and returns the errors of the
    /// downloads that failed. A long list is read a page at a time: the summary of 100,000
    /// needs their counts and the few rows that did not go well, not all of them at once.
    func finish() async -> [DownloadError] {
        Terminal.clearDisplay()
        await reportNewFailures()
        reportFailedAlike()
        let ids = state.withLock { $0.ids }
        if ids.count <= Self.tableRows {
            var downloads: [DownloadManager.Download] = []
            for id in ids { if let download = await manager.download(id) { downloads.append(download) } }
            if !quiet {
                if downloads.count == 1, let only = downloads.first, let result = only.result {
                    Terminal.write(savedLine(result, elapsed: elapsed(only)) + "\n")
                } else if downloads.count > 1 {
                    let complete = downloads.filter { $0.status == .completed }
                    Terminal.write(
                        summaryTable(
                            downloads, complete: complete.count, of: downloads.count,
                            saved: complete.reduce(0) { $0 + ($1.result?.bytes ?? 0) }))
                }
            }
            return downloads.compactMap(\.error)
        }
        // The manager's lists also hold what earlier runs left in the same folders (it adopts
        // them to find a file downloaded before): only this command's downloads count.
        let totals = await manager.totals()
        var errors: [DownloadError] = []
        var unfinished: [DownloadManager.Download] = []
        // When every download the manager holds completed (the usual end of a long list), there
        // is no row to look for: reading 100,000 to find none took 0.4 s at the end of a run.
        let (waiting, stopped) = (await manager.waitingCount, await manager.stoppedCount)
        let allCompleted = waiting == 0 && stopped == totals.completed
        for list in allCompleted ? [] : [DownloadList.stopped, .waiting] {
            var offset = 0
            while true {
                let page =
                    list == .stopped
                    ? await manager.stopped(from: offset, limit: Self.page)
                    : await manager.waiting(from: offset, limit: Self.page)
                let mine = state.withLock { state in page.filter { state.known.contains($0.id) } }
                for download in mine where download.status != .completed {
                    if let error = download.error { errors.append(error) }
                    if unfinished.count < Self.tableRows { unfinished.append(download) }
                }
                offset += page.count
                if page.count < Self.page { break }
            }
        }
        if !quiet {
            Terminal.write(summaryTable(unfinished, complete: totals.completed, of: ids.count, saved: totals.bytesDone))
        }
        return errors
    }

    private enum DownloadList { case stopped, waiting }

    /// Downloads read from the manager at once.
    static let page = 1000

    /// Prints the failures among the downloads that stopped since the last look.
    private func reportNewFailures() async {
        let (seen, failedSeen, waiting) = state.withLock { ($0.stoppedSeen, $0.failedSeen, !$0.unclaimed.isEmpty) }
        let total = await manager.stoppedCount
        var stopped: [DownloadManager.Download] = []
        if total > seen {
            // What stopped since is all complete unless the failed count moved: no need to read it.
            let failed = await manager.totals().failed
            state.withLock { $0.failedSeen = failed }
            if failed != failedSeen {
                // A failing store stops everything with one error, said once at the end.
                let storeFailure = await manager.failure
                stopped = await manager.stopped(from: seen, limit: total - seen).filter { $0.status == .failed && $0.error != storeFailure }
            }
        } else if !waiting {
            return
        }
        // An earlier run's failure in the same folder is not this run's to print.
        let fresh = state.withLock { state in
            state.stoppedSeen = max(state.stoppedSeen, total)
            let failures = state.unclaimed + stopped
            state.unclaimed = failures.filter { !state.known.contains($0.id) }
            return failures.filter { state.known.contains($0.id) }
        }
        guard !fresh.isEmpty else { return }
        // A full disk fails every file alike: a few are told, the rest counted (``finish()``).
        let told = state.withLock { state in fresh.filter { download in download.error.map { state.tally.tells($0) } ?? true } }
        guard !told.isEmpty else { return }
        Terminal.clearDisplay()
        for download in told.prefix(Self.failuresShown) {
            Terminal.error("\(download.url): \(download.error?.message ?? "failed")")
        }
        if told.count > Self.failuresShown { Terminal.error("… and \(told.count - Self.failuresShown) more failed") }
    }

    /// Says how many more files failed for each reason that fails every file alike.
    private func reportFailedAlike() {
        for line in state.withLock({ $0.tally.countedLines }) { Terminal.error(line) }
    }

    /// Says once, in a line of its own, each source a running download stopped using and why
    /// (a live line shows it only while it is drawn, and a plain one not at all).
    private func reportDroppedSources(_ running: [DownloadManager.Download]) {
        var lines: [String] = []
        for download in running {
            for source in download.progress?.sources ?? [] {
                guard let why = source.dropped else { continue }
                let said = state.withLock { $0.droppedSaid.insert("\(download.id) \(source.uri)").inserted }
                if said { lines.append("\(name(of: download)): dropped source \(source.uri): \(why)") }
            }
        }
        guard !lines.isEmpty else { return }
        Terminal.clearDisplay()
        for line in lines { Terminal.error(line) }
    }

    /// Failure lines printed at once, at most.
    static let failuresShown = 50

    // MARK: Lines

    func liveLines(_ running: [DownloadManager.Download], totals: DownloadManager.Totals) -> [String] {
        let room = max(1, min(10, Terminal.height - 3))
        var lines: [String] = []
        for download in running.prefix(room) {
            lines.append(line(for: download))
            // One download from several sources: each one's speed, or why it was dropped.
            if running.count == 1 { lines += sourceLines(for: download) }
        }
        if running.count > room { lines.append("… and \(running.count - room) more running") }
        if count > 1 { lines.append(totalLine(totals)) }
        return lines
    }

    func line(for download: DownloadManager.Download) -> String {
        var parts = [name(of: download)]
        guard let progress = download.progress else { return (parts + ["starting"]).joined(separator: "  ") }
        if let fraction = progress.fraction {
            parts.append(String(format: "%3.0f%%", fraction * 100))
            if Terminal.isInteractive { parts.append(Self.bar(fraction, width: Terminal.width >= 100 ? 20 : 10)) }
            parts.append("\(Format.bytes(progress.bytesDone)) / \(Format.bytes(progress.totalBytes ?? 0))")
        } else {
            parts.append(Format.bytes(progress.bytesDone))
        }
        if let note = progress.note {
            parts.append(note)
        } else {
            if progress.bytesPerSecond > 0 { parts.append(Format.rate(progress.bytesPerSecond)) }
            if let eta = progress.eta { parts.append("ETA \(Format.duration(eta))") }
        }
        return parts.joined(separator: "  ")
    }

    /// `  from https://mirror.example/f.iso  2.0 MiB/s` for each source of a download from several, at most
    /// eight (the rest counted).
    func sourceLines(for download: DownloadManager.Download) -> [String] {
        let sources = download.progress?.sources ?? []
        var lines = sources.prefix(8).map { source in
            "  from \(source.uri)  " + (source.dropped.map { "dropped: \($0)" } ?? Format.rate(source.bytesPerSecond))
        }
        if sources.count > 8 { lines.append("  … and \(sources.count - 8) more sources") }
        return lines
    }

    func totalLine(_ totals: DownloadManager.Totals) -> String {
        let count = totals.queued + totals.running + totals.paused + totals.completed + totals.failed
        var parts = ["total", "\(totals.completed)/\(count) done"]
        if totals.running > 0 { parts.append("\(totals.running) running") }
        if totals.queued > 0 { parts.append("\(totals.queued) queued") }
        if totals.failed > 0 { parts.append("\(totals.failed) failed") }
        parts.append(
            totals.totalBytes > 0
                ? "\(Format.bytes(totals.bytesDone)) / \(Format.bytes(totals.totalBytes))" : Format.bytes(totals.bytesDone))
        if totals.bytesPerSecond > 0 { parts.append(Format.rate(totals.bytesPerSecond)) }
        if let eta = totals.eta, totals.totalBytes > totals.bytesDone { parts.append("ETA \(Format.duration(eta))") }
        return parts.joined(separator: "  ")
    }

    /// `[=====     ]`: `fraction` of `width` cells filled.
    static func bar(_ fraction: Double, width: Int) -> String {
        let filled = Int(fraction * Double(width))
        return "[" + String(repeating: "=", count: filled) + String(repeating: " ", count: width - filled) + "]"
    }

    private func name(of download: DownloadManager.Download) -> String {
        if download.destinationIsFile { return (download.destination as NSString).lastPathComponent }
        let last = URLComponents(string: download.url)?.path.split(separator: "/").last.map(String.init)
        return last ?? download.url
    }

    private func elapsed(_ download: DownloadManager.Download) -> Duration? {
        guard let start = download.startedAt else { return nil }
        return (download.endedAt ?? .now) - start
    }

    // MARK: The end

    func savedLine(_ result: DownloadResult, elapsed: Duration?) -> String {
        if result.wasAlreadyComplete { return "\(result.path): already downloaded (\(Format.bytes(result.bytes)))" }
        let time = elapsed ?? (.now - startedAt)
        let continued = result.bytesFetched < result.bytes ? ", \(Format.bytes(result.bytesFetched)) of it now" : ""
        return
            "\(result.path): saved \(Format.bytes(result.bytes))\(continued) in \(Format.duration(time)) (\(Format.rate(Self.rate(result.bytesFetched, in: time))))"
    }

    /// NAME, SIZE, TIME, AVG SPEED, RESULT for every download, then a total line.
    /// The table that ends a run of several downloads: a row each (a long list shows only
    /// those that did not complete), then the count line.
    func summaryTable(_ downloads: [DownloadManager.Download], complete: Int, of total: Int, saved: Int64) -> String {
        var rows = [["NAME", "SIZE", "TIME", "AVG SPEED", "RESULT"]]
        // A long list shows only what did not go well (the count line says the rest).
        let long = total > Self.tableRows
        for download in downloads where !(long && download.status == .completed) {
            if rows.count > Self.tableRows { break }
            let time = elapsed(download)
            switch download.status {
            case .completed:
                let result = download.result
                let fetched = result?.bytesFetched ?? 0
                rows.append([
                    name(of: download), Format.bytes(result?.bytes ?? 0), time.map(Format.duration) ?? "-",
                    result?.wasAlreadyComplete == true ? "-" : Format.rate(Self.rate(fetched, in: time ?? .zero)),
                    result?.wasAlreadyComplete == true ? "already there" : "ok",
                ])
            case .failed:
                rows.append([
                    name(of: download), download.progress.map { Format.bytes($0.bytesDone) } ?? "-",
                    time.map(Format.duration) ?? "-", "-", "failed: \(download.error?.message ?? "")",
                ])
            case .queued, .running, .paused:
                rows.append([
                    name(of: download), download.progress.map { Format.bytes($0.bytesDone) } ?? "-",
                    time.map(Format.duration) ?? "-", "-", "stopped",
                ])
            }
        }
        var text = ""
        if rows.count > 1 {
            let nameWidth = min(40, rows.map { $0[0].count }.max() ?? 4)
            text = Table.render(rows.map { [Self.fit($0[0], nameWidth)] + $0.dropFirst() }, rightAligned: [1, 2, 3])
        }
        text += "\(complete) of \(total) downloads complete, \(Format.bytes(saved)) in \(Format.duration(.now - startedAt))\n"
        return text
    }

    /// Rows of the summary table, at most.
    static let tableRows = 50

    /// `name` shortened in the middle to `width` characters.
    static func fit(_ name: String, _ width: Int) -> String {
        guard name.count > width, width > 3 else { return name }
        let keep = width - 1
        return String(name.prefix(keep - keep / 2)) + "…" + String(name.suffix(keep / 2))
    }

    static func rate(_ bytes: Int64, in time: Duration) -> Double {
        let seconds = Double(time.components.seconds) + Double(time.components.attoseconds) / 1e18
        return Double(bytes) / max(seconds, 0.001)
    }
}
