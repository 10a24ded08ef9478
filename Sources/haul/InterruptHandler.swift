import Dispatch
import Foundation
import Haul
import Synchronization

/// Ctrl-C (and SIGTERM) stop every running download; once their state is saved, `haul get`
/// says how to continue and exits 130 (143 for SIGTERM).
final class InterruptHandler {
    /// The status owed, shared with the signal handlers.
    private final class Received: Sendable {
        let status = Mutex<Int32?>(nil)
    }

    private let received = Received()
    private let sources: [any DispatchSourceSignal]

    convenience init(manager: DownloadManager) {
        self.init { Task { await manager.shutdown() } }
    }

    /// Calls `stop` at the first signal (and at each further one); the status is the first's.
    init(stop: @escaping @Sendable () -> Void) {
        var sources: [any DispatchSourceSignal] = []
        let received = self.received
        for (signalNumber, status) in [(SIGINT, Int32(130)), (SIGTERM, Int32(143))] {
            // The default action would kill us before the state is saved.
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler {
                received.status.withLock { $0 = $0 ?? status }
                // Leaves the queue as a crash would, with every written byte recorded; the
                // manager then turns idle and the command ends.
                stop()
            }
            source.resume()
            sources.append(source)
        }
        self.sources = sources
    }

    /// The exit status owed to a signal that arrived, if one did.
    var exitStatus: Int32? { received.status.withLock { $0 } }
}
