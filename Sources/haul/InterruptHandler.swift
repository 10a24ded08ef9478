import Dispatch
import Foundation
import Haul
import Synchronization

/// Ctrl-C (and SIGTERM) pause the running download, wait until its state is saved, say how
/// to continue, and exit 130 (143 for SIGTERM).
final class InterruptHandler {
    /// The download to pause, shared with the signal handlers.
    private final class Current: Sendable {
        let task = Mutex<DownloadTask?>(nil)
    }

    private let current = Current()
    private var sources: [any DispatchSourceSignal] = []

    init() {
        for (signalNumber, status) in [(SIGINT, Int32(130)), (SIGTERM, Int32(143))] {
            // The default action would kill us before the state is saved.
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler { [current] in
                let running = current.task.withLock { $0 }
                Task {
                    await running?.pauseAndWait()
                    Terminal.clearLine()
                    Terminal.error("interrupted: progress saved; run the same command again to continue")
                    exit(status)
                }
            }
            source.resume()
            sources.append(source)
        }
    }

    /// Sets the download that an interrupt pauses.
    func follow(_ task: DownloadTask?) {
        current.task.withLock { $0 = task }
    }
}
