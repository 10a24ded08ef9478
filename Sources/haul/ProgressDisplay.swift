import Foundation
import Haul

/// What a person sees on stderr: a redrawn bar on a terminal, an occasional plain line
/// otherwise, nothing but errors with `-q`.
struct ProgressDisplay: Sendable {
    let quiet: Bool
    /// Plain-line mode prints at most this often.
    static let plainInterval: Duration = .seconds(5)
    /// A terminal is redrawn at most this often.
    static let barInterval: Duration = .milliseconds(200)

    func follow(_ progress: AsyncStream<DownloadProgress>, url: String) async {
        guard !quiet else {
            for await _ in progress {}
            return
        }
        var lastDraw: ContinuousClock.Instant?
        var lastNote: String?
        for await snapshot in progress {
            if let note = snapshot.note, note != lastNote {
                lastNote = note
                Terminal.clearLine()
                Terminal.write("\(name(of: snapshot, url: url)): \(note)\n")
                continue
            }
            let now = ContinuousClock.now
            let interval = Terminal.isInteractive ? Self.barInterval : Self.plainInterval
            if let lastDraw, now - lastDraw < interval { continue }
            lastDraw = now
            let line = describe(snapshot, url: url)
            if Terminal.isInteractive {
                Terminal.write("\r\u{1B}[2K" + String(line.prefix(Terminal.width - 1)))
            } else {
                Terminal.write(line + "\n")
            }
        }
        Terminal.clearLine()
    }

    private func name(of snapshot: DownloadProgress, url: String) -> String {
        snapshot.destination.map { ($0 as NSString).lastPathComponent } ?? url
    }

    func describe(_ snapshot: DownloadProgress, url: String) -> String {
        var parts = [name(of: snapshot, url: url)]
        if let fraction = snapshot.fraction {
            parts.append(String(format: "%3.0f%%", fraction * 100))
            if Terminal.isInteractive {
                let width = 20
                let filled = Int(fraction * Double(width))
                parts.append("[" + String(repeating: "=", count: filled) + String(repeating: " ", count: width - filled) + "]")
            }
            parts.append("\(Format.bytes(snapshot.bytesDone)) / \(Format.bytes(snapshot.totalBytes ?? 0))")
        } else {
            parts.append(Format.bytes(snapshot.bytesDone))
        }
        if snapshot.bytesPerSecond > 0 { parts.append(Format.rate(snapshot.bytesPerSecond)) }
        if let eta = snapshot.eta { parts.append("ETA \(Format.duration(eta))") }
        return parts.joined(separator: "  ")
    }

    func succeeded(_ result: DownloadResult, url: String, elapsed: Duration) {
        guard !quiet else { return }
        if result.wasAlreadyComplete {
            Terminal.write("\(result.path): already downloaded (\(Format.bytes(result.bytes)))\n")
            return
        }
        let seconds = max(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18, 0.001)
        let continued = result.bytesFetched < result.bytes ? ", \(Format.bytes(result.bytesFetched)) of it now" : ""
        Terminal.write("\(result.path): saved \(Format.bytes(result.bytes))\(continued) in \(Format.duration(elapsed)) (\(Format.rate(Double(result.bytesFetched) / seconds)))\n")
    }

    func failed(_ error: DownloadError, url: String) {
        Terminal.error("\(url): \(error.message)")
    }
}
