import Dispatch
import Foundation
import Haul

/// Ctrl-C (and SIGTERM) stop every running download, wait until their state is saved, say
/// how to continue, and exit 130 (143 for SIGTERM).
final class InterruptHandler {
    private var sources: [any DispatchSourceSignal] = []

    init(manager: DownloadManager) {
        for (signalNumber, status) in [(SIGINT, Int32(130)), (SIGTERM, Int32(143))] {
            // The default action would kill us before the state is saved.
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler {
                Task {
                    // Leaves the queue as a crash would, with every written byte recorded.
                    await manager.shutdown()
                    Terminal.clearDisplay()
                    Terminal.error("interrupted: progress saved; run the same command again to continue")
                    exit(status)
                }
            }
            source.resume()
            sources.append(source)
        }
    }
}
