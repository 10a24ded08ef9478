import Foundation
import Haul

/// What a person sees on stderr while `haul put` runs: on a terminal, one line redrawn in
/// place (as `haul get` draws a download); otherwise a plain line every few seconds. Why an
/// earlier upload is not continued is said once, as its own line. With `-q`, only errors.
struct UploadDisplay: Sendable {
    let quiet: Bool
    /// The file's name, as the line starts.
    let name: String

    /// Draws the snapshots until the stream ends (the upload ended).
    func run(_ progress: AsyncStream<UploadProgress>) async {
        var lastPlain = ContinuousClock.now
        var lastDrawn = ContinuousClock.now - ProgressDisplay.drawInterval
        var saidRestart = false
        for await snapshot in progress {
            if let reason = snapshot.restartReason, !saidRestart {
                saidRestart = true
                // Said even with -q: the server gets the whole file again, and why matters.
                Terminal.clearDisplay()
                Terminal.error(reason)
            }
            guard !quiet else { continue }
            let now = ContinuousClock.now
            if Terminal.isInteractive {
                guard now - lastDrawn >= ProgressDisplay.drawInterval else { continue }
                lastDrawn = now
                Terminal.redraw([line(snapshot)])
            } else if now - lastPlain >= ProgressDisplay.plainInterval {
                lastPlain = now
                Terminal.write(line(snapshot) + "\n")
            }
        }
    }

    /// `name  45%  [=====     ]  115.2 MiB / 256.0 MiB  80.1 MiB/s  ETA 0:02  tus`.
    func line(_ progress: UploadProgress) -> String {
        var parts = [name, String(format: "%3.0f%%", progress.fraction * 100)]
        if Terminal.isInteractive { parts.append(ProgressDisplay.bar(progress.fraction, width: Terminal.width >= 100 ? 20 : 10)) }
        parts.append("\(Format.bytes(progress.bytesSent)) / \(Format.bytes(progress.totalBytes))")
        if let note = progress.note {
            parts.append(note)
        } else {
            if progress.bytesPerSecond > 0 { parts.append(Format.rate(progress.bytesPerSecond)) }
            if let eta = progress.eta { parts.append("ETA \(Format.duration(eta))") }
        }
        if let kind = progress.protocol { parts.append(kind.rawValue) }
        return parts.joined(separator: "  ")
    }

    /// `FILE: uploaded 256.0 MiB by tus, 160.0 MiB of it now, in 0:03 (80.0 MiB/s)`.
    static func doneLine(_ result: UploadResult, elapsed: Duration) -> String {
        let continued = result.bytesSent < result.bytes ? ", \(Format.bytes(result.bytesSent)) of it now," : ""
        let rate = Format.rate(ProgressDisplay.rate(result.bytesSent, in: elapsed))
        return "\(result.file): uploaded \(Format.bytes(result.bytes)) by \(result.protocol.rawValue)\(continued) in \(Format.duration(elapsed)) (\(rate))"
    }
}
